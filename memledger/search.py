"""Semantic search over one user's memories: the read side of the ``vectors`` projection, with explainable scores.

``MemoryLedger.search`` and ``memledger search`` call :func:`search`. The score of a hit (issue 4)::

    score = relevance * confidence * freshness + role_bonus

* ``relevance`` — reciprocal rank fusion (Cormack et al., SIGIR 2009) of the dense ranking (cosine of unit
  vectors, FAISS inner product) and the lexical one (BM25 over CJK-aware tokens), divided by its maximum, so a
  memory first in both rankings has relevance 1.0. A query containing CJK, for a user with CJK memories, is ranked
  by the multilingual CJK companion instead of the main embedder, fused with BM25 by relative scores
  (``parts.fusion == "relative_score"``, ``parts.dense_model`` names the companion; projections/vectors.py).
* ``confidence`` — the version's confidence in [0, 1] (ledger/schemas.py defaults it by source).
* ``freshness`` — ``0.5 ** (age / half_life)``, ``age`` = seconds from the memory's ``valid_from`` to the query
  instant (``as_of``, else now); ``half_life`` is the longest matching key prefix in ``half_lives`` (seconds); a
  key with no configured half-life does not decay (freshness 1.0).
* ``role_bonus`` — added when the caller's ``role`` equals the role the memory was recorded under.

Filters (``source``) apply *before* the top ``k`` is cut: the candidate pool grows until ``k`` memories pass or
every memory of the user was considered, so a filter never yields a short page while matches exist.

``as_of`` searches what the ledger believed at that instant: the candidates are the rows of the history
projection's bitemporal timeline believed at system time T and valid at T (projections/history.py), embedded
through the embedding cache, never the current index.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict

from ledger.errors import BadInput
from ledger.schemas import RoleContext, Source, check_user_id
from ledger.timeutil import OPEN, from_micros, now_utc, parse_instant, to_micros

from .store import EMBEDDER_ENV, Store, check_half_lives  # noqa: F401 (EMBEDDER_ENV re-exported)

DEFAULT_ROLE_BONUS = 0.1
MAX_K = 1000


class ScoreParts(BaseModel):
    """Why a hit scored what it did: ``score = relevance * confidence * freshness + role_bonus``."""

    model_config = ConfigDict(frozen=True)
    relevance: float
    dense: float | None  # cosine similarity in [-1, 1]; None if not in the dense top pool
    dense_rank: int | None
    lexical: float | None  # BM25 score; None if no query term occurs in the memory
    lexical_rank: int | None
    rrf: float
    confidence: float
    freshness: float
    role_bonus: float
    dense_model: str | None = None  # model id behind ``dense``: the main embedder, or the CJK companion
    fusion: str = "rrf"  # what made ``relevance``: "rrf" (rrf / its maximum) or "relative_score" (CJK companion)


class SearchHit(BaseModel):
    """One memory found by :func:`search` (``memledger search --json`` prints a list of these)."""

    model_config = ConfigDict(frozen=True)
    rank: int
    doc_id: str
    key: str
    version: int
    text: str
    value: Any
    score: float
    parts: ScoreParts
    status: str  # current | contested (as_of: believed | contested)
    source: str
    source_ref: str | None
    session_id: str | None
    role: RoleContext | None
    recorded_at: datetime | None
    observed_at: datetime | None
    valid_from: datetime | None
    valid_to: datetime | None


def freshness(key: str, valid_from_us: int | None, at_us: int, half_lives: dict[str, float]) -> float:
    """``0.5 ** (age / half_life)`` for the longest prefix of ``key`` in ``half_lives`` (seconds); else 1.0.

    ``age`` is ``at - valid_from`` in seconds, never negative (a memory valid from the future is fresh).
    """
    best = None
    for prefix, hl in half_lives.items():
        if key.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, hl)
    if best is None or valid_from_us is None:
        return 1.0
    age = max(0.0, (at_us - valid_from_us) / 1e6)
    return math.pow(0.5, age / best[1])



def check_search_args(user_id: Any, query: Any, k: Any, as_of: Any, source: Any, role: Any) -> tuple:
    """Validate search arguments (nothing is read before this passes). Raises BadInput naming the field."""
    user_id = check_user_id(user_id)
    if not isinstance(query, str) or not query.strip():
        raise BadInput("query", "is empty", "give the text to search for, e.g. 'what does the user drink?'")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise BadInput("k", f"{k!r} is not a whole number from 1 to {MAX_K}", "e.g. -k 10")
    at = None if as_of is None else parse_instant(as_of, "as_of")
    sources = get_args(Source)
    if source is not None and source not in sources:
        raise BadInput("source", f"{source!r} is not a source", "use one of " + ", ".join(sources))
    if role is not None and (not isinstance(role, str) or not role.strip()):
        raise BadInput("role", "is empty", "give the role the agent plays now, e.g. 'coach'")
    return user_id, query, k, at, source, role


def _role_of(meta: dict[str, Any]) -> RoleContext | None:
    return None if meta.get("role") is None else RoleContext(**json.loads(meta["role"]))


def _hit(rank: int, c: Any, score: float, parts: ScoreParts) -> SearchHit:
    m = c.meta
    return SearchHit(
        rank=rank, doc_id=c.doc_id, key=m["key"], version=m["version"], text=m["text"],
        value=None if m["value_json"] is None else json.loads(m["value_json"]), score=score, parts=parts,
        status=m["status"], source=m["source"], source_ref=m["source_ref"], session_id=m["session_id"],
        role=_role_of(m), recorded_at=from_micros(m["recorded_at"]), observed_at=from_micros(m["observed_at"]),
        valid_from=from_micros(m["valid_from"]), valid_to=from_micros(m["valid_to"]),
    )


def _score(cands: list[Any], k: int, at_us: int, source: str | None, role: str | None,
           half_lives: dict[str, float], role_bonus: float) -> list[SearchHit]:
    scored = []
    for c in cands:
        m = c.meta
        if source is not None and m["source"] != source:
            continue
        fr = freshness(m["key"], m["valid_from"], at_us, half_lives) if half_lives else 1.0
        bonus = 0.0
        if role is not None and m["role"] is not None and json.loads(m["role"]).get("role") == role:
            bonus = role_bonus
        conf = float(m["confidence"])
        scored.append((c.relevance * conf * fr + bonus, c, conf, fr, bonus))
    scored.sort(key=lambda t: (-t[0], -t[1].relevance, -t[1].rrf, t[1].doc_id))
    out = []
    for i, (score, c, conf, fr, bonus) in enumerate(scored[:k], 1):  # models only for the hits returned
        parts = ScoreParts(relevance=c.relevance, dense=c.dense, dense_rank=c.dense_rank, lexical=c.lexical,
                           lexical_rank=c.lexical_rank, rrf=c.rrf, confidence=conf, freshness=fr, role_bonus=bonus,
                           dense_model=c.dense_model, fusion=c.fusion)
        out.append(_hit(i, c, score, parts))
    return out


def search_caught_up(ml: Any, user_id: str, query: str, k: int = 10, as_of: Any = None, source: str | None = None,
           role: str | None = None, *, half_lives: dict[str, float] | None = None,
           role_bonus: float = DEFAULT_ROLE_BONUS, pool: int | None = None) -> list[SearchHit]:
    """Search ``user_id``'s memories on ledger ``ml`` (already caught up by the caller). See the module docstring.

    Args:
        pool: first candidate pool per ranking (default ``max(50, 5 * k)``); it grows while a filter leaves fewer
            than ``k`` hits and the user has more memories.

    Returns:
        Up to ``k`` :class:`SearchHit`, best first (fewer only if the user has fewer matching memories).

    Raises:
        BadInput: a malformed argument (naming it), or a ledger opened without the vectors projection.
    """
    user_id, query, k, at, source, role = check_search_args(user_id, query, k, as_of, source, role)
    proj = getattr(ml, "vectors_projection", None)
    if proj is None:
        raise BadInput("embedder", "this ledger was opened without the vectors projection (embedder 'none')",
                       f"open it with embedder='minilm' (or unset {EMBEDDER_ENV})")
    half_lives = check_half_lives(half_lives if half_lives is not None else getattr(ml, "half_lives", None))
    at_us = to_micros(at if at is not None else now_utc())
    assert at_us is not None
    if at is not None:
        return _search_as_of(ml, proj, user_id, query, k, at_us, source, role, half_lives, role_bonus)
    pool = pool or max(50, 5 * k)
    while True:
        with ml.db.read() as cur:
            mem = proj.refresh(cur)
        with mem.lock:
            u = mem.users.get(user_id)
            if u is None or not u.meta:
                return []
            # A CJK query over a user with CJK memories is ranked by the companion: the main model is not asked.
            # Query vectors are cached per model (projections/vectors.py), so a widened pool does not re-embed.
            if proj.uses_companion(query, u.cjk):
                qvec, cvec = None, proj.embed_cjk_query(query)
            else:
                qvec, cvec = proj.embed_query(query), None
            cands = proj.rank(u.vectors, u.lexical, u.meta, query, qvec, pool, companion=u.cjk,
                              companion_vector=cvec)
            n_docs = len(u.meta)
        hits = _score(cands, k, at_us, source, role, half_lives, role_bonus)
        if len(hits) >= k or pool >= n_docs or source is None:
            return hits
        pool *= 4


def _search_as_of(ml: Any, proj: Any, user_id: str, query: str, k: int, at_us: int, source: str | None,
                  role: str | None, half_lives: dict[str, float], role_bonus: float) -> list[SearchHit]:
    from projections.lexical import LexicalIndex
    from projections.vector_store import UserVectorIndex
    from projections.vectors import fact_doc_id, has_cjk, lexical_document

    hp = ml.history_projection
    with ml.db.read() as cur:
        cur.execute(
            "SELECT t.key, t.version, t.status, t.valid_from, t.valid_to, v.text, v.value_json, v.source, "
            "v.source_ref, v.session_id, v.confidence, v.role, v.recorded_at, v.observed_at, v.position "
            f"FROM {hp.table('timeline')} t JOIN {hp.table('versions')} v ON v.user_id = t.user_id "
            "AND v.key = t.key AND v.version = t.version "
            "WHERE t.user_id = ? AND t.recorded_from <= ? AND t.recorded_to > ? AND t.valid_from <= ? "
            "AND t.valid_to > ? ORDER BY t.key",
            (user_id, at_us, at_us, at_us, at_us),
        )
        rows = cur.fetchall()
    cols = ["key", "version", "status", "valid_from", "valid_to", "text", "value_json", "source", "source_ref",
            "session_id", "confidence", "role", "recorded_at", "observed_at", "position"]
    metas = {}
    for r in rows:
        m = dict(zip(cols, r))
        if m["text"] is None:  # an erased subject's event keeps no text
            continue
        m["valid_to"] = None if m["valid_to"] == OPEN else m["valid_to"]
        metas[fact_doc_id(m["key"])] = m
    if not metas:
        return []
    docs = list(metas)
    li = LexicalIndex.from_documents((d, lexical_document(metas[d]["key"], metas[d]["text"])) for d in docs)
    # The same routing as the current index: a CJK query is ranked by the companion over the CJK texts then believed.
    cjk_docs = [d for d in docs if has_cjk(metas[d]["text"])] if proj.cjk_embedder is not None else []
    if cjk_docs and has_cjk(query):
        cvecs = proj.embed_cjk_texts([metas[d]["text"] for d in cjk_docs])
        ci = UserVectorIndex(cvecs.shape[1])
        ci.add_many(cjk_docs, cvecs)
        cands = proj.rank(None, li, metas, query, None, len(docs), companion=ci,
                          companion_vector=proj.embed_cjk_query(query))
    else:
        vecs = proj.embed_texts([metas[d]["text"] for d in docs])
        vi = UserVectorIndex(vecs.shape[1])
        vi.add_many(docs, vecs)
        cands = proj.rank(vi, li, metas, query, proj.embed_query(query), len(docs))
    return _score(cands, k, at_us, source, role, half_lives, role_bonus)


def search(store: Store, user_id: str, query: str, k: int = 10, as_of: Any = None, source: str | None = None,
           role: str | None = None, *, after: Any = None, timeout: float = 10.0,
           half_lives: dict[str, float] | None = None, role_bonus: float = DEFAULT_ROLE_BONUS) -> list[SearchHit]:
    """``user_id``'s memories most relevant to ``query`` (``memledger search USER QUERY --json``).

    Args:
        k: how many hits (1..1000). as_of: an aware instant (ISO string or datetime): search what the ledger
            believed then. source: only memories from this source (applied before the top k is cut).
            role: the agent's current role; memories recorded under it get ``role_bonus``.
        after, timeout: read-your-writes as for ``profile``. half_lives: overrides the store's.

    Returns:
        Up to ``k`` :class:`SearchHit` with score parts, best first. Only current versions are ever returned
        without ``as_of`` (projections/vectors.py); only this user's memories, ever.

    Raises:
        BadInput: naming the malformed field (nothing is read), or ``embedder`` if the store has no
            vectors projection. NotCaughtUp: see ``Store.wait_for``.
    """
    check_search_args(user_id, query, k, as_of, source, role)
    store.before_read(after, timeout, deferred=True)
    return search_caught_up(store, user_id, query, k, as_of, source, role, half_lives=half_lives,
                            role_bonus=role_bonus)
