"""The read side's database: one SQLite file (embedded default) or one PostgreSQL schema (production).

Projections write portable SQL (``?`` placeholders, ``BIGINT``, ``ON CONFLICT ... DO UPDATE``); this module runs it
on either backend. A write transaction is *exclusive* per database (SQLite ``BEGIN IMMEDIATE``; PostgreSQL a
transaction-scoped advisory lock), because a projection's rows and its tracking position must move together and
two catch-up loops in different processes must not apply the same events twice.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

_ADVISORY_KEY = 0x6D656D6C  # "meml": the advisory lock every catch-up on one schema takes


class Cursor:
    """A thin cursor: ``execute(sql, params)`` with ``?`` placeholders on both backends."""

    def __init__(self, raw: Any, dialect: str) -> None:
        self.raw = raw
        self.dialect = dialect

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.dialect == "postgres" else sql

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

    @property
    def rowcount(self) -> int:
        return self.raw.rowcount


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
        if self.dialect == "postgres":
            from psycopg_pool import ConnectionPool

            def configure(conn: Any) -> None:
                conn.autocommit = True
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
                conn.execute(f'SET search_path TO "{schema}"')

            self._pool = ConnectionPool(dsn, min_size=1, max_size=8, configure=configure, open=True)

    # -- connections -------------------------------------------------------------------------------------------
    def _sqlite(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.sqlite_path, isolation_level=None, timeout=60, check_same_thread=False)
            # WAL lets readers read while a catch-up writes; secure_delete overwrites erased rows' bytes.
            conn.execute("PRAGMA journal_mode=WAL")
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
                yield Cursor(conn.cursor(), "sqlite")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        else:
            with self._pool.connection() as conn:
                with conn.transaction():
                    cur = conn.cursor()
                    cur.execute("SELECT pg_advisory_xact_lock(%s)", (_ADVISORY_KEY,))
                    yield Cursor(cur, "postgres")

    @contextmanager
    def read(self) -> Iterator[Cursor]:
        """A read-only snapshot (one transaction), never blocking writers on either backend."""
        if self.dialect == "sqlite":
            conn = self._sqlite()
            conn.execute("BEGIN")
            try:
                yield Cursor(conn.cursor(), "sqlite")
            finally:
                conn.execute("COMMIT")
        else:
            with self._pool.connection() as conn:
                with conn.transaction():
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    yield Cursor(conn.cursor(), "postgres")

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
