"""The read side's database: one SQLite file (embedded default) or one PostgreSQL schema (production).

Projections write portable SQL (``?`` placeholders, ``BIGINT``, ``ON CONFLICT ... DO UPDATE``); this module runs it
on either backend. A write transaction is *exclusive* per database (SQLite ``BEGIN IMMEDIATE``; PostgreSQL a
transaction-scoped advisory lock), because a projection's rows and its tracking position must move together and
two catch-up loops in different processes must not apply the same events twice.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ledger.backend import check_schema_name, connect, use_wal
from ledger.sealing import BYTES_PREFIX as SEALED_BYTES
from ledger.sealing import CHUNKS_PREFIX as SEALED_CHUNKS
from ledger.sealing import PREFIX as SEALED_TEXT

_ADVISORY_KEY = 0x6D656D6C  # "meml": the advisory lock every catch-up on one schema takes (with the schema's hash)

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
    (docs/postgres.md). SQLite has no row-level security: nothing is done."""
    cur.sql_dialect.protect_user_rows(cur, table)


class Cursor:
    """A thin cursor: ``execute(sql, params)`` with ``?`` placeholders on both backends.

    With a ``sealer`` (ledger/sealing.py), projections store personal content through :meth:`seal`, and every row
    fetched comes back with its sealed values opened, whatever table or column they sit in: readers never see a
    token."""

    def __init__(self, raw: Any, sql_dialect: SQLiteDialect | PostgresDialect, row_security: bool = False,
                 sealer: Any = None) -> None:
        self.raw = raw
        #: what differs between the two databases (placeholders, types, COPY, row security): the database's dialect
        self.sql_dialect = sql_dialect
        #: the dialect's name, ``"sqlite"`` or ``"postgres"`` (for messages and tests; code asks ``sql_dialect``)
        self.dialect = sql_dialect.name
        #: row-level security holds this connection's role (PostgreSQL refuses COPY FROM into its tables then)
        self.row_security = row_security
        self.sealer = sealer

    @property
    def copies_rows(self) -> bool:
        """Whether many rows are best written with ``COPY ... FROM STDIN`` (PostgreSQL, unless row-level security
        holds this connection's role, which refuses COPY FROM)."""
        return self.sql_dialect.copy_from and not self.row_security

    def seal(self, user_id: str, value: Any) -> Any:
        """``value`` sealed under ``user_id``'s data key (unchanged when sealing is off or it is None)."""
        return value if self.sealer is None or value is None else self.sealer.seal(user_id, value)

    def seal_chunks(self, user_id: str, chunks: Sequence[bytes]) -> bytes:
        """``chunks`` sealed under ``user_id``'s data key as one token opened chunk by chunk
        (ledger/sealing.py ``Sealer.seal_chunks``); their concatenation when sealing is off."""
        return b"".join(chunks) if self.sealer is None else self.sealer.seal_chunks(user_id, chunks)

    def read_blob(self, table: str, column: str, where: str, params: Sequence[Any] = ()) -> Any:
        """The ``column`` value (bytes) of the one row of ``table`` matching ``where`` (None: no row, or NULL),
        as stored: a sealed value left sealed (a caller opening a big one its own way). On SQLite read through
        the blob interface, one copy of a 73 MB value instead of two."""
        return self.sql_dialect.read_blob(self, table, column, where, params)

    def opened(self, row: Any) -> Any:
        """``row`` with its sealed values opened (the row itself when it holds none)."""
        tokens = [i for i, v in enumerate(row) if (v.__class__ is str and v.startswith(SEALED_TEXT))
                  or (v.__class__ is bytes and v[:4] in (SEALED_BYTES, SEALED_CHUNKS))]
        if not tokens:
            return row
        out = list(row)
        for i in tokens:
            out[i] = self.sealer.open(out[i])
        return tuple(out)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        self.raw.execute(self.sql_dialect.sql(sql), tuple(params))
        return self

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self.raw.executemany(self.sql_dialect.sql(sql), [tuple(r) for r in rows])

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


