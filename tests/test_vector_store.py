"""UserVectorIndex (projections.retrieval.vector_store) with the HashingEmbedder test double."""

import faiss
import numpy as np
import pytest

from projections.retrieval.embedders import HashingEmbedder
from projections.retrieval.vector_store import UserVectorIndex

DOCS = {
    "f1": "I drink green tea every morning",
    "f2": "My sister lives in Lisbon",
    "f3": "我喜欢在海滩和湖泊附近拍摄风景",
    "f4": "The project deadline is next Friday",
}


@pytest.fixture
def emb():
    return HashingEmbedder(dim=64)


@pytest.fixture
def index(emb):
    idx = UserVectorIndex(emb.dim)
    for doc_id, text in DOCS.items():
        idx.add(doc_id, emb.embed_query(text))
    return idx


def test_search_returns_exact_inner_products(index, emb):
    q = emb.embed_query("green tea in the morning")
    hits = index.search(q, k=4)
    assert [d for d, _ in hits][0] == "f1"
    assert len(hits) == 4
    mat = emb.embed_passages(list(DOCS.values()))
    expected = dict(zip(DOCS, (mat @ q).tolist()))
    for doc_id, score in hits:
        assert score == pytest.approx(expected[doc_id], abs=1e-6)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    # CJK query against the CJK memory
    assert index.search(emb.embed_query("在海滩拍摄风景"), k=1)[0][0] == "f3"
    # k larger than the index is capped, k=0 is empty
    assert len(index.search(q, k=100)) == 4
    assert index.search(q, k=0) == []


def test_remove_really_removes(index, emb):
    q = emb.embed_query(DOCS["f1"])
    assert index.search(q, k=1)[0][0] == "f1"
    assert index.remove("f1") is True
    assert len(index) == 3 and "f1" not in index
    assert index._index.ntotal == 3  # gone from FAISS itself, not only from the id map
    assert "f1" not in [d for d, _ in index.search(q, k=10)]
    with pytest.raises(KeyError):
        index.get_vector("f1")
    assert index.remove("f1") is False
    index.add("f1", q)  # re-adding works and gets a fresh internal id
    assert index.search(q, k=1) == [("f1", pytest.approx(1.0, abs=1e-6))]
    assert len(index) == 4


def test_add_existing_id_replaces(index, emb):
    new = emb.embed_query("I moved to Porto")
    index.add("f2", new)
    assert len(index) == 4
    np.testing.assert_array_equal(index.get_vector("f2"), new)
    assert index.search(new, k=1)[0][0] == "f2"


def test_dim_mismatch_refused_with_both_dims(index):
    with pytest.raises(ValueError, match=r"dim 32.*dim 64"):
        index.add("bad", np.ones(32, dtype=np.float32))
    with pytest.raises(ValueError, match=r"dim 128.*dim 64"):
        index.search(np.ones(128, dtype=np.float32), k=1)
    with pytest.raises(ValueError, match=r"dim 63.*dim 64"):
        index.add_many(["x", "y"], np.ones((2, 63), dtype=np.float32))
    assert len(index) == 4 and "bad" not in index


def test_bad_input_changes_nothing(index):
    with pytest.raises(ValueError):
        index.add("nan", np.full(64, np.nan, dtype=np.float32))
    with pytest.raises(ValueError):
        index.add_many(["a", "a"], np.ones((2, 64), dtype=np.float32))
    with pytest.raises(TypeError):
        index.add(7, np.ones(64, dtype=np.float32))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        UserVectorIndex(0)
    assert len(index) == 4


def test_search_restores_the_process_wide_thread_count(index, emb):
    # search() drops FAISS to one OpenMP thread for the query; the setting is process-global, so it must
    # be put back for other FAISS users in the process.
    prev = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(3)
    try:
        index.search(emb.embed_query("tea"), k=2)
        assert faiss.omp_get_max_threads() == 3
    finally:
        faiss.omp_set_num_threads(prev)


def test_empty_index():
    idx = UserVectorIndex(8)
    assert idx.search(np.ones(8, dtype=np.float32), k=5) == []
    assert len(idx) == 0
