"""The read side's database: one SQLite file (embedded default) or one PostgreSQL schema (production).

Projections write portable SQL (``?`` placeholders, ``BIGINT``, ``ON CONFLICT ... DO UPDATE``); this module runs it
on either backend. A write transaction is *exclusive* per database (SQLite ``BEGIN IMMEDIATE``; PostgreSQL a
transaction-scoped advisory lock), because a projection's rows and its tracking position must move together and
two catch-up loops in different processes must not apply the same events twice.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ledger.config import use_wal
from ledger.sealing import BYTES_PREFIX as SEALED_BYTES
from ledger.sealing import PREFIX as SEALED_TEXT

_ADVISORY_KEY = 0x6D656D6C  # "meml": the advisory lock every catch-up on one schema takes (with the schema's hash)
_SETUP_KEY = 0x6D656D73  # "mems": held while a process creates a schema's tables

#: The PostgreSQL setting row-level security reads: which users' rows this transaction may see. A user id has no
#: control characters (``ledger.schemas.check_user_id``), so the users are joined by U+001F and every user is
#: U+001E, neither of which a user id can be.
USERS_SETTING = "memledger.users"
USER_SEPARATOR = "\x1f"
ALL_USERS = "\x1e"
#: The users a request may read (set by the servers from the API key), or None outside a request: the operator's
#: CLI and Python API, and the catch-up, which act for every user.
_request_users: ContextVar[tuple[str, ...] | None] = ContextVar("memledger_request_users", default=None)
#: The policy each table with a ``user_id`` column gets on PostgreSQL (``protect_user_rows``). With no setting at
#: all (a connection that bypassed ProjectionDB) it matches nothing.
RLS_CONDITION = (f"current_setting('{USERS_SETTING}', true) = chr(30) OR user_id = ANY "
                 f"(string_to_array(current_setting('{USERS_SETTING}', true), chr(31)))")


@contextmanager
def request_scope(users: Iterable[str] | None) -> Iterator[None]:
    """Limit the projection reads made inside the block (this thread or task, and the worker threads it starts)
    to ``users``; None: every user. On PostgreSQL each read snapshot then sets :data:`USERS_SETTING` to them, and
    row-level security (:func:`protect_user_rows`) hides every other user's rows even if a check above it is wrong;
    SQLite has no such layer (the setting is kept and ignored)."""
    token = _request_users.set(None if users is None else tuple(sorted(set(users))))
    try:
        yield
    finally:
        _request_users.reset(token)


def scope_setting() -> str:
    """The value of :data:`USERS_SETTING` for a read made now: the request's users, or :data:`ALL_USERS`."""
    users = _request_users.get()
    return ALL_USERS if users is None else USER_SEPARATOR.join(users)


def protect_user_rows(cur: Cursor, table: str) -> None:
    """Turn on (and force, so the table's owner is held too) row-level security on ``table`` with the users
    policy, on PostgreSQL; idempotent, and a no-op when already on (so a store's later opens need no ownership
    change). Superusers and roles with BYPASSRLS are never held by it: serve through a role without them
    (docs/postgres.md)."""
    if cur.dialect != "postgres":
        return
    cur.execute("SELECT c.relrowsecurity AND c.relforcerowsecurity, EXISTS (SELECT 1 FROM pg_policies p WHERE "
                "p.schemaname = n.nspname AND p.tablename = c.relname AND p.policyname = 'memledger_users') "
                "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relname = ? AND n.nspname = current_schema()", (table,))
    row = cur.fetchone()
    if row is None or (row[0] and row[1]):
        return
    if not row[1]:
        cur.execute(f"CREATE POLICY memledger_users ON {table} USING ({RLS_CONDITION})")
    cur.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
    cur.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")


