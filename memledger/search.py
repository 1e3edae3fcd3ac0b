"""Semantic search over users' memories: the read side of the ``vectors`` projection, with explainable scores.

Every face builds a :class:`~memledger.requests.SearchRequest` (checked there, once) and the ledger answers it
with :func:`search`, wrapped by the sensitivity gate (memledger/sensitivity.py ``search_gated``). The score of a
hit::

    score = relevance * confidence * freshness + role_bonus

* ``relevance`` — absolute, in (0, 1): a logistic of the memory's cosine with the query, standardised per model,
  plus BM25 over the query's bound (projections/retrieval/relevance.py). It depends only on the query, the memory and the
  model, never on the other hits, so scores compare across users, queries and calls: below 0.3 (``WEAK_MATCH``) a
  memory is unlikely to be about the query, above 0.7 it very likely is. A query containing CJK, for a user with
  CJK memories, is judged by the multilingual CJK companion's cosine instead of the main embedder's
  (``parts.fusion == "companion"``, ``parts.dense_model`` names it; projections/retrieval/ranking.py).
* ``confidence`` — the version's confidence in [0, 1] (ledger/schemas.py defaults it by source).
* ``freshness`` — ``0.5 ** (age / half_life)``, ``age`` = seconds from the memory's ``valid_from`` to the query
  instant (``as_of``, else now); ``half_life`` is the longest matching key prefix in ``half_lives`` (seconds); a
  key with no configured half-life does not decay (freshness 1.0).
* ``role_bonus`` — added when the caller's ``role`` equals the role the memory was recorded under.

Filters (``source``, ``exclude_source``, ``role_filter``, ``min_score``, the scopes ``agent_id`` / ``run_id``:
memledger/scopes.py) apply *before* the top ``k`` is cut: the
candidate pool grows until ``k`` memories pass or every memory of the user was considered, so a filter never yields
a short page while matches exist. ``min_score`` drops hits whose ``score`` is below it (default: nothing is cut).

Several users (``also=[...]``): each named user's memories are searched on their own indexes (isolation by
construction: only the users named are read) and the hits merged by ``score``; each hit carries its ``user_id``.
``within`` = ``"facts"`` (default), ``"messages"`` (logged conversation turns, memledger/message_search.py, scored by
the same absolute relevance; ``kind == "message"``) or ``"all"`` (both, merged by score).

``as_of`` searches what the ledger believed at that instant: the candidates are the rows of the history
projection's bitemporal timeline believed at system time T and valid at T (projections/history.py), embedded
through the embedding cache, never the current index.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ledger.errors import BadInput
from ledger.schemas import RoleContext
from ledger.timeutil import OPEN, from_micros, now_utc, to_micros

from .scopes import versions_in_scope
from .store import EMBEDDER_ENV, Store, check_half_lives  # noqa: F401 (EMBEDDER_ENV, check_half_lives re-exported)

from .defaults import DEFAULT_ROLE_BONUS  # noqa: E402,F401 (re-exported)
from .requests import (MAX_K, MAX_QUERY, MAX_SCORE, MAX_USERS, SEARCH_IN,  # noqa: F401 (re-exported)
                       SearchRequest, check_role_bonus, check_role_name)


class ScoreParts(BaseModel):
    """Why a hit scored what it did: ``score = relevance * confidence * freshness + role_bonus``.

    ``relevance = 1 / (1 + exp(-(dense_z + w * lexical_n - 2)))`` (projections/retrieval/relevance.py): ``dense_z`` is the
    cosine standardised for ``dense_model``, ``lexical_n`` the BM25 score over the query's bound, ``w`` 3."""

    model_config = ConfigDict(frozen=True)
    relevance: float
    dense: float | None  # cosine similarity in [-1, 1]; None if no dense model judged the memory
    dense_rank: int | None
    lexical: float | None  # BM25 score; None if no query term occurs in the memory
    lexical_rank: int | None
    rrf: float
    confidence: float
    freshness: float
    role_bonus: float
    dense_model: str | None = None  # model id behind ``dense``: the main embedder, or the CJK companion
    fusion: str = "absolute"  # which dense model judged ``relevance``: "absolute" (main embedder) | "companion" (CJK
    # query) | "cross_language" (the companion across languages: a CJK memory for an English query, a memory
    # without CJK for a CJK query)
    dense_z: float = 0.0  # ``dense`` standardised for ``dense_model`` (0: unrelated on average); no ``dense``: 2 x lexical_n
    lexical_n: float = 0.0  # BM25 over the query's bound, in [0, 1] (0: no shared term)