class SQLiteDialect:
    """The projections in one SQLite file: a connection per thread, ``BEGIN IMMEDIATE`` for an exclusive write,
    the portable SQL as written (``?`` placeholders), ``BLOB`` columns, no COPY and no row-level security."""

    name = "sqlite"
    blob = "BLOB"
    copy_from = False

    def __init__(self, path: str) -> None:
        self.path = path
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()

    def sql(self, sql: str) -> str:
        """``sql`` as SQLite runs it: unchanged."""
        return sql

    def protect_user_rows(self, cur: Cursor, table: str) -> None:
        """SQLite has no row-level security: nothing to do."""

    def read_blob(self, cur: Cursor, table: str, column: str, where: str, params: Sequence[Any]) -> Any:
        """See :meth:`Cursor.read_blob`: the row's rowid, then its value through ``blobopen`` (in the cursor's
        transaction, so its snapshot); NULL reads as None."""
        cur.raw.execute(f"SELECT rowid FROM {table} WHERE {where}", tuple(params))
        row = cur.raw.fetchone()
        if row is None:
            return None
        try:
            with cur.raw.connection.blobopen(table, column, row[0], readonly=True) as blob:
                return blob.read()
        except sqlite3.OperationalError:  # not a blob (NULL, or text): read as a value
            cur.raw.execute(f"SELECT {column} FROM {table} WHERE rowid = ?", (row[0],))
            return cur.raw.fetchone()[0]

    @contextmanager
    def page_cache(self, cur: Cursor, kib: int) -> Iterator[None]:
        """A page cache of ``kib`` KiB for the block, then the connection's own size again (a bulk flush)."""
        before = cur.execute("PRAGMA cache_size").fetchone()[0]
        cur.execute(f"PRAGMA cache_size = -{int(kib)}")
        try:
            yield
        finally:
            cur.execute(f"PRAGMA cache_size = {int(before)}")

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (opened at its first use)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=60, check_same_thread=False)
            # WAL lets readers read while a catch-up writes; secure_delete overwrites erased rows' bytes.
            use_wal(conn)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA secure_delete=ON")
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    @contextmanager
    def transaction(self, db: ProjectionDB) -> Iterator[Cursor]:
        """``BEGIN IMMEDIATE``: the one writer of the file until COMMIT (ROLLBACK on any exception)."""
        conn = self.connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            cur = Cursor(conn.cursor(), self, sealer=db.sealer)
            for hook in db.on_begin:
                hook(cur)
            yield cur
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextmanager
    def read(self, db: ProjectionDB) -> Iterator[Cursor]:
        """A deferred transaction: one WAL snapshot, never blocking the writer."""
        conn = self.connection()
        conn.execute("BEGIN")
        try:
            cur = Cursor(conn.cursor(), self, sealer=db.sealer)
            for hook in db.on_begin:
                hook(cur)
            yield cur
        finally:
            conn.execute("COMMIT")

    def wipe(self, tables: Sequence[str]) -> None:
        """Make deleted rows leave the disk: ``secure_delete`` zeroed their cells in the file; truncating the WAL
        drops the page images that still held them (``tables`` all live in the one file)."""
        self.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._all.clear()
        self._local = threading.local()


class PostgresDialect:
    """The projections in one PostgreSQL schema: a connection pool (search_path set to the schema), a
    transaction-scoped advisory lock for an exclusive write, ``%s`` placeholders, ``BYTEA`` columns, ``COPY`` for
    many rows, and row-level security on the users' tables."""

    name = "postgres"
    blob = "BYTEA"
    copy_from = True

    def __init__(self, dsn: str, schema: str) -> None:
        from psycopg_pool import ConnectionPool

        self.schema = check_schema_name(schema)
        self._bypass: bool | None = None
        # The schema must exist before the pool's first connection sets search_path to it, and before
        # eventsourcing creates the log's tables in it: eventsourcing 9.5.6 qualifies its tables with
        # POSTGRES_SCHEMA but never creates the schema itself. So create it here, synchronously, once.
        ensure_schema(dsn, schema)

        def configure(conn: Any) -> None:
            conn.autocommit = True
            conn.execute(f'SET search_path TO "{schema}"')

        self.pool: Any = ConnectionPool(dsn, min_size=1, max_size=8, configure=configure, open=True)

    def sql(self, sql: str) -> str:
        """``sql`` with psycopg's placeholders: every ``?`` becomes ``%s`` and a literal ``%`` (LIKE 'a%') is
        doubled. Projection SQL never holds a literal '?' (values always go through parameters)."""
        return sql.replace("%", "%%").replace("?", "%s")

    def protect_user_rows(self, cur: Cursor, table: str) -> None:
        """The users policy on ``table``, row-level security enabled and forced (see :func:`protect_user_rows`)."""
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

    def read_blob(self, cur: Cursor, table: str, column: str, where: str, params: Sequence[Any]) -> Any:
        """See :meth:`Cursor.read_blob`: one SELECT."""
        cur.raw.execute(self.sql(f"SELECT {column} FROM {table} WHERE {where}"), tuple(params))
        row = cur.raw.fetchone()
        return None if row is None else row[0]

    @contextmanager
    def page_cache(self, cur: Cursor, kib: int) -> Iterator[None]:
        """The server sizes its own buffers: nothing to change."""
        yield

    @contextmanager
    def transaction(self, db: ProjectionDB) -> Iterator[Cursor]:
        """A transaction holding the schema's advisory lock (so two catch-ups never apply the same events)."""
        with self.pool.connection() as conn:
            with conn.transaction():
                cur = conn.cursor()
                # Keyed by schema too, so ledgers in different schemas of one database don't serialise.
                cur.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_ADVISORY_KEY, self.schema))
                # the projection writer (catch-up, erasure, purge) acts for every user
                held = not self._bypasses_rls(conn)
                if held:
                    cur.execute("SELECT set_config(%s, %s, true)", (USERS_SETTING, ALL_USERS))
                pcur = Cursor(cur, self, row_security=held, sealer=db.sealer)
                for hook in db.on_begin:
                    hook(pcur)
                yield pcur

    @contextmanager
    def read(self, db: ProjectionDB) -> Iterator[Cursor]:
        """A REPEATABLE READ transaction limited to the request's users (:func:`request_scope`)."""
        with self.pool.connection() as conn:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                if not self._bypasses_rls(conn):
                    conn.execute("SELECT set_config(%s, %s, true)", (USERS_SETTING, scope_setting()))
                pcur = Cursor(conn.cursor(), self, sealer=db.sealer)
                for hook in db.on_begin:
                    hook(pcur)
                yield pcur

    def _bypasses_rls(self, conn: Any) -> bool:
        """Whether this pool's role is a superuser or has BYPASSRLS (read once): row-level security does not hold
        it, so the per-transaction setting would be a wasted round trip."""
        if self._bypass is None:
            self._bypass = bool(conn.execute("SELECT rolsuper OR rolbypassrls FROM pg_roles "
                                             "WHERE rolname = current_user").fetchone()[0])
        return self._bypass

    def wipe(self, tables: Sequence[str]) -> None:
        """Make deleted rows leave the table files: ``VACUUM FULL`` on each of ``tables`` (outside a transaction
        block, as VACUUM must run). Their versions stay in WAL segments and backups taken before."""
        with self.pool.connection() as conn:
            for t in tables:
                conn.execute(f'VACUUM FULL "{self.schema}"."{t}"')

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None