class Cursor:
    """A thin cursor: ``execute(sql, params)`` with ``?`` placeholders on both backends.

    With a ``sealer`` (ledger/sealing.py), projections store personal content through :meth:`seal`, and every row
    fetched comes back with its sealed values opened, whatever table or column they sit in: readers never see a
    token."""

    def __init__(self, raw: Any, dialect: str, row_security: bool = False, sealer: Any = None) -> None:
        self.raw = raw
        self.dialect = dialect
        #: row-level security holds this connection's role (PostgreSQL refuses COPY FROM into its tables then)
        self.row_security = row_security
        self.sealer = sealer

    def seal(self, user_id: str, value: Any) -> Any:
        """``value`` sealed under ``user_id``'s data key (unchanged when sealing is off or it is None)."""
        return value if self.sealer is None or value is None else self.sealer.seal(user_id, value)

    def opened(self, row: Any) -> Any:
        """``row`` with its sealed values opened (the row itself when it holds none)."""
        tokens = [i for i, v in enumerate(row) if (v.__class__ is str and v.startswith(SEALED_TEXT))
                  or (v.__class__ is bytes and v[:4] == SEALED_BYTES)]
        if not tokens:
            return row
        out = list(row)
        for i in tokens:
            out[i] = self.sealer.open(out[i])
        return tuple(out)

    def _sql(self, sql: str) -> str:
        # psycopg's placeholders are %s, so a literal % (LIKE 'a%') must be doubled there. Projection SQL never
        # holds a literal '?' (values always go through parameters), so every '?' is a placeholder.
        return sql.replace("%", "%%").replace("?", "%s") if self.dialect == "postgres" else sql

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        self.raw.execute(self._sql(sql), tuple(params))
        return self

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self.raw.executemany(self._sql(sql), [tuple(r) for r in rows])

    def fetchone(self) -> tuple | None:
        row = self.raw.fetchone()
        return row if self.sealer is None or row is None else self.opened(row)

    def fetchall(self) -> list[tuple]:
        rows = self.raw.fetchall()
        return rows if self.sealer is None else [self.opened(r) for r in rows]

    def fetchmany(self, size: int) -> list[tuple]:
        """Up to ``size`` more rows of the last query ([] when none are left): a large result read in pieces."""
        rows = self.raw.fetchmany(size)
        return rows if self.sealer is None else [self.opened(r) for r in rows]

    @property
    def rowcount(self) -> int:
        return self.raw.rowcount


SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def check_schema_name(schema: str) -> str:
    """Refuse a PostgreSQL schema name that would need quoting tricks (it is spliced into DDL).

    Raises:
        BadInput: naming ``schema`` (lower-case letters, digits and ``_``, at most 63, not starting with a digit).
    """
    from ledger.errors import BadInput

    if not isinstance(schema, str) or not SCHEMA_RE.match(schema):
        raise BadInput("schema", f"{schema!r} is not a plain PostgreSQL schema name",
                       "use lower-case letters, digits and '_' (at most 63, not starting with a digit)")
    return schema


def connect(dsn: str) -> Any:
    """One autocommit psycopg connection.

    Raises:
        MemledgerError: the server cannot be reached (a clear message instead of a driver traceback; CLI exit 1).
    """
    import psycopg

    from ledger.errors import MemledgerError

    try:
        return psycopg.connect(dsn, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        raise MemledgerError(f"cannot connect to PostgreSQL ({first}): is the server up and the --dsn right?") \
            from None


def ensure_schema(dsn: str, schema: str) -> None:
    """``CREATE SCHEMA IF NOT EXISTS`` on its own connection; tolerant of another process doing it at once.

    Two sessions running ``CREATE SCHEMA IF NOT EXISTS`` concurrently can still collide on the catalog's unique
    index (PostgreSQL checks existence before taking the lock), so that error is taken to mean "it exists now".
    """
    import psycopg

    with connect(dsn) as conn:
        # An existing schema needs no CREATE right on the database: a role serving a schema made for it (docs/
        # postgres.md) may lack that right.
        if conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone():
            return
        try:
            conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateSchema):
            pass


@contextmanager
def setup_lock(dsn: str | None, schema: str) -> Iterator[None]:
    """Serialise creating a store's tables across processes (PostgreSQL); a no-op for SQLite (dsn None).

    ``CREATE TABLE IF NOT EXISTS`` is not safe against a concurrent identical statement in PostgreSQL (both can
    pass the existence check, and one then fails on ``pg_type``'s unique index). Opening a ledger holds a
    session-level advisory lock on its own connection while the log's and the projections' tables are created.
    """
    if dsn is None:
        yield
        return
    with connect(dsn) as conn:
        conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (_SETUP_KEY, schema))
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (_SETUP_KEY, schema))