class SearchHit(BaseModel):
    """One memory found by :func:`search` (``memledger search --json`` prints a list of these).

    ``kind`` is ``"fact"`` (a fact's current version; ``key``/``version`` name it) or ``"message"`` (a logged
    conversation turn, ``--in messages|all``: ``key``/``version``/``value`` are None, ``message_id``/``speaker`` set,
    ``parts.confidence`` 1). ``user_id`` is the user whose memory it is (several with ``also``)."""

    model_config = ConfigDict(frozen=True)
    rank: int
    doc_id: str
    key: str | None
    version: int | None
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
    user_id: str | None = None
    kind: str = "fact"
    message_id: str | None = None
    speaker: str | None = None
    source_refs: list[str] = Field(default_factory=list, description=(
        "Every source that said this version: its own source_ref, then those of the statements that reaffirmed it "
        "(remember merges a statement said again into the memory it repeats), in log order, each once; with as_of, "
        "its own only."))
    path: str | None = Field(default=None, exclude_if=lambda v: v is None, description=(
        "With expand: the relations walked to this memory from the people the query names (\"sister Anna → husband "
        "Mark\"); absent on a hit the query found itself."))


#: the freshness factor of a contested version: the newer of two live versions of one attribute ranks first unless
#: the older is clearly the better match (relevance more than 1 / 0.6 = 1.67 times the newer's)
CONTESTED_FRESHNESS = 0.6


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



def _role_of(meta: dict[str, Any]) -> RoleContext | None:
    return None if meta.get("role") is None else RoleContext(**json.loads(meta["role"]))


def _hit(rank: int, c: Any, score: float, parts: ScoreParts, user_id: str | None = None) -> SearchHit:
    m = c.meta
    return SearchHit(user_id=user_id,
        rank=rank, doc_id=c.doc_id, key=m["key"], version=m["version"], text=m["text"],
        value=None if m["value_json"] is None else json.loads(m["value_json"]), score=score, parts=parts,
        status=m["status"], source=m["source"], source_ref=m["source_ref"], session_id=m["session_id"],
        role=_role_of(m), recorded_at=from_micros(m["recorded_at"]), observed_at=from_micros(m["observed_at"]),
        valid_from=from_micros(m["valid_from"]), valid_to=from_micros(m["valid_to"]),
    )


def _keep(m: dict[str, Any], req: SearchRequest) -> bool:
    if req.source is not None and m["source"] != req.source:
        return False
    if m["source"] in req.exclude_source:
        return False
    if req.min_confidence is not None and float(m["confidence"]) < req.min_confidence:
        return False
    if req.role_filter is not None:
        return m["role"] is not None and json.loads(m["role"]).get("role") == req.role_filter
    return True


def _score(cands: list[Any], req: SearchRequest, k: int, at_us: int, half_lives: dict[str, float],
           user_id: str | None = None) -> list[SearchHit]:
    scored = []
    for c in cands:
        m = c.meta
        if not _keep(m, req) or m["valid_from"] > max(at_us, m["observed_at"]):  # scheduled: not current yet
            continue
        fr = freshness(m["key"], m["valid_from"], at_us, half_lives) if half_lives else 1.0
        if m["status"] == "contested":
            # a version awaiting confirmation ("to confirm": a newer statement may replace it) weighs less, so that
            # a question about the attribute finds the newer answer first while both are live
            fr *= CONTESTED_FRESHNESS
        bonus = 0.0
        if req.role is not None and m["role"] is not None and json.loads(m["role"]).get("role") == req.role:
            bonus = req.role_bonus
        conf = float(m["confidence"])
        score = c.relevance * conf * fr + bonus
        if req.min_score is not None and score < req.min_score:
            continue
        scored.append((score, c, conf, fr, bonus))
    scored.sort(key=lambda t: (-t[0], -t[1].relevance, -t[1].rrf, t[1].doc_id))
    out = []
    for i, (score, c, conf, fr, bonus) in enumerate(scored[:k], 1):  # models only for the hits returned
        parts = ScoreParts(relevance=c.relevance, dense=c.dense, dense_rank=c.dense_rank, lexical=c.lexical,
                           lexical_rank=c.lexical_rank, rrf=c.rrf, confidence=conf, freshness=fr, role_bonus=bonus,
                           dense_model=c.dense_model, fusion=c.fusion, dense_z=c.dense_z, lexical_n=c.lexical_n)
        out.append(_hit(i, c, score, parts, user_id))
    return out


