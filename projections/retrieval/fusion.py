"""Rank fusion: combine rankings from different retrievers (dense vectors, BM25) into one.

Why RRF: dense cosine scores and BM25 scores live on unrelated scales (BM25 is unbounded and depends on
the corpus), so adding or min-max-normalising them is fragile. Reciprocal rank fusion uses ranks only,
needs no training and no score calibration, and is a strong baseline.
"""

from __future__ import annotations

import math
from typing import Sequence

__all__ = ["rrf"]


def rrf(
    rankings: Sequence[Sequence[str]],
    k: float = 60,
    weights: Sequence[float] | None = None,
) -> list[tuple[str, float]]:
    """Reciprocal rank fusion (Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion outperforms Condorcet
    and individual Rank Learning Methods", SIGIR 2009)::

        score(d) = sum over rankings r containing d of  w_r / (k + rank_r(d)),   rank starting at 1

    Args:
        rankings: each a list of doc ids, best first (e.g. ``[d for d, _ in index.search(q, 50)]``). A doc
            repeated within one ranking counts once, at its best rank. Rankings may differ in length and
            content; a doc absent from a ranking gets nothing from it.
        k: smoothing constant >= 0; 60 is the paper's value. Larger k flattens the advantage of top ranks.
        weights: optional per-ranking non-negative weights (same length as ``rankings``); default all 1.

    Returns:
        ``(doc_id, score)`` for every doc in any ranking, score descending. Ties are broken by the best
        (smallest) rank the doc reached in any ranking, then by doc id, so output is deterministic.

    Raises:
        ValueError: if ``k`` is negative or not finite, or ``weights`` has the wrong length or a negative
            or non-finite entry.
    """
    if not (math.isfinite(k) and k >= 0):
        raise ValueError(f"k must be a finite number >= 0, got {k!r}")
    if weights is None:
        weights = [1.0] * len(rankings)
    elif len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    for w in weights:
        if not (math.isfinite(w) and w >= 0):
            raise ValueError(f"weights must be finite and >= 0, got {w!r}")

    scores: dict[str, float] = {}
    best_rank: dict[str, int] = {}
    for ranking, w in zip(rankings, weights):
        seen: set[str] = set()
        for rank, doc_id in enumerate(ranking, start=1):
            if doc_id in seen:
                continue
            seen.add(doc_id)
            scores[doc_id] = scores.get(doc_id, 0.0) + w / (k + rank)
            if rank < best_rank.get(doc_id, math.inf):
                best_rank[doc_id] = rank
    return sorted(scores.items(), key=lambda kv: (-kv[1], best_rank[kv[0]], kv[0]))