class ProjectionDB:
    """Connections to the projections' database. Thread-safe: one SQLite connection per thread, or a pool.

    The database's dialect (:class:`SQLiteDialect` or :class:`PostgresDialect`, ``sql_dialect``) is chosen here,
    once, from which argument is given; every difference between the two is a method of it.

    Args:
        sqlite_path: path of the SQLite file (embedded mode), or
        dsn: a ``postgresql://`` conninfo, with ``schema`` the PostgreSQL schema holding the tables.

    Raises:
        ValueError: neither or both of ``sqlite_path`` and ``dsn``.
        BadInput: ``schema`` is not a plain schema name (PostgreSQL).
    """

    def __init__(self, sqlite_path: str | None = None, dsn: str | None = None, schema: str = "memledger") -> None:
        if (sqlite_path is None) == (dsn is None):
            raise ValueError("give exactly one of sqlite_path or dsn")
        self.sqlite_path = sqlite_path
        self.dsn = dsn
        self.schema = schema
        self.sql_dialect: SQLiteDialect | PostgresDialect = (
            SQLiteDialect(sqlite_path) if sqlite_path else PostgresDialect(dsn, schema))  # type: ignore[arg-type]
        #: the dialect's name, ``"sqlite"`` or ``"postgres"`` (for messages and tests)
        self.dialect = self.sql_dialect.name
        #: seals personal content under each user's key (ledger/sealing.py); set by the store once its key store is
        #: open, None when encryption is off
        self.sealer: Any = None
        #: callables run with the cursor first thing in every transaction and read snapshot (before any other
        #: statement, so they see the caller's snapshot). MemoryLedger registers the blue/green resolver here
        #: (replay/rebuild.py): which copy of each projection serves is read in the same snapshot as the rows,
        #: so a switch is never half-seen.
        self.on_begin: list[Callable[[Cursor], None]] = []

    def transaction(self) -> Any:
        """An exclusive write transaction (a context manager giving a :class:`Cursor`): commits on success, rolls
        back on any exception."""
        return self.sql_dialect.transaction(self)

    def read(self) -> Any:
        """A read-only snapshot (a context manager giving a :class:`Cursor`, one transaction), never blocking
        writers on either backend."""
        return self.sql_dialect.read(self)

    def wipe(self, tables: Sequence[str]) -> None:
        """Make the rows deleted from ``tables`` leave the disk (SQLite: truncate the WAL; PostgreSQL: VACUUM
        FULL each table). Runs outside any transaction of this object."""
        self.sql_dialect.wipe(tables)

    def close(self) -> None:
        self.sql_dialect.close()