def rank(ml: Any, req: SearchRequest, user_id: str | None = None, k: int | None = None, *,
         query: str | None = None, pool: int | None = None, cross: bool = True) -> list[SearchHit]:
    """One user's hits for ``req`` on ledger ``ml`` (already caught up by the caller). See the module docstring.

    Args:
        user_id: whose memories (default ``req.user_id``; one of ``req.also`` when several users are searched).
        k: how many hits (default ``req.k``). query: another query than ``req.query`` (a walk along relations).
        pool: first candidate pool per ranking (default ``max(50, 5 * k)``); it grows while a filter leaves fewer
            than ``k`` hits and the user has more memories.
        cross: False keeps a CJK query from asking the companion about memories without CJK text (no companion
            vector is made for them: ``remember``'s candidate search, on the write path).

    Returns:
        Up to ``k`` :class:`SearchHit`, best first (fewer only if the user has fewer matching memories).

    Raises:
        BadInput: ``embedder``, a ledger opened without the vectors projection.
    """
    user_id = req.user_id if user_id is None else user_id
    k = req.k if k is None else k
    query = req.query if query is None else query
    proj = getattr(ml, "vectors_projection", None)
    if proj is None:
        raise BadInput("embedder", "this ledger was opened without the vectors projection (embedder 'none')",
                       f"open it with embedder='minilm' (or unset {EMBEDDER_ENV})")
    # the store's half-lives were checked when it was opened, the request's when it was built
    half_lives = req.half_lives if req.half_lives is not None else (getattr(ml, "half_lives", None) or {})
    at_us = to_micros(req.as_of if req.as_of is not None else now_utc())
    assert at_us is not None
    if req.within != "facts":
        # a message has no fact source and no role context: --source / --role-filter keep facts only
        # a message records its run (its session) but no agent: --agent keeps facts only
        msgs = [] if req.source is not None or req.role_filter is not None or req.agent_id is not None else \
            _message_hits(ml, user_id, query, k, req.min_score, req.run_id)
        facts = [] if req.within == "messages" else rank(
            ml, req.model_copy(update={"within": "facts"}), user_id, k, query=query, pool=pool)
        return renumber(sorted([*facts, *msgs], key=_merge_key)[:k])
    if req.as_of is not None:
        return _search_as_of(ml, proj, req, user_id, query, k, at_us, half_lives)
    # the union of the two top-``pool`` lists is scored; 50 (5 x k) gives the same LoCoMo recall as 100 (dev and held
    # out, to 0.1 point) at half the candidates
    pool = pool or max(50, 5 * k)
    while True:
        with ml.db.read() as cur:
            mem, u = proj.user_index(cur, user_id)
            with mem.lock:
                if u is None or not len(u):
                    return []
                routed = proj.uses_companion(query, u.cjk, proj.cross_docs(u) if cross else 0)
                pending = proj.cross_pending(user_id, u) if routed and cross else []
            rows = proj.doc_rows(cur, user_id, pending) if pending else {}
        # A CJK query over a user with CJK memories, or with English ones the companion may judge, is judged by the
        # companion: the main model is not asked. The query (and the companion vectors of English memories it has
        # not judged yet: projections/retrieval/cross_language.py) is embedded outside any transaction; query vectors
        # are cached per model (projections/retrieval/embedding.py), so a widened pool or a second look does not
        # re-embed.
        qvec, cvec = (None, proj.embed_cjk_query(query)) if routed else (proj.embed_query(query), None)
        found = proj.cross_vectors(user_id, rows) if rows else {}
        with ml.db.read() as cur:
            mem, u = proj.user_index(cur, user_id)  # the candidates' rows are read in the index's snapshot
            with mem.lock:
                if u is None or not len(u):
                    return []
                if proj.uses_companion(query, u.cjk, proj.cross_docs(u) if cross else 0) != routed:  # came or went
                    routed = not routed
                    qvec, cvec = (None, proj.embed_cjk_query(query)) if routed else (proj.embed_query(query), None)
                if found:
                    proj.add_cross(cur, user_id, u, found)
                cands = proj.rank(u.vectors, u.lexical, functools.partial(proj.doc_rows, cur, user_id), query, qvec,
                                  pool, companion=u.cjk, companion_vector=cvec, cross=u.cross if cross else None)
                if req.scope:  # the candidates' versions kept by one WHERE on their keys, before the top k is cut
                    keep = versions_in_scope(ml, cur, user_id, req.scope, {c.meta["key"] for c in cands})
                    cands = [c for c in cands if (c.meta["key"], c.meta["version"]) in keep]
                n_docs = len(u)
        hits = _score(cands, req, k, at_us, half_lives, user_id)
        if len(hits) >= k or pool >= n_docs or not req.filtered:
            return hits
        pool *= 4