class ProjectionDB:
    """Connections to the projections' database. Thread-safe: one SQLite connection per thread, or a pool.

    Args:
        sqlite_path: path of the SQLite file (embedded mode), or
        dsn: a ``postgresql://`` conninfo, with ``schema`` the PostgreSQL schema holding the tables.
    """

    def __init__(self, sqlite_path: str | None = None, dsn: str | None = None, schema: str = "memledger") -> None:
        if (sqlite_path is None) == (dsn is None):
            raise ValueError("give exactly one of sqlite_path or dsn")
        self.sqlite_path = sqlite_path
        self.dsn = dsn
        self.schema = schema
        self.dialect = "sqlite" if sqlite_path else "postgres"
        self._local = threading.local()
        self._pool: Any = None
        self._bypass: bool | None = None
        #: seals personal content under each user's key (ledger/sealing.py); set by the store once its key store is
        #: open, None when encryption is off
        self.sealer: Any = None
        self._all_sqlite: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        #: callables run with the cursor first thing in every transaction and read snapshot (before any other
        #: statement, so they see the caller's snapshot). MemoryLedger registers the blue/green resolver here
        #: (replay/rebuild.py): which copy of each projection serves is read in the same snapshot as the rows,
        #: so a switch is never half-seen.
        self.on_begin: list[Callable[[Cursor], None]] = []
        if self.dialect == "postgres":
            from psycopg_pool import ConnectionPool

            check_schema_name(schema)
            # The schema must exist before the pool's first connection sets search_path to it, and before
            # eventsourcing creates the log's tables in it: eventsourcing 9.5.6 qualifies its tables with
            # POSTGRES_SCHEMA but never creates the schema itself. So create it here, synchronously, once.
            ensure_schema(dsn, schema)

            def configure(conn: Any) -> None:
                conn.autocommit = True
                conn.execute(f'SET search_path TO "{schema}"')

            self._pool = ConnectionPool(dsn, min_size=1, max_size=8, configure=configure, open=True)

    # -- connections -------------------------------------------------------------------------------------------
    def _sqlite(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.sqlite_path, isolation_level=None, timeout=60, check_same_thread=False)
            # WAL lets readers read while a catch-up writes; secure_delete overwrites erased rows' bytes.
            use_wal(conn)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA secure_delete=ON")
            self._local.conn = conn
            with self._lock:
                self._all_sqlite.append(conn)
        return conn

    @contextmanager
    def transaction(self) -> Iterator[Cursor]:
        """An exclusive write transaction: commits on success, rolls back on any exception."""
        if self.dialect == "sqlite":
            conn = self._sqlite()
            conn.execute("BEGIN IMMEDIATE")
            try:
                cur = Cursor(conn.cursor(), "sqlite", sealer=self.sealer)
                for hook in self.on_begin:
                    hook(cur)
                yield cur
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        else:
            with self._pool.connection() as conn:
                with conn.transaction():
                    cur = conn.cursor()
                    # Keyed by schema too, so ledgers in different schemas of one database don't serialise.
                    cur.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_ADVISORY_KEY, self.schema))
                    # the projection writer (catch-up, erasure, purge) acts for every user
                    held = not self._bypasses_rls(conn)
                    if held:
                        cur.execute("SELECT set_config(%s, %s, true)", (USERS_SETTING, ALL_USERS))
                    pcur = Cursor(cur, "postgres", row_security=held, sealer=self.sealer)
                    for hook in self.on_begin:
                        hook(pcur)
                    yield pcur

    @contextmanager
    def read(self) -> Iterator[Cursor]:
        """A read-only snapshot (one transaction), never blocking writers on either backend."""
        if self.dialect == "sqlite":
            conn = self._sqlite()
            conn.execute("BEGIN")
            try:
                cur = Cursor(conn.cursor(), "sqlite", sealer=self.sealer)
                for hook in self.on_begin:
                    hook(cur)
                yield cur
            finally:
                conn.execute("COMMIT")
        else:
            with self._pool.connection() as conn:
                with conn.transaction():
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    if not self._bypasses_rls(conn):
                        conn.execute("SELECT set_config(%s, %s, true)", (USERS_SETTING, scope_setting()))
                    pcur = Cursor(conn.cursor(), "postgres", sealer=self.sealer)
                    for hook in self.on_begin:
                        hook(pcur)
                    yield pcur

    def _bypasses_rls(self, conn: Any) -> bool:
        """Whether this pool's role is a superuser or has BYPASSRLS (read once): row-level security does not hold
        it, so the per-transaction setting would be a wasted round trip."""
        if self._bypass is None:
            self._bypass = bool(conn.execute("SELECT rolsuper OR rolbypassrls FROM pg_roles "
                                             "WHERE rolname = current_user").fetchone()[0])
        return self._bypass

    def close(self) -> None:
        with self._lock:
            for conn in self._all_sqlite:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._all_sqlite.clear()
        self._local = threading.local()
        if self._pool is not None:
            self._pool.close()
            self._pool = None
