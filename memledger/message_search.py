"""Search over the logged messages (the raw conversation), scored like fact search: dense + BM25, absolute.

``MemoryLedger.search_messages(user, query, k)`` ranks one user's messages (optionally one session's) for a query:

* lexical: :class:`projections.retrieval.lexical.LexicalIndex` (BM25 over CJK-aware tokens) of the user's messages;
* dense: the embedder of the ledger's ``vectors`` projection (``embed_texts`` goes through its persistent
  embedding cache, so a message is embedded once per model), cosine similarity — skipped when the ledger was
  opened without the vectors projection (``MEMLEDGER_EMBEDDER=none``), leaving BM25 alone;
* score: the absolute relevance of projections/retrieval/relevance.py (standardised cosine plus BM25 over the query's bound,
  through a logistic), the same scale as fact search's ``parts.relevance``; RRF only breaks ties.

Indexes are built in process from the ``messages`` projection and kept per (user, session filter) until a new
message arrives (the projection's last position changes). This reads; it never writes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from ledger.errors import BadInput
from ledger.timeutil import from_micros

from .store import Store

MAX_K = 1000
_CACHE_SIZE = 8


class MessageHit(BaseModel):
    """One message found by :func:`search_messages`, best first (``rank`` from 1).

    ``score`` is the absolute relevance (projections/retrieval/relevance.py); ``dense_rank`` / ``lexical_rank`` are the message's ranks in each ranking (None if
    not in that ranking's pool).
    """

    rank: int
    session_id: str
    message_id: str
    role: str
    speaker: str | None
    text: str
    observed_at: datetime
    score: float
    dense_rank: int | None
    lexical_rank: int | None


def _check(user_id: Any, query: Any, k: Any, session_id: Any) -> tuple[str, str, int, str | None]:
    from ledger.schemas import check_user_id
    from ledger.sessions import check_session_id

    user_id = check_user_id(user_id)
    if not isinstance(query, str) or not query.strip():
        raise BadInput("query", "is empty", "say what to look for")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise BadInput("k", f"{k!r} is not a number of hits in 1..{MAX_K}", "e.g. 10")
    if session_id is not None:
        session_id = check_session_id(session_id)
    return user_id, query, k, session_id


def ranked_messages(ml: Store, user_id: str, query: str, k: int, session_id: str | None) -> list[dict[str, Any]]:
    """The user's messages (or one session's) scored for ``query``, best first, at most ``max(k, 50)``: dicts with
    the message row and ``relevance`` (absolute, projections/retrieval/relevance.py), ``dense``, ``dense_z``, ``lexical``,
    ``lexical_n``, ``rrf``, ``dense_rank``, ``lexical_rank``. Reads only (the caller validated the arguments)."""
    import numpy as np  # here, not at import: `memledger profile` in a fresh process never needs it

    from projections.retrieval.fusion import rrf
    from projections.retrieval.lexical import LexicalIndex
    from projections.retrieval.relevance import lexical_bound, relevance_function
    from ledger.text import has_cjk

    with ml.db.read() as cur:
        if session_id is not None and ml.state_cards_projection.session(cur, user_id, session_id) is None:
            from .optout import is_no_memory

            if is_no_memory(cur, user_id, session_id):
                return []  # an open --no-memory session: its messages are not indexed for search
            raise BadInput("--session", f"{session_id!r} is not a session of {user_id!r}",
                           "name a session that was started or logged to (see `memledger resume`)")
        rows = ml.messages_projection.all(cur, user_id, session_id)
    if not rows:
        return []
    ids = [f"{r['session_id']}\x1f{r['message_id']}" for r in rows]
    cache: dict[tuple, Any] = ml.__dict__.setdefault("_message_search_cache", {})
    stamp = (user_id, session_id, len(rows), max(r["position"] for r in rows))
    entry = cache.get(stamp)
    vp = getattr(ml, "vectors_projection", None)
    if entry is None:
        index = LexicalIndex.from_documents(zip(ids, (r["text"] for r in rows)))
        matrix = None
        if vp is not None:
            matrix = np.asarray(vp.embed_texts([r["text"] for r in rows]), dtype=np.float32)
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            matrix = matrix / np.where(norms == 0, 1, norms)
        if len(cache) >= _CACHE_SIZE:
            cache.pop(next(iter(cache)))
        entry = cache[stamp] = (index, matrix)
    index, matrix = entry
    pool = max(k, 50)
    lex = index.search(query, pool)
    lexical = [d for d, _ in lex]
    rankings, weights = [lexical], [1.0]
    dense: list[str] = []
    sims = None
    model = None
    if matrix is not None and vp is not None:
        q = np.asarray(vp.embed_query(query), dtype=np.float32)
        q = q / (np.linalg.norm(q) or 1.0)
        sims = matrix @ q
        model = vp.model_id
        order = np.argsort(-sims, kind="stable")[:pool]
        dense = [ids[i] for i in order]
        rankings = [dense, lexical]
        weights = [vp.dense_weight_for(query), vp.lexical_weight]
    fused = rrf(rankings, k=vp.rrf_k if vp is not None else 60, weights=weights)
    pos = {d: i for i, d in enumerate(ids)}
    d_rank = {d: i + 1 for i, d in enumerate(dense)}
    l_rank = {d: i + 1 for i, d in enumerate(lexical)}
    lex_score = dict(lex)
    # scored as facts are (projections/retrieval/ranking.py rank): the same weights, anchors and CJK rule
    score_of = relevance_function(model, lexical_bound(index, query),
                                  *(() if vp is None else (vp.lexical_weight_abs, vp.dense_z_weight(query))),
                                  cjk=has_cjk(query))
    out = []
    for doc, score in fused:
        i = pos[doc]
        cos = None if sims is None else float(sims[i])
        rel, dz, ln = score_of(cos, lex_score.get(doc))
        out.append({"row": rows[i], "relevance": rel, "dense": cos, "dense_z": dz, "lexical": lex_score.get(doc),
                    "lexical_n": ln, "rrf": score, "dense_rank": d_rank.get(doc), "lexical_rank": l_rank.get(doc),
                    "doc_id": doc, "model": model})
    out.sort(key=lambda c: (-c["relevance"], -c["rrf"], c["doc_id"]))
    return out


def search_messages(ml: Store, user_id: str, query: str, k: int = 10,
                    session_id: str | None = None) -> list[MessageHit]:
    """Rank ``user_id``'s messages (or one session's) for ``query``; see the module docstring. ``score`` is the
    absolute relevance of projections/retrieval/relevance.py (comparable with fact search's ``parts.relevance``).

    Raises:
        BadInput: empty query, k outside 1..1000, malformed user or session id, or a ``session_id`` that is not a
            session of the user (as ``context --session`` refuses it; nothing is read).
    """
    from .poisoning import message_text

    user_id, query, k, session_id = _check(user_id, query, k, session_id)
    ml.before_read(None, 10.0)
    out = []
    for rank, c in enumerate(ranked_messages(ml, user_id, query, k, session_id)[:k], 1):
        r = c["row"]
        out.append(MessageHit(rank=rank, session_id=r["session_id"], message_id=r["message_id"], role=r["role"],
                              speaker=r["speaker"], text=message_text(r), observed_at=from_micros(r["observed_at"]),
                              score=c["relevance"], dense_rank=c["dense_rank"], lexical_rank=c["lexical_rank"]))
    return out