def search_caught_up(ml: Any, user_id: str, query: str, k: int = 10) -> list[SearchHit]:
    """The best ``k`` of ``user_id``'s current memories for ``query``, no option set, on a ledger already caught up
    (``remember`` weighs its candidates this way). A CJK query does not ask the companion about memories without
    CJK text (their vectors are made at a search, never on the write path). Raises BadInput as
    :class:`SearchRequest` does."""
    return rank(ml, SearchRequest(user_id=user_id, query=query, k=k), cross=False)


def _message_hits(ml: Any, user_id: str, query: str, k: int, min_score: float | None,
                  session_id: str | None = None) -> list[SearchHit]:
    """``user_id``'s messages as :class:`SearchHit` (``kind == "message"``), for ``within`` messages | all:
    ``score`` = the absolute relevance (a message has no confidence, freshness or role bonus), at most ``k``, those
    below ``min_score`` dropped, of session ``session_id`` only when given (memledger/message_search.py ranks
    them)."""
    from .message_search import ranked_messages
    from .poisoning import message_text

    out: list[SearchHit] = []
    if session_id is not None:
        with ml.db.read() as cur:  # a run with no session logged has no messages (a refusal is for --session)
            if ml.state_cards_projection.session(cur, user_id, session_id) is None:
                return out
    for c in ranked_messages(ml, user_id, query, k, session_id):
        if min_score is not None and c["relevance"] < min_score:
            continue
        r = c["row"]
        parts = ScoreParts(relevance=c["relevance"], dense=c["dense"], dense_rank=c["dense_rank"],
                           lexical=c["lexical"], lexical_rank=c["lexical_rank"], rrf=c["rrf"], confidence=1.0,
                           freshness=1.0, role_bonus=0.0, dense_model=c["model"], fusion="absolute",
                           dense_z=c["dense_z"], lexical_n=c["lexical_n"])
        when = from_micros(r["observed_at"])
        out.append(SearchHit(rank=len(out) + 1, doc_id=f"msg:{r['session_id']}:{r['message_id']}", key=None,
                             version=None, text=message_text(r), value=None, score=c["relevance"], parts=parts,
                             status="logged", source="message", source_ref=None, session_id=r["session_id"],
                             role=None, recorded_at=None, observed_at=when, valid_from=when, valid_to=None,
                             user_id=user_id, kind="message", message_id=r["message_id"], speaker=r["speaker"]))
        if len(out) >= k:
            break
    return out


