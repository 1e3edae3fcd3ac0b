"""The verbs the agent faces call, on one opened ledger behind one lock.

A server process opens one :class:`~memledger.api.MemoryLedger` (one semantic index in memory, one model load) and
serves every request from it. Calls are serialised by ``Service.lock``: a write is one SQLite/PostgreSQL
transaction anyway, and a read answers in about a millisecond, so the lock costs little and keeps the ledger's
in-memory indexes out of thread races. Several server processes may share one store (each catches up from the log
before reading, as the CLI does).

Every method takes a validated argument model of :mod:`memledger.servers.models` and a user id already checked
against the caller (the faces do that) and returns the ledger's own model, so a face's JSON is the CLI's ``--json``.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from ledger.errors import BadInput
from ledger.schemas import check_user_id

from .models import (AssertBody, AuditArgs, BelievedArgs, CardBody, Change, ContextBody, CorrectBody, DiffArgs,
                     HistoryResult, LogMessageBody, RecallResult, RememberBody, RetractBody, SearchBody,
                     SessionStartBody, SummaryBody, TrueAtArgs)

T = TypeVar("T")


def _scope(agent_id: str | None, run_id: str | None) -> dict[str, Any]:
    """The scope keywords of a read, only those given (a ledger of an older signature is never handed None ones)."""
    return {k: v for k, v in (("agent_id", agent_id), ("run_id", run_id)) if v is not None}


def _fields(model: Any, *drop: str) -> dict[str, Any]:
    """The model's set fields as keywords (``None`` left out so the ledger's defaults apply)."""
    return {k: v for k, v in model.model_dump(exclude=set(drop)).items() if v is not None}


class Service:
    """One opened ledger (``ml``), its lock, and the verbs of the faces."""

    def __init__(self, ml: Any) -> None:
        self.ml = ml
        self.lock = threading.RLock()

    def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Call ``fn`` under the ledger's lock."""
        with self.lock:
            return fn(*args, **kwargs)

    async def call(self, fn: Callable[..., T], *args: Any, inline: bool = False, **kwargs: Any) -> T:
        """Call ``fn`` from async code: ``inline`` (a read of about a millisecond) runs it on the event loop when the
        ledger is free, sparing a worker-thread hop (under CPU contention a scheduling round trip each); anything
        else, or a read behind a busy ledger, runs in a worker thread."""
        if inline and self.lock.acquire(blocking=False):
            try:
                return fn(*args, **kwargs)
            finally:
                self.lock.release()
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))

    # -- state -------------------------------------------------------------------------------------------------
    def store_of(self, user_id: str) -> Any:
        """The opened store holding ``user_id``'s reads: the ledger itself, or on a shard map the user's shard."""
        from ..sharding.sharded import is_sharded

        if is_sharded(self.ml):
            return self.ml.shard(self.ml.shard_of(user_id))
        return self.ml

    def shard_of(self, user_id: str) -> str | None:
        """The shard serving ``user_id`` on a shard map, else None."""
        from ..sharding.sharded import is_sharded

        return self.ml.shard_of(user_id) if is_sharded(self.ml) else None

    def erased(self, user_id: str) -> bool:
        """True if ``user_id`` was erased (their key destroyed): the HTTP API answers 410 Gone."""
        with self.lock:
            ks = getattr(self.store_of(user_id), "keystore", None)
            if ks is None:
                return False
            return bool(ks.is_destroyed(user_id))

    def has_remember(self) -> bool:
        return callable(getattr(self.ml, "remember_request", None))

    def has_forget(self) -> bool:
        return callable(getattr(self.ml, "forget", None))

    # -- writes ------------------------------------------------------------------------------------------------
    def remember(self, user_id: str, body: RememberBody) -> Any:
        """The body's fields and ``user_id`` make the verb's :class:`~memledger.requests.RememberRequest` (checked
        there, once: the role's name becomes its RoleContext), answered by ``MemoryLedger.remember_request``."""
        from ..requests import RememberRequest

        if not self.has_remember():
            raise NotImplementedError("remember is not available in this memledger version")
        request = RememberRequest(user_id=user_id, **_fields(body, "user_id"))
        with self.lock:
            return self.ml.remember_request(request)

    def assert_fact(self, user_id: str, key: str, body: AssertBody) -> Any:
        kw = _fields(body, "value")
        with self.lock:
            return self.ml.assert_fact(user_id, key, body.value, **kw)

    def correct(self, user_id: str, key: str, body: CorrectBody) -> Any:
        kw = _fields(body, "value", "key", "user_id")
        with self.lock:
            return self.ml.correct_fact(user_id, key, body.value, **kw)

    def retract(self, user_id: str, key: str, body: RetractBody) -> Any:
        kw = _fields(body, "key", "user_id")
        with self.lock:
            return self.ml.retract_fact(user_id, key, **kw)

    def identity_link(self, user_id: str, body: Any) -> Any:
        """``MemoryLedger.identity_link`` from an :class:`~memledger.servers.models.IdentityLinkBody` (the caller
        has checked that the key holds both ids)."""
        with self.lock:
            return self.ml.identity_link(user_id, body.other, body.status, reason=body.reason)

    def identity_unlink(self, user_id: str, body: Any) -> Any:
        """``MemoryLedger.identity_unlink`` from an :class:`~memledger.servers.models.IdentityUnlinkBody`."""
        with self.lock:
            return self.ml.identity_unlink(user_id, body.other, reason=body.reason)

    def identity_links(self, user_id: str) -> Any:
        """``MemoryLedger.identity_links``: the user's current identity links."""
        with self.lock:
            return self.ml.identity_links(user_id)

    def linked_also(self, user_id: str, body: SearchBody, holds: Callable[[str], bool]) -> SearchBody:
        """A search body whose ``linked`` is spelt out: the ids confirmed as the same person as ``user_id`` that
        ``holds`` (the caller's API key), added to ``also``; ``linked`` then off, so no other id is read."""
        if not body.linked:
            return body
        from ..reads import same_person

        with self.lock:
            same = [u for u in same_person(self.ml, user_id) if holds(u) and u not in (body.also or [])]
        return body.model_copy(update={"also": [*(body.also or []), *same] or None, "linked": False})

    def relate(self, user_id: str, body: Any) -> Any:
        """``MemoryLedger.relate`` from a :class:`~memledger.servers.models.RelateBody`: a RelationReceipt."""
        kw = _fields(body, "relation_type", "entity", "user_id")
        with self.lock:
            return self.ml.relate(user_id, body.relation_type, body.entity, **kw)

    def correct_relation(self, user_id: str, body: Any) -> Any:
        """``MemoryLedger.correct_relation`` from a :class:`~memledger.servers.models.CorrectRelationBody`."""
        kw = _fields(body, "relation_type", "entity", "user_id")
        with self.lock:
            return self.ml.correct_relation(user_id, body.relation_type, body.entity, **kw)

    def unrelate(self, user_id: str, body: Any) -> Any:
        """``MemoryLedger.unrelate`` from an :class:`~memledger.servers.models.UnrelateBody`."""
        kw = _fields(body, "relation_type", "entity", "user_id")
        with self.lock:
            return self.ml.unrelate(user_id, body.relation_type, body.entity, **kw)

    def relations(self, user_id: str, a: Any) -> Any:
        """``MemoryLedger.relations`` from a :class:`~memledger.servers.models.RelationsArgs`."""
        with self.lock:
            return self.ml.relations(user_id, a.entity, a.hops, a.as_of, a.valid_at, allow_sensitive=a.allow_sensitive,
                                     purpose=a.purpose, after=a.after)

    def entities(self, user_id: str, a: Any) -> Any:
        """``MemoryLedger.entities`` from an :class:`~memledger.servers.models.EntitiesArgs`."""
        with self.lock:
            return self.ml.entities(user_id, allow_sensitive=a.allow_sensitive, purpose=a.purpose, after=a.after)

    def unlink(self, user_id: str, key: str, version: int) -> Any:
        """Undo a wrong ``remember`` decision (``MemoryLedger.unlink``): a RememberReceipt."""
        if not callable(getattr(self.ml, "unlink", None)):
            raise NotImplementedError("unlink is not available in this memledger version")
        with self.lock:
            return self.ml.unlink(user_id, key, version)

    def record(self, commands: list[dict[str, Any]]) -> list[Any]:
        with self.lock:
            return self.ml.record(commands)

    # -- reads -------------------------------------------------------------------------------------------------
    # Every read that shows fact values passes the request's ``allow_sensitive``/``purpose`` to the ledger, which
    # withholds the labels not asked for and records the rest (memledger/sensitivity.py ``gate``); the faces have
    # checked that the API key holds the labels asked for.
    def profile(self, user_id: str, after: int | None = None, allow_sensitive: list[str] | None = None,
                purpose: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> Any:
        with self.lock:
            return self.ml.profile(user_id, after=after, allow_sensitive=allow_sensitive, purpose=purpose,
                                   **_scope(agent_id, run_id))

    def history(self, user_id: str, key: str | None = None, after: int | None = None,
                allow_sensitive: list[str] | None = None, purpose: str | None = None, agent_id: str | None = None,
                run_id: str | None = None) -> HistoryResult:
        with self.lock:
            rows = self.ml.history(user_id, key, after=after, allow_sensitive=allow_sensitive, purpose=purpose,
                                   **_scope(agent_id, run_id))
        return HistoryResult(user_id=user_id, key=key, rows=rows)

    def believed(self, user_id: str, a: BelievedArgs) -> Any:
        with self.lock:
            return self.ml.believed(user_id, a.as_of, a.valid_at, axis=a.axis, after=a.after,
                                    allow_sensitive=a.allow_sensitive, purpose=a.purpose, **_scope(a.agent_id, a.run_id))

    def true_at(self, user_id: str, a: TrueAtArgs) -> Any:
        with self.lock:
            return self.ml.true_at(user_id, a.valid_at, axis=a.axis, after=a.after, allow_sensitive=a.allow_sensitive,
                                   purpose=a.purpose, **_scope(a.agent_id, a.run_id))

    def diff(self, user_id: str, a: DiffArgs) -> Any:
        with self.lock:
            return self.ml.diff(user_id, a.from_as_of, a.to_as_of, valid_at=a.valid_at, axis=a.axis, after=a.after,
                                allow_sensitive=a.allow_sensitive, purpose=a.purpose, **_scope(a.agent_id, a.run_id))

    def audit(self, user_id: str, a: AuditArgs) -> Any:
        with self.lock:
            return self.ml.audit(user_id, a.key, trace_id=a.trace_id, source_ref=a.source_ref, as_of=a.as_of,
                                 valid_at=a.valid_at, axis=a.axis, after=a.after, allow_sensitive=a.allow_sensitive,
                                 purpose=a.purpose, **_scope(a.agent_id, a.run_id))

    def recall(self, user_id: str, a: SearchBody) -> RecallResult:
        """Hybrid search over the user's *current* memories: the body's fields and ``user_id`` make the verb's
        :class:`~memledger.requests.SearchRequest` (checked there, once), answered by
        ``MemoryLedger.search_request`` under the sensitivity gate (facts whose label is not in ``allow_sensitive``
        left out, each labelled fact let through recorded as a disclosure with ``purpose``). ``also``: the caller
        has checked that the key holds each of those users."""
        from ..requests import SearchRequest

        request = SearchRequest(user_id=user_id, **_fields(a, "user_id"))
        with self.lock:
            hits = self.ml.search_request(request)
        return RecallResult(user_id=user_id, hits=hits)

    def context(self, user_id: str, a: ContextBody) -> Any:
        """The body's fields and ``user_id`` make the verb's :class:`~memledger.requests.ContextRequest` (checked
        there, once), answered by ``MemoryLedger.context_request``."""
        from ..requests import ContextRequest

        request = ContextRequest(user_id=user_id, **_fields(a, "user_id"))
        with self.lock:
            return self.ml.context_request(request)

    def resume(self, user_id: str, now: str | None = None, expiry_hours: float = 48.0) -> Any:
        with self.lock:
            return self.ml.resume(user_id, now=now, expiry_hours=expiry_hours)

    def export(self, user_id: str, *, complete: bool = True, allow_sensitive: list[str] | None = None,
               purpose: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> Any:
        """``MemoryLedger.export``: complete for an admin key (the user's right of access), else gated as every
        other read; either way each labelled fact shown is recorded as a disclosure. ``agent_id`` / ``run_id``:
        only what was written in that scope."""
        with self.lock:
            return self.ml.export(user_id, complete=complete, allow_sensitive=allow_sensitive, purpose=purpose,
                                  **_scope(agent_id, run_id))

    def erase(self, user_id: str, actor: str | None = None) -> Any:
        with self.lock:
            return self.ml.erase(user_id, actor=actor)

    # -- sessions ----------------------------------------------------------------------------------------------
    def session_start(self, user_id: str, session_id: str, b: SessionStartBody) -> Any:
        with self.lock:
            return self.ml.session_start(user_id, session_id, task=b.task, observed_at=b.observed_at,
                                         no_memory=b.no_memory)

    def log_message(self, user_id: str, session_id: str, b: LogMessageBody) -> Any:
        with self.lock:
            return self.ml.log_message(user_id, session_id, role=b.role, message_id=b.message_id, text=b.text,
                                       speaker=b.speaker, observed_at=b.observed_at)

    def update_card(self, user_id: str, session_id: str, b: CardBody) -> Any:
        kw = b.model_dump(exclude={"session_id", "user_id"})
        with self.lock:
            return self.ml.update_card(user_id, session_id, **kw)

    def summarize(self, user_id: str, session_id: str, b: SummaryBody) -> Any:
        with self.lock:
            return self.ml.summarize(user_id, session_id, text=b.text, level=b.level, covers=b.covers,
                                     first_message_id=b.first_message_id, last_message_id=b.last_message_id,
                                     observed_at=b.observed_at)

    def end_session(self, user_id: str, session_id: str, observed_at: str | None = None,
                    close_memories: bool = False) -> Any:
        with self.lock:
            if close_memories:
                return self.ml.end_session(user_id, session_id, observed_at=observed_at, close_memories=True)
            return self.ml.end_session(user_id, session_id, observed_at=observed_at)

    def sessions(self, user_id: str) -> list[dict[str, Any]]:
        with self.lock:
            return self.ml.sessions(check_user_id(user_id))

    def messages(self, user_id: str, session_id: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            return self.ml.messages(check_user_id(user_id), session_id)

    # -- change feed -------------------------------------------------------------------------------------------
    def heads(self) -> dict[str, int] | None:
        """On a shard map, each shard's log head; else None."""
        from ..sharding.sharded import is_sharded

        with self.lock:
            return self.ml.heads() if is_sharded(self.ml) else None

    def health(self) -> dict[str, Any]:
        """What ``/v1/health`` answers: ``{"status": "ok", "head": N}`` (on a shard map also ``shards``: each
        shard's head). Health never waits on the store: when another request holds the ledger (a long search), it
        answers from the heads it read last, with ``"stale": true``."""
        if self.lock.acquire(timeout=0.02):
            try:
                from ..sharding.sharded import is_sharded

                heads = self.ml.heads() if is_sharded(self.ml) else None
                self._health = ({"status": "ok", "head": sum(heads.values()), "shards": heads} if heads is not None
                                else {"status": "ok", "head": self.ml.head()})
                return dict(self._health)
            finally:
                self.lock.release()
        last = getattr(self, "_health", None)
        return {**last, "stale": True} if last is not None else {"status": "ok", "head": None, "stale": True}

    def head(self, user_id: str | None = None) -> int:
        """The log head: of the ledger, or on a shard map of ``user_id``'s shard (positions are per shard)."""
        with self.lock:
            return (self.store_of(user_id) if user_id is not None else self.ml).head()

    def changes(self, user_id: str, after: int) -> list[Change]:
        """The user's belief changes recorded after log position ``after``, in log order (one per fact event).

        One indexed query on the history projection's plaintext columns (key, kind, version, position,
        recorded_at): nothing is decrypted, so an open feed costs little per poll."""
        from ledger.timeutil import from_micros

        if after < 0:
            raise BadInput("after", f"position {after} is negative", "pass 0 or a position from an earlier event")
        user_id = check_user_id(user_id)
        with self.lock:
            ml = self.store_of(user_id)
            ml.before_read()
            table = ml.history_projection.table("versions")
            with ml.db.read() as cur:
                cur.execute(f"SELECT key, kind, version, position, recorded_at FROM {table} "
                            "WHERE user_id = ? AND position > ? ORDER BY position", (user_id, after))
                rows = cur.fetchall()
        return [Change(user_id=user_id, key=k, kind=kind, version=v, position=pos, recorded_at=from_micros(rec))
                for k, kind, v, pos, rec in rows]
