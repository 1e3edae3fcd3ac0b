"""A ledger partitioned by user across PostgreSQL servers: one :class:`~memledger.api.MemoryLedger` per shard, and
the routing between them (docs/scale.md).

Users never share a fact stream, so every verb about one user runs whole on that user's shard: the shard's log,
projections, key store and position. :class:`ShardedLedger` offers the verbs of ``MemoryLedger`` and routes each:

* a verb about one user (its first argument is ``user_id``) goes to the user's shard. Reads go to the shard serving
  the user (during a move: the old one); writes hold the user's write lease (memledger/sharding/directory.py) and wait while
  the user is being moved;
* a batch (``record``, ``record_session``) runs on one shard, all or nothing; a batch whose users live on different
  shards is refused, naming them per shard. ``ingest`` runs per shard (the file's users on each), so its all-or-
  nothing holds per shard (re-ingesting records nothing new, so a failed ingest is finished by running it again);
* verbs with no user (``stats()`` of the store, ``verify``, ``rebuild``, ``catch_up``) run on every shard and merge.

Positions are per shard: receipts carry ``shard``; a read given ``after=<receipt>`` whose shard no longer serves the
user raises :class:`UserMoved` (the new shard holds everything the receipt covered, so read again without it).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ledger.errors import BadInput, MemledgerError
from ledger.schemas import check_user_id

from .directory import Directory
from .shardmap import SHARDS_ENV, ShardMap, load_shard_map

#: verbs about one user that only read (no lease; served by the old shard during a move)
USER_READS = frozenset({
    "profile", "history", "user_timezone", "search", "believed", "true_at", "diff", "audit", "sessions", "messages",
    "summary_gaps", "resume", "search_messages", "quarantine", "due", "scheduled", "export", "erased_at",
    "disclosures", "entities", "relations", "identity_links",
})
#: verbs about one user that write (or may: ``context`` records disclosures of sensitive facts)
USER_WRITES = frozenset({
    "assert_fact", "correct_fact", "retract_fact", "remember", "unlink", "session_start", "log_message",
    "update_card", "summarize", "end_session", "retract_source", "forget", "forget_scope", "record_disclosures",
    "context", "relate", "correct_relation", "unrelate",
})


class ShardRow(BaseModel):
    """One shard in ``shards status --json``: its server (host:port, no credentials) and schema, users with a live
    key, erased users, the log head, the lowest position its projections reached and ``lag`` = head - that, both
    without the semantic index, whose embedding is deferred until a search (``vectors_at``: where it is; null when
    the shard has no vectors projection)."""

    name: str
    server: str
    schema_: str = Field(alias="schema")
    users: int
    erased: int
    head: int
    projections_at: int
    lag: int
    vectors_at: int | None = None

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)


class DirectoryStatus(BaseModel):
    """The directory in ``shards status --json``: its schema, the ring's ``serving`` names (users without a row are
    hashed over these), a running rebalance's ``target`` names (else null), and its rows per state."""

    schema_: str = Field(alias="schema")
    serving: list[str]
    target: list[str] | None
    moving: int
    placed: int
    pinned: int

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)


class ShardsStatus(BaseModel):
    """``memledger shards status --json``."""

    shards: list[ShardRow]
    directory: DirectoryStatus


class UnknownShard(MemledgerError):
    """The directory routes a user to a shard this process's shard map file does not name: the file is out of date
    (a rebalance added the shard) or leaves a shard out. The HTTP API answers 503; restart with the current file."""

    def __init__(self, name: str, source: str, names: list[str], user_id: str | None = None) -> None:
        self.shard = name
        who = f"user {user_id!r}" if user_id else "this user"
        super().__init__(f"the directory places {who} on shard {name!r}, which {source} does not name (it names "
                         f"{', '.join(names)}): the file is out of date or leaves a shard out; use the current "
                         "shard map file (a server started with an older one must be restarted)")


class UserMoved(MemledgerError):
    """A read named a position (``after=``) on a shard that no longer serves the user: the user was moved.
    Everything the position covered was copied before the switch; read again without ``after``."""

    def __init__(self, user_id: str, old: str, new: str) -> None:
        self.user_id, self.old, self.new = user_id, old, new
        super().__init__(f"user {user_id!r} moved from shard {old} to shard {new}: positions of {old} do not apply "
                         f"on {new}; read again without after= (the move copied everything before switching)")