def _merge_key(h: SearchHit) -> tuple:
    return (-h.score, -h.parts.relevance, h.user_id or "", h.doc_id)


def renumber(hits: list[SearchHit]) -> list[SearchHit]:
    """``rank`` 1..n in list order (hits merged from several calls)."""
    return [h if h.rank == i else h.model_copy(update={"rank": i}) for i, h in enumerate(hits, 1)]


def merge_users(per_user: list[list[SearchHit]], k: int) -> list[SearchHit]:
    """Hits of several users' searches merged by ``score`` (absolute, so comparable), best ``k``, renumbered."""
    return renumber(sorted((h for hits in per_user for h in hits), key=_merge_key)[:k])


def _search_as_of(ml: Any, proj: Any, req: SearchRequest, user_id: str, query: str, k: int, at_us: int,
                  half_lives: dict[str, float]) -> list[SearchHit]:
    from projections.retrieval.lexical import LexicalIndex
    from projections.retrieval.vector_store import UserVectorIndex
    from ledger.text import has_cjk
    from projections.retrieval.documents import fact_doc_id, lexical_document

    hp = ml.history_projection
    with ml.db.read() as cur:
        cur.execute(
            "SELECT t.key, t.version, t.status, t.valid_from, t.valid_to, v.text, v.value_json, v.source, "
            "v.source_ref, v.session_id, v.confidence, v.role, v.recorded_at, v.observed_at, v.position, v.actor "
            f"FROM {hp.table('timeline')} t JOIN {hp.table('versions')} v ON v.user_id = t.user_id "
            "AND v.key = t.key AND v.version = t.version "
            "WHERE t.user_id = ? AND t.recorded_from <= ? AND t.recorded_to > ? AND t.valid_from <= ? "
            "AND t.valid_to > ? ORDER BY t.key",
            (user_id, at_us, at_us, at_us, at_us),
        )
        rows = cur.fetchall()
    cols = ["key", "version", "status", "valid_from", "valid_to", "text", "value_json", "source", "source_ref",
            "session_id", "confidence", "role", "recorded_at", "observed_at", "position", "actor"]
    metas = {}
    from projections.base import rows_read_back

    for m in rows_read_back(cols, rows):  # a free-text memory's value read back from its text
        if not req.scope.matches(m["actor"], m["session_id"]):  # out of the request's scope: never ranked
            continue
        if m["text"] is None:  # an erased subject's event keeps no text
            continue
        m["valid_to"] = None if m["valid_to"] == OPEN else m["valid_to"]
        metas[fact_doc_id(m["key"])] = m
    if not metas:
        return []
    docs = list(metas)
    li = LexicalIndex.from_documents((d, lexical_document(metas[d]["key"], metas[d]["text"], metas[d]["value_json"]))
                                    for d in docs)
    # The same routing as the current index: a CJK query is ranked by the companion over the CJK texts then believed.
    cjk_docs = [d for d in docs if has_cjk(metas[d]["text"])] if proj.cjk_embedder is not None else []
    # and the texts without CJK by the companion too (projections/retrieval/cross_language.py), within its cap
    en_docs = [d for d in docs if not has_cjk(metas[d]["text"])] if proj.cjk_embedder is not None \
        and proj.cross_language and len(docs) - len(cjk_docs) <= proj.cross_max_docs else []
    if (cjk_docs or en_docs) and has_cjk(query):
        indexes = []
        with ml.db.read() as cur:  # a live row lends its vector; only older texts come from the cache or model
            for part in (cjk_docs, en_docs):
                index = None
                if part:
                    cvecs = proj.passage_vectors(cur, user_id, [(d, metas[d]["text"]) for d in part], cjk=True)
                    index = UserVectorIndex(cvecs.shape[1])
                    index.add_many(part, cvecs)
                indexes.append(index)
        ci, xi = indexes
        cands = proj.rank(None, li, metas, query, None, len(docs), companion=ci,
                          companion_vector=proj.embed_cjk_query(query), cross=xi)
    else:
        with ml.db.read() as cur:
            vecs = proj.passage_vectors(cur, user_id, [(d, metas[d]["text"]) for d in docs])
        vi = UserVectorIndex(vecs.shape[1])
        vi.add_many(docs, vecs)
        cands = proj.rank(vi, li, metas, query, proj.embed_query(query), len(docs))
    return _score(cands, req, k, at_us, half_lives, user_id)


