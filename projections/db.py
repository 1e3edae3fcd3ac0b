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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ledger.config import use_wal

_ADVISORY_KEY = 0x6D656D6C  # "meml": the advisory lock every catch-up on one schema takes (with the schema's hash)
_SETUP_KEY = 0x6D656D73  # "mems": held while a process creates a schema's tables


class Cursor:
    """A thin cursor: ``execute(sql, params)`` with ``?`` placeholders on both backends."""

    def __init__(self, raw: Any, dialect: str) -> None:
        self.raw = raw
        self.dialect = dialect

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
        return self.raw.fetchone()

    def fetchall(self) -> list[tuple]:
        return self.raw.fetchall()

    def fetchmany(self, size: int) -> list[tuple]:
        """Up to ``size`` more rows of the last query ([] when none are left): a large result read in pieces."""
        return self.raw.fetchmany(size)

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
                cur = Cursor(conn.cursor(), "sqlite")
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
                    pcur = Cursor(cur, "postgres")
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
                cur = Cursor(conn.cursor(), "sqlite")
                for hook in self.on_begin:
                    hook(cur)
                yield cur
            finally:
                conn.execute("COMMIT")
        else:
            with self._pool.connection() as conn:
                with conn.transaction():
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    pcur = Cursor(conn.cursor(), "postgres")
                    for hook in self.on_begin:
                        hook(pcur)
                    yield pcur

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
