"""The shard directory: the small global database of a sharded ledger (docs/scale.md).

It holds what is not per shard:

* ``placements`` -- users whose shard is not (or not only) the one the hash gives: a user being moved
  (``moving``: reads go to ``source``, writes wait), a user moved (``placed`` on ``shard``; ``step`` says whether the
  old copy is still to be erased), or a user ``pinned`` where it is (an erased user stays on the shard that holds
  its erasure record, so writes for it are still refused there);
* ``ring`` -- the shard names users are hashed over (``serving``), and while a rebalance runs the names it is
  moving users to (``target``). Routing hashes over ``serving`` whatever shard map file a process was started with,
  so processes still holding the old file and processes holding the new one agree on every user during a
  rebalance; the rebalance switches ``serving`` to the new names when every move is done;
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

import json
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
#: the ring lease's key (user keys lie in [-2**30, 2**30)): every write holds it shared; a rebalance takes it
#: exclusively to plan its last round and switch the ring with no first write of a new user in between
_RING_KEY = 2**30 + 1
#: held by the one running rebalance (a second one is refused; a killed one's session ends and frees it)
_REBALANCE_KEY = 2**30 + 2
DDL = (
    "CREATE TABLE IF NOT EXISTS placements (user_id TEXT PRIMARY KEY, shard TEXT NOT NULL, "
    "state TEXT NOT NULL CHECK (state IN ('moving', 'placed', 'pinned')), source TEXT, target TEXT, "
    "step TEXT NOT NULL DEFAULT 'done', updated_at BIGINT NOT NULL)",
    # the shard names the hash places users over (``serving``), and during a rebalance the names it moves them to
    "CREATE TABLE IF NOT EXISTS ring (id INTEGER PRIMARY KEY CHECK (id = 1), serving TEXT NOT NULL, target TEXT)",
)


class UserMoving(MemledgerError):
    """A write for a user who is being moved between shards did not see the move finish within the wait.
    Nothing was written; retry the command (the CLI exits 1, the HTTP API answers 503 with Retry-After)."""

    def __init__(self, user_id: str, source: str | None, target: str | None, waited: float) -> None:
        self.user_id, self.source, self.target = user_id, source, target
        what = (f"user {user_id!r} is being moved from shard {source} to {target}" if source and target
                else "a rebalance is switching the shard map")
        super().__init__(f"{what} (waited {waited:.0f} s): nothing was written; retry in a few seconds")


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


def holding_shard(user_id: str, p: Placement | None, serving: Any) -> str:
    """The shard holding ``user_id`` now: a moving user's source, a placed or pinned user's shard, else the hash
    over the ring's serving names (``serving()``, called only when needed)."""
    from .shardmap import rendezvous

    if p is not None:
        return p.source if p.state == "moving" and p.source else p.shard
    return rendezvous(user_id, serving())


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
        try:
            self.db = ProjectionDB(dsn=spec.dsn, schema=spec.schema)
        except MemledgerError as exc:  # say which table of the map names the server that failed
            raise MemledgerError(f"the directory ([directory] in {shard_map.source}, or the first shard's server "
                                 f"by default): {exc}") from None
        with self.db.transaction() as cur:
            for statement in DDL:
                cur.execute(statement)
            cur.execute("SELECT 1 FROM ring WHERE id = 1")
            if cur.fetchone() is None:  # a new directory: the first map opened names the serving shards
                cur.execute("INSERT INTO ring (id, serving, target) VALUES (1, ?, NULL)", (json.dumps(shard_map.names),))
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

    def ring(self, cur: Any = None) -> tuple[list[str], list[str] | None]:
        """(serving names, target names or None): the shards users are hashed over, and a running rebalance's."""
        if cur is None:
            with self.db.read() as c:
                return self.ring(c)
        cur.execute("SELECT serving, target FROM ring WHERE id = 1")
        serving, target = cur.fetchone()
        return json.loads(serving), (json.loads(target) if target else None)

    def set_ring(self, serving: list[str], target: list[str] | None) -> None:
        """Set the ring's serving names and a rebalance's target names (None when no rebalance runs)."""
        with self.db.transaction() as cur:
            cur.execute("UPDATE ring SET serving = ?, target = ? WHERE id = 1",
                        (json.dumps(serving), json.dumps(target) if target is not None else None))

    def home(self, user_id: str, cur: Any) -> tuple[Placement | None, str]:
        """(the user's directory row or None, the shard holding the user now: :func:`holding_shard`)."""
        p = self.placement(user_id, cur)
        return p, holding_shard(user_id, p, lambda: self.ring(cur)[0])

    def shard_for_read(self, user_id: str) -> str:
        """The shard serving reads of ``user_id`` (:meth:`home`)."""
        with self.db.read() as cur:
            return self.home(user_id, cur)[1]

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
        from ledger.backend import connect

        if self._lease_conn is None or self._lease_conn.closed:
            self._lease_conn = connect(self.map.directory.dsn)
        return self._lease_conn

    def _key(self, user_id: str) -> int:
        from .shardmap import score

        return score("lease", user_id) % (2**31) - 2**30  # an int4 for the two-int advisory-lock form

    def _take(self, user_id: str) -> bool:
        """Try the ring's and the user's shared leases in one statement; True with both held, else neither held."""
        k = self._key(user_id)
        with self._lease_lock:
            conn = self._conn()
            ring_ok, user_ok = conn.execute(
                "SELECT pg_try_advisory_lock_shared(%s, %s), pg_try_advisory_lock_shared(%s, %s)",
                (_LEASE_CLASS, _RING_KEY, _LEASE_CLASS, k)).fetchone()
            if ring_ok and user_ok:
                return True
            for held, key in ((ring_ok, _RING_KEY), (user_ok, k)):
                if held:
                    conn.execute("SELECT pg_advisory_unlock_shared(%s, %s)", (_LEASE_CLASS, key))
            return False

    def _give(self, user_id: str) -> None:
        with self._lease_lock:
            self._conn().execute("SELECT pg_advisory_unlock_shared(%s, %s), pg_advisory_unlock_shared(%s, %s)",
                                 (_LEASE_CLASS, self._key(user_id), _LEASE_CLASS, _RING_KEY))

    def _home_now(self, user_id: str) -> tuple[Placement | None, str]:
        """:meth:`home` in one statement on the lease connection. It must be a statement of its own, run after the
        leases are taken: a statement's snapshot is taken when it starts, so a read in the locking statement could
        miss a move marked just before the lock was granted."""
        schema = self.map.directory.schema  # a checked plain name (shardmap.py)
        with self._lease_lock:
            placed, serving = self._conn().execute(
                f'SELECT (SELECT row_to_json(p) FROM "{schema}".placements p WHERE p.user_id = %s), '
                f'(SELECT serving FROM "{schema}".ring WHERE id = 1)', (user_id,)).fetchone()
        p = Placement(**{f: placed[f] for f in Placement.__dataclass_fields__}) if placed is not None else None
        return p, holding_shard(user_id, p, lambda: json.loads(serving))

    @contextmanager
    def write_lease(self, user_id: str) -> Iterator[str]:
        """Hold a shared lease on ``user_id`` and yield the shard its writes go to.

        Waits while the user is being moved (polling every 50 ms) up to ``move_wait`` seconds.

        Raises:
            UserMoving: the move did not finish within ``move_wait`` seconds (nothing written).
        """
        start = time.monotonic()
        while True:
            # three round trips to the directory per write: take both leases, read the placement, give them back
            if self._take(user_id):
                try:
                    p, shard = self._home_now(user_id)
                except BaseException:
                    self._give(user_id)
                    raise
                if p is None or p.state != "moving":
                    try:
                        yield shard
                    finally:
                        self._give(user_id)
                    return
                self._give(user_id)
            else:
                p = self.placement(user_id)
            waited = time.monotonic() - start
            if waited >= self.move_wait:
                raise UserMoving(user_id, p.source if p else None, p.target if p else None, waited)
            time.sleep(0.05)

    @contextmanager
    def rebalance_lock(self) -> Iterator[None]:
        """Be the only running rebalance. Raises MemledgerError when another one holds the lock."""
        from ledger.backend import connect

        with connect(self.map.directory.dsn) as conn:
            if not conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (_LEASE_CLASS, _REBALANCE_KEY)).fetchone()[0]:
                raise MemledgerError("another `memledger shards rebalance` is running on this directory; wait for it "
                                     "(or, if it was killed, run this again in a moment)")
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s, %s)", (_LEASE_CLASS, _REBALANCE_KEY))

    @contextmanager
    def ring_exclusive(self) -> Iterator[None]:
        """Hold the ring lease exclusively (waiting for every write in flight; new writes wait meanwhile)."""
        from ledger.backend import connect

        with connect(self.map.directory.dsn) as conn:
            conn.execute("SELECT pg_advisory_lock(%s, %s)", (_LEASE_CLASS, _RING_KEY))
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s, %s)", (_LEASE_CLASS, _RING_KEY))

    @contextmanager
    def exclusive(self, user_id: str) -> Iterator[Any]:
        """Take ``user_id``'s lease exclusively (waiting for writes in flight to commit) on a connection of its
        own, and yield a directory cursor in a transaction committed before the lease is released."""
        from ledger.backend import connect

        with connect(self.map.directory.dsn) as conn:
            conn.execute("SELECT pg_advisory_lock(%s, %s)", (_LEASE_CLASS, self._key(user_id)))
            try:
                with self.db.transaction() as cur:
                    yield cur
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s, %s)", (_LEASE_CLASS, self._key(user_id)))