def is_sharded(ml: Any) -> bool:
    """True for a :class:`ShardedLedger` (faces branch on it for store-wide verbs)."""
    return isinstance(ml, ShardedLedger)


def shard_map_from_env(path: str | os.PathLike[str] | None) -> ShardMap | None:
    """The shard map named by ``path`` or ``$MEMLEDGER_SHARDS``, or None when neither is set. Raises BadInput."""
    path = path if path is not None else (os.environ.get(SHARDS_ENV) or None)
    return load_shard_map(path) if path is not None else None


class ShardedLedger:
    """The ledger over a :class:`~memledger.sharding.shardmap.ShardMap`. Shards are opened on first use (a CLI call about one
    user opens one shard and the directory).

    Args:
        shard_map: the map (or a path to its TOML).
        move_wait: seconds a write waits for a move of its user to finish before :class:`UserMoving`.
        **options: passed to each shard's ``MemoryLedger`` (``projection_mode``, ``embedder``, ...).

    Raises:
        BadInput: a bad map; MemledgerError: the directory's server cannot be reached.
    """

    def __init__(self, shard_map: ShardMap | str | os.PathLike[str], *, move_wait: float = 10.0,
                 **options: Any) -> None:
        self.map = shard_map if isinstance(shard_map, ShardMap) else load_shard_map(shard_map)
        self.options = {k: v for k, v in options.items() if v is not None}
        self.directory = Directory(self.map, move_wait=move_wait)
        #: the directory's database: what a face needs of a "store-wide" db (the HTTP API keys live here)
        self.db = self.directory.db
        self._open: dict[str, Any] = {}
        # one MemoryLedger per shard even when server threads touch a shard first at once (each one opened holds
        # connection pools and in-memory indexes; extra ones were leaked)
        self._opening = threading.Lock()
        self.keystore = None  # per shard: see shard(name).keystore
        self._index_mb: float | None = None  # limit_index_memory: shared equally by the shards

    # -- shards --------------------------------------------------------------------------------------------------
    def shard(self, name: str) -> Any:
        """The opened ``MemoryLedger`` of shard ``name`` (opened now if needed)."""
        ml = self._open.get(name)
        if ml is not None:
            return ml
        with self._opening:
            return self._open_shard(name)

    def _open_shard(self, name: str) -> Any:
        ml = self._open.get(name)
        if ml is None:
            from ..api import MemoryLedger

            if name not in self.map.names:  # the directory routes to a shard this process's map file lacks
                raise UnknownShard(name, self.map.source, self.map.names)
            spec = self.map.spec(name)
            try:
                ml = MemoryLedger(dsn=spec.dsn, schema=spec.schema, **self.options)
                if self._index_mb is not None:
                    ml.limit_index_memory(self._shard_index_mb())
                self._open[name] = ml
            except MemledgerError as exc:  # say which table of the map names the server that failed
                raise MemledgerError(f"shard {name} ([shards.{name}] in {self.map.source}): {exc}") from None
        return ml

    def limit_index_memory(self, mb: float | None) -> None:
        """``MemoryLedger.limit_index_memory`` for the process: ``mb`` shared equally by the map's shards (each
        holds its own users' indexes), applied to the shards open now and to each one opened later."""
        from ..store import check_index_memory

        check_index_memory(mb)
        self._index_mb = mb
        for ml in list(self._open.values()):
            ml.limit_index_memory(self._shard_index_mb())

    def _shard_index_mb(self) -> float | None:
        """Each shard's equal share of the process's index budget (None: no bound)."""
        return None if self._index_mb is None else self._index_mb / len(self.map.names)

    def warm_search(self) -> None:
        """``MemoryLedger.warm_search`` on every shard (each opened now)."""
        for _, ml in self.each():
            ml.warm_search()

    def each(self) -> Iterator[tuple[str, Any]]:
        """(name, opened shard) for every shard in map order."""
        for name in self.map.names:
            yield name, self.shard(name)

    def shard_of(self, user_id: str) -> str:
        """The shard serving ``user_id``'s reads now (the hash, or the directory's placement)."""
        return self.directory.shard_for_read(check_user_id(user_id))

    def close(self) -> None:
        for ml in self._open.values():
            ml.close()
        self._open.clear()
        self.directory.close()

    def __enter__(self) -> ShardedLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- routing -------------------------------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        if name in USER_READS:
            return lambda user_id, *a, **kw: self._read(name, user_id, *a, **kw)
        if name in USER_WRITES:
            return lambda user_id, *a, **kw: self._write(name, user_id, *a, **kw)
        raise AttributeError(f"{type(self).__name__} has no verb {name!r}")

    def _read(self, verb: str, user_id: Any, *args: Any, **kwargs: Any) -> Any:
        user_id = check_user_id(user_id)
        name = self.directory.shard_for_read(user_id)
        self._check_after(user_id, name, kwargs.get("after"))
        return getattr(self.shard(name), verb)(user_id, *args, **kwargs)

    def search(self, user_id: str, query: str, k: int = 10, *args: Any, also: Any = None, **kwargs: Any) -> Any:
        """``MemoryLedger.search``; with ``also``, each shard searches the named users it holds and the hits are
        merged by score (scores are absolute, so comparable across shards: docs/retrieval.md), best ``k``."""
        if not also:
            return self._read("search", user_id, query, k, *args, **kwargs)
        from ..requests import check_also
        from ..search import merge_users

        user_id = check_user_id(user_id)
        users = [user_id, *check_also(user_id, also)]  # the same validation and limits as one store
        where: dict[str, list[str]] = {}
        for u in users:
            where.setdefault(self.directory.shard_for_read(u), []).append(u)
        parts = []
        for name, mine in where.items():
            self._check_after(mine[0], name, kwargs.get("after") if user_id in mine else None)
            parts.append(self.shard(name).search(mine[0], query, k, *args, also=mine[1:] or None,
                                                 **({**kwargs, "after": None} if user_id not in mine else kwargs)))
        return merge_users(parts, k)

    def search_request(self, request: Any) -> Any:
        """``MemoryLedger.search_request``: the request's search routed as :meth:`search` routes one (each shard's
        ledger answers its part)."""
        return self.search(**request.arguments())

    def context_request(self, request: Any) -> Any:
        """``MemoryLedger.context_request`` on the shard holding the request's user."""
        return self._read("context", **request.arguments())

    def remember_request(self, request: Any) -> Any:
        """``MemoryLedger.remember_request`` on the shard holding the request's user, under its write lease."""
        with self.directory.write_lease(request.user_id) as name:
            return tag(self.shard(name).remember_request(request), name)

    def _write(self, verb: str, user_id: Any, *args: Any, **kwargs: Any) -> Any:
        user_id = check_user_id(user_id)
        with self.directory.write_lease(user_id) as name:
            self._check_after(user_id, name, kwargs.get("after"))
            return tag(getattr(self.shard(name), verb)(user_id, *args, **kwargs), name)

    def _check_after(self, user_id: str, name: str, after: Any) -> None:
        receipts = [after] if isinstance(after, BaseModel) else list(after) if isinstance(after, (list, tuple)) else []
        for r in receipts:
            old = getattr(r, "shard", None)
            if old is not None and old != name:
                raise UserMoved(user_id, old, name)

    @contextmanager
    def _batch_leases(self, user_ids: Iterable[str]) -> Iterator[str | None]:
        """Hold the write leases of ``user_ids`` (in sorted order, so two batches never wait on each other in a
        cycle) and yield their one shard (None for no users). Raises BadInput naming the users per shard when
        they live on different shards."""
        users = sorted(set(user_ids))
        with ExitStack() as stack:
            where = {u: stack.enter_context(self.directory.write_lease(u)) for u in users}
            shards = sorted(set(where.values()))
            if len(shards) > 1:
                per = "; ".join(f"{s}: {', '.join(u for u in users if where[u] == s)}" for s in shards)
                raise BadInput("commands", f"the batch's users live on different shards ({per})",
                               "send one batch per shard (all-or-nothing holds within a shard)")
            yield shards[0] if shards else None

    def record(self, commands: Iterable[Any]) -> list[Any]:
        """``MemoryLedger.record`` on the one shard of the batch's users (refused across shards, BadInput)."""
        from ledger.schemas import validate_command

        commands = list(commands)
        users = [getattr(c, "user_id", None) or (c.get("user_id") if isinstance(c, dict) else None)
                 for c in commands]
        if any(not isinstance(u, str) for u in users):
            # let the shard's validation name the bad field: validate every command as record() would
            for i, c in enumerate(commands):
                if isinstance(c, dict):
                    validate_command({"op": "assert", **c}, where=f"commands[{i}].")
        users = [check_user_id(u) for u in users]
        with self._batch_leases(users) as name:
            if name is None:
                return []
            return tag(self.shard(name).record(commands), name)

    def identity_link(self, user_id: str, other: str, *args: Any, **kwargs: Any) -> Any:
        """``MemoryLedger.identity_link`` on the shard of both ids (one save in both ledgers: refused, BadInput,
        when the two live on different shards)."""
        return self._pair("identity_link", user_id, other, *args, **kwargs)

    def identity_unlink(self, user_id: str, other: str, *args: Any, **kwargs: Any) -> Any:
        """``MemoryLedger.identity_unlink`` on the shard of both ids (refused across shards, as a link is)."""
        return self._pair("identity_unlink", user_id, other, *args, **kwargs)

    def _pair(self, verb: str, user_id: Any, other: Any, *args: Any, **kwargs: Any) -> Any:
        users = [check_user_id(user_id), check_user_id(other, "other")]
        try:
            with self._batch_leases(users) as name:
                return getattr(self.shard(name), verb)(users[0], users[1], *args, **kwargs)
        except BadInput as exc:
            if exc.field != "commands":
                raise
            raise BadInput("other", exc.problem.replace("the batch's users", "the two ids"),
                           "link ids held by one shard (move one there with shards rebalance)") from None

    def record_session(self, commands: Iterable[Any]) -> list[Any]:
        """``MemoryLedger.record_session`` on the one shard of the batch's users (refused across shards)."""
        commands = list(commands)
        users = [check_user_id(getattr(c, "user_id", None) or (c.get("user_id") if isinstance(c, dict) else None))
                 for c in commands]
        with self._batch_leases(users) as name:
            if name is None:
                return []
            return tag(self.shard(name).record_session(commands), name)

    def erase(self, user_id: str, *, actor: str | None = None) -> Any:
        """Erase ``user_id`` on its shard and pin the user there (its erasure record stays where it was made, so a
        later map change does not move an erased user and writes for them stay refused)."""
        user_id = check_user_id(user_id)
        with self.directory.write_lease(user_id) as name:
            receipt = self.shard(name).erase(user_id, actor=actor)
            with self.directory.db.transaction() as cur:
                self.directory.put(cur, user_id, name, "pinned")
            return receipt

    def ingest(self, path: str | os.PathLike[str], format: str = "locomo", *,
               on_progress: Callable[[int, int], None] | None = None, batch_size: int = 500,
               resolve: bool = False) -> dict[str, Any]:
        """``MemoryLedger.ingest`` per shard, each shard taking the file's users it holds; the reports are summed.
        All-or-nothing holds per shard; re-running finishes an ingest that failed part-way."""
        from pathlib import Path

        from ..ingest import ingest

        total: dict[str, Any] = {}
        for name in self.map.names:
            view = _ShardView(self, name)
            report = ingest(view, Path(path), format, on_progress=on_progress, batch_size=batch_size,
                            resolve=resolve, keep=view.holds)
            total = _sum_reports(total, report)
        return total

    # -- every shard ---------------------------------------------------------------------------------------------
    def status(self) -> ShardsStatus:
        """Users, log head and projection lag per shard, and the directory's ring and rows (``shards status``)."""
        from urllib.parse import urlparse

        rows = []
        for name, shard in self.each():
            users = shard.keystore.users() if shard.keystore is not None else []
            positions = shard.positions()
            vectors_at = positions.pop("vectors", None)
            head, reached = shard.head(), min(positions.values())
            u = urlparse(self.map.spec(name).dsn)
            rows.append(ShardRow(name=name, server=f"{u.hostname or '127.0.0.1'}:{u.port or 5432}",
                                 schema=self.map.spec(name).schema, users=sum(1 for _, gone in users if not gone),
                                 erased=sum(1 for _, gone in users if gone), head=head, projections_at=reached,
                                 lag=max(0, head - reached), vectors_at=vectors_at))
        placements = self.directory.placements()
        serving, target = self.directory.ring()
        states = {s: sum(1 for p in placements if p.state == s) for s in ("moving", "placed", "pinned")}
        return ShardsStatus(shards=rows, directory=DirectoryStatus(schema=self.map.directory.schema, serving=serving,
                                                                   target=target, **states))

    def catch_up(self, *args: Any, **kwargs: Any) -> int:
        """Catch every shard's projections up; returns the sum of the positions reached (a progress figure only:
        positions are per shard, see :meth:`heads`)."""
        return sum(ml.catch_up(*args, **kwargs) for _, ml in self.each())

    def heads(self) -> dict[str, int]:
        """Each shard's log head position."""
        return {name: ml.head() for name, ml in self.each()}

    def verify(self) -> list[Any]:
        """Every shard's ``verify``; each result's ``projection`` is prefixed ``<shard>/``.

        Raises:
            UnknownShard: the directory serves shards the map file does not name (they would go unchecked)."""
        import dataclasses

        serving, target = self.directory.ring()
        for name in [*serving, *(target or [])]:
            if name not in self.map.names:
                raise UnknownShard(name, self.map.source, self.map.names)

        return [dataclasses.replace(r, projection=f"{name}/{r.projection}")
                for name, ml in self.each() for r in ml.verify()]

    def stats(self, user_id: str | None = None, *, now: Any = None) -> Any:
        """One user's stats from their shard, or the store's over every shard: the shards' counts are added and the
        rates computed from the sums (memledger/hygiene.py ``StatsCounts``), as one store of all of them would."""
        if user_id is not None:
            return self._read("stats", user_id, now=now)
        from functools import reduce

        from ..hygiene import stats_counts

        return reduce(lambda a, b: a + b, (stats_counts(ml, None, now) for _, ml in self.each())).stats()

    def rebuild(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Every shard's ``rebuild``; returns {shard: RebuildReport}."""
        return {name: ml.rebuild(*args, **kwargs) for name, ml in self.each()}


class _ShardView:
    """What :func:`memledger.ingest.ingest` needs of a ledger, for the users of one shard: writes go through the
    sharded ledger's leases and must land on this shard (else the user moved meanwhile: UserMoving-style retry)."""

    def __init__(self, sharded: ShardedLedger, name: str) -> None:
        self.sharded, self.name = sharded, name
        self.keystore = sharded.shard(name).keystore
        self._holds: dict[str, bool] = {}

    def holds(self, user_id: str) -> bool:
        if user_id not in self._holds:
            self._holds[user_id] = self.sharded.shard_of(user_id) == self.name
        return self._holds[user_id]

    def _here(self, name: str | None) -> None:
        if name is not None and name != self.name:
            raise MemledgerError(f"a user of this file moved to shard {name} during the ingest; nothing of this "
                                 "batch was written: run the ingest again")

    def record(self, commands: list[Any]) -> list[Any]:
        with self.sharded._batch_leases(c.user_id for c in commands) as name:
            self._here(name)
            return self.sharded.shard(self.name).record(commands)

    def record_session(self, commands: list[Any]) -> list[Any]:
        with self.sharded._batch_leases(c.user_id for c in commands) as name:
            self._here(name)
            return self.sharded.shard(self.name).record_session(commands)

    def remember_request(self, request: Any) -> Any:
        with self.sharded.directory.write_lease(request.user_id) as name:
            self._here(name)
            return self.sharded.shard(self.name).remember_request(request)


def tag(result: Any, shard: str) -> Any:
    """``result`` (a receipt, or a list of them) with ``shard`` set where the model has that field."""
    if isinstance(result, list):
        return [tag(r, shard) for r in result]
    if isinstance(result, BaseModel) and "shard" in type(result).model_fields:
        return result.model_copy(update={"shard": shard})
    return result


def _sum_reports(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two ingest reports added field by field (numbers summed, dicts merged recursively)."""
    out = dict(a)
    for k, v in b.items():
        if isinstance(v, dict):
            out[k] = _sum_reports(out.get(k, {}), v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = out.get(k, 0) + v
        else:
            out[k] = v
    return out
