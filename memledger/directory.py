"""The shard directory: the small global database of a sharded ledger (docs/scale.md).

It holds what is not per shard:

* ``placements`` -- users whose shard is not (or not only) the one the hash gives: a user being moved
  (``moving``: reads go to ``source``, writes wait), a user moved (``placed`` on ``shard``; ``step`` says whether the
  old copy is still to be erased), or a user ``pinned`` where it is (an erased user stays on the shard that holds
  its erasure record, so writes for it are still refused there);
* ``api_keys`` -- the HTTP server's keys (memledger/servers/keys.py creates the table in this database when the
  server runs on a shard map);

while each shard keeps its own log, projections and key store (the user data keys): erasing a moved user's old
copy destroys only that shard's keys.

**Write leases.** A write for a user runs under a shared PostgreSQL advisory lock on the user (taken on a
connection to the directory) after reading the user's placement; a move takes the same lock exclusively to mark
the user ``moving``. So a move starts only after every write already routed to the old shard has committed, and a
write that starts later sees ``moving`` and waits for the switch (up to ``move_wait`` seconds, then
:class:`UserMoving`). Reads take no lock.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from ledger.errors import MemledgerError
from ledger.timeutil import now_utc, to_micros

from .shardmap import ShardMap

#: advisory-lock class for user leases (the first int of the two-int form; the store's own locks use others)
_LEASE_CLASS = 0x6D6C_7368  # "mlsh"
DDL = (
    "CREATE TABLE IF NOT EXISTS placements (user_id TEXT PRIMARY KEY, shard TEXT NOT NULL, "
    "state TEXT NOT NULL CHECK (state IN ('moving', 'placed', 'pinned')), source TEXT, target TEXT, "
    "step TEXT NOT NULL DEFAULT 'done', updated_at BIGINT NOT NULL)",
)


class UserMoving(MemledgerError):
    """A write for a user who is being moved between shards did not see the move finish within the wait.
    Nothing was written; retry the command (the CLI exits 1, the HTTP API answers 503 with Retry-After)."""

    def __init__(self, user_id: str, source: str, target: str, waited: float) -> None:
        self.user_id, self.source, self.target = user_id, source, target
        super().__init__(f"user {user_id!r} is being moved from shard {source} to {target} (waited {waited:.0f} s): "
                         "nothing was written; retry in a few seconds")


@dataclass(frozen=True)
class Placement:
    """One directory row: where ``user_id`` lives when the hash is overridden.

    ``state``: ``moving`` (``source`` serves reads, writes wait), ``placed`` (on ``shard``), ``pinned`` (stays on
    ``shard`` whatever the hash). ``step`` (moves only): ``copy``, ``erase`` (switched; old copy still to erase)
    or ``done``. ``updated_at``: microseconds since the epoch, UTC.
    """

    user_id: str
    shard: str
    state: str
    source: str | None
    target: str | None
    step: str
    updated_at: int


class Directory:
    """The directory database of ``shard_map`` (its ``[directory]`` table). ``db``: a
    :class:`projections.db.ProjectionDB` on the directory schema (also used for API keys).

    Raises:
        MemledgerError: the directory's server cannot be reached.
    """

    def __init__(self, shard_map: ShardMap, *, move_wait: float = 10.0) -> None:
        from projections.db import ProjectionDB

        self.map = shard_map
        self.move_wait = move_wait
        spec = shard_map.directory
        self.db = ProjectionDB(dsn=spec.dsn, schema=spec.schema)
        with self.db.transaction() as cur:
            for statement in DDL:
                cur.execute(statement)
        self._lease_conn: Any = None
        self._lease_lock = threading.Lock()

    def close(self) -> None:
        if self._lease_conn is not None:
            self._lease_conn.close()
            self._lease_conn = None
        self.db.close()

    # -- placements ----------------------------------------------------------------------------------------------
    def placement(self, user_id: str, cur: Any = None) -> Placement | None:
        """The directory row of ``user_id``, or None (the hash places the user)."""
        if cur is None:
            with self.db.read() as c:
                return self.placement(user_id, c)
        cur.execute("SELECT user_id, shard, state, source, target, step, updated_at FROM placements "
                    "WHERE user_id = ?", (user_id,))
        row = cur.fetchone()
        return Placement(*row) if row else None

    def placements(self) -> list[Placement]:
        """Every directory row, by user id."""
        with self.db.read() as cur:
            cur.execute("SELECT user_id, shard, state, source, target, step, updated_at FROM placements "
                        "ORDER BY user_id")
            return [Placement(*r) for r in cur.fetchall()]

    def shard_for_read(self, user_id: str) -> str:
        """The shard serving reads of ``user_id``: a moving user's source, a placed or pinned user's shard, else
        the hash's."""
        p = self.placement(user_id)
        if p is None:
            return self.map.place(user_id)
        return p.source if p.state == "moving" and p.source else p.shard

    def put(self, cur: Any, user_id: str, shard: str, state: str, *, source: str | None = None,
            target: str | None = None, step: str = "done") -> None:
        """Insert or replace ``user_id``'s row inside the caller's transaction."""
        cur.execute("DELETE FROM placements WHERE user_id = ?", (user_id,))
        cur.execute("INSERT INTO placements (user_id, shard, state, source, target, step, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (user_id, shard, state, source, target, step, to_micros(now_utc())))

    def drop(self, user_id: str) -> None:
        """Remove ``user_id``'s row (the hash places the user again)."""
        with self.db.transaction() as cur:
            cur.execute("DELETE FROM placements WHERE user_id = ?", (user_id,))

    # -- leases --------------------------------------------------------------------------------------------------
    def _conn(self) -> Any:
        from projections.db import connect

        if self._lease_conn is None or self._lease_conn.closed:
            self._lease_conn = connect(self.map.directory.dsn)
        return self._lease_conn

    def _key(self, user_id: str) -> int:
        from .shardmap import score

        return score("lease", user_id) % (2**31) - 2**30  # an int4 for the two-int advisory-lock form

    def _try(self, fn: str, user_id: str) -> bool:
        with self._lease_lock:
            return bool(self._conn().execute(f"SELECT {fn}(%s, %s)", (_LEASE_CLASS, self._key(user_id)))
                        .fetchone()[0])

    @contextmanager
    def write_lease(self, user_id: str) -> Iterator[str]:
        """Hold a shared lease on ``user_id`` and yield the shard its writes go to.

        Waits while the user is being moved (polling every 50 ms) up to ``move_wait`` seconds.

        Raises:
            UserMoving: the move did not finish within ``move_wait`` seconds (nothing written).
        """
        start = time.monotonic()
        while True:
            if self._try("pg_try_advisory_lock_shared", user_id):
                try:
                    p = self.placement(user_id)
                except BaseException:
                    self._try("pg_advisory_unlock_shared", user_id)
                    raise
                if p is None or p.state != "moving":
                    try:
                        yield self.map.place(user_id) if p is None else p.shard
                    finally:
                        self._try("pg_advisory_unlock_shared", user_id)
                    return
                self._try("pg_advisory_unlock_shared", user_id)
            else:
                p = self.placement(user_id)
            waited = time.monotonic() - start
            if waited >= self.move_wait:
                raise UserMoving(user_id, (p.source if p else None) or "?", (p.target if p else None) or "?",
                                 waited)
            time.sleep(0.05)

    @contextmanager
    def exclusive(self, user_id: str) -> Iterator[Any]:
        """Take ``user_id``'s lease exclusively (waiting for writes in flight to commit) on a connection of its
        own, and yield a directory cursor in a transaction committed before the lease is released."""
        from projections.db import connect

        with connect(self.map.directory.dsn) as conn:
            conn.execute("SELECT pg_advisory_lock(%s, %s)", (_LEASE_CLASS, self._key(user_id)))
            try:
                with self.db.transaction() as cur:
                    yield cur
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s, %s)", (_LEASE_CLASS, self._key(user_id)))