def search(store: Store, req: SearchRequest,
           labels: Callable[[str], Mapping[tuple[str, int], str]] | None = None) -> list[SearchHit]:
    """The memories most relevant to ``req.query`` of ``req.user_id``, of the users in ``req.also`` and (``linked``)
    of the ids confirmed as the same person (``memledger search``; see the module docstring and
    :class:`~memledger.requests.SearchRequest` for every option).

    ``labels(user_id)``: the sensitivity labels of that user's fact versions, ``{(key, version): label}`` (the
    sensitivity gate passes them: memledger/sensitivity.py ``search_gated``). A hit whose label ``req`` does not
    allow is left out, and so that withheld hits do not shorten the page each user's search asks for ``k`` plus the
    number of their labelled versions; the users' hits are then merged by score, cut to ``k`` and renumbered.
    ``expand`` (0-3): also the memories of the people the query leads to along the user's relations
    (memledger/expansion.py), each under the same label rule; a labelled relation the request does not allow is
    never walked.

    Returns:
        Up to ``k`` :class:`SearchHit` with score parts, best first. Only current versions are ever returned
        without ``as_of`` (projections/vectors.py); only the named users' memories, ever.

    Raises:
        BadInput: ``embedder`` if the store has no vectors projection. NotCaughtUp: see ``Store.wait_for``.
    """
    from . import expansion, reads

    store.before_read(req.after, req.timeout, deferred=True)
    allow = (None, *req.allow_sensitive)
    same = [u for u in reads.same_person(store, req.user_id) if u not in req.also] if req.linked else []
    per_user = []
    for u in (req.user_id, *req.also, *same):
        labelled = labels(u) if labels is not None else {}
        ask = min(req.k + len(labelled), MAX_K) if labelled else req.k
        hits = rank(store, req, u, ask)
        if req.expand:
            hits = expansion.expand(store, u, req.query, hits, ask, req.expand, req.as_of, set(req.allow_sensitive),
                                    lambda q, u=u, n=ask: rank(store, req, u, n, query=q))
        per_user.append([h for h in hits if h.kind != "fact" or labelled.get((h.key, h.version)) in allow])
    return with_source_refs(store, merge_users(per_user, req.k), reaffirmations=req.as_of is None)


def find(store: Store, user_id: str, query: str, k: int = 10, **options: Any) -> list[SearchHit]:
    """:func:`search` with the request built from keywords (those of :class:`~memledger.requests.SearchRequest`), no
    label left out: what context assembly asks (memledger/context.py). Raises BadInput naming the field."""
    return search(store, SearchRequest(user_id=user_id, query=query, k=k, **options))


def with_source_refs(store: Store, hits: list[SearchHit], *, reaffirmations: bool = True) -> list[SearchHit]:
    """``hits`` with ``source_refs`` filled: each hit's own ``source_ref`` and (``reaffirmations``: a search of
    now, not ``as_of``) those of its reaffirmations, from one read of the history projection per user."""
    if not hits:
        return hits
    refs: dict[tuple[str | None, str | None, int | None], list[str]] = {}
    if not reaffirmations:
        return [h.model_copy(update={"source_refs": [h.source_ref] if h.source_ref else []}) for h in hits]
    with store.db.read() as cur:
        for user in {h.user_id for h in hits if h.kind == "fact" and h.key is not None}:
            keys = sorted({h.key for h in hits if h.user_id == user and h.kind == "fact" and h.key is not None})
            for (key, version), said in store.history_projection.reaffirmation_refs(cur, user, keys).items():
                refs[(user, key, version)] = said
    out = []
    for h in hits:
        said = [h.source_ref] if h.source_ref else []
        for r in refs.get((h.user_id, h.key, h.version), []):
            if r not in said:
                said.append(r)
        out.append(h.model_copy(update={"source_refs": said}))
    return out
