"""``PostgresKeyStore``: per-user data keys and per-fact keys in ``<schema>.user_keys`` and ``<schema>.fact_keys``
(PostgreSQL, psycopg 3). What a key store holds and why: ledger/keystores.py."""

from __future__ import annotations

import os
import threading
from typing import Any

from .crypto import (
    DATA_KEY_BYTES,
    _erased_error,
)
from .keystore_base import _KeyStoreBase
from .signing import is_reserved


class PostgresKeyStore(_KeyStoreBase):
    """Per-user data keys in table ``<schema>.user_keys`` (PostgreSQL, psycopg 3).

    Creation is ``INSERT ... ON CONFLICT (user_id) DO NOTHING`` followed by a SELECT, so of two processes
    creating the same user's key both read back the row that won. One connection (autocommit, explicit
    transactions) guarded by a lock serves all threads; key lookups are rare next to event traffic. It is
    reopened if it breaks.

    Physical deletion: PostgreSQL's MVCC keeps the old row version (with the key bytes) until VACUUM, and in
    WAL/backups; see :meth:`vacuum` and the module docstring. Prefer a master key here.
    """

    def __init__(
        self,
        conninfo: str,
        schema: str = "memledger",
        *,
        master_key: bytes | None = None,
        cache_ttl: float = 0.0,
        connect_timeout: int = 10,
    ) -> None:
        import psycopg
        from psycopg import sql

        super().__init__(master_key, cache_ttl)
        self._psycopg = psycopg
        self.conninfo = conninfo
        self.schema = schema
        self.connect_timeout = connect_timeout
        self._lock = threading.RLock()
        self._connection: Any = None
        self._pid = os.getpid()
        table = sql.Identifier(schema, "user_keys")
        self._sql_select = sql.SQL(
            "SELECT key, key_format, destroyed_at FROM {} WHERE user_id = %s"
        ).format(table)
        self._sql_any_live = sql.SQL(
            "SELECT user_id, key, key_format FROM {} WHERE key IS NOT NULL LIMIT 1"
        ).format(table)
        self._sql_insert = sql.SQL(
            "INSERT INTO {} (user_id, key, key_format) VALUES (%s, %s, %s) ON CONFLICT (user_id) DO NOTHING"
        ).format(table)
        self._sql_destroy = sql.SQL(
            "UPDATE {} SET key = NULL, destroyed_at = now() WHERE user_id = %s AND destroyed_at IS NULL"
            " RETURNING user_id"
        ).format(table)
        self._sql_tombstone = sql.SQL(
            "INSERT INTO {} (user_id, key, key_format, destroyed_at) VALUES (%s, NULL, NULL, now())"
            " ON CONFLICT (user_id) DO NOTHING"
        ).format(table)
        self._sql_vacuum = sql.SQL("VACUUM FULL {}").format(table)
        facts = sql.Identifier(schema, "fact_keys")
        self._sql_users = sql.SQL("SELECT user_id, destroyed_at IS NOT NULL FROM {} ORDER BY user_id").format(table)
        self._sql_fact_select = sql.SQL(
            "SELECT key, destroyed_at FROM {} WHERE user_id = %s AND key_id = %s").format(facts)
        self._sql_fact_insert = sql.SQL(
            "INSERT INTO {} (user_id, key_id, key) VALUES (%s, %s, %s) ON CONFLICT (user_id, key_id) DO NOTHING"
        ).format(facts)
        self._sql_fact_destroy = sql.SQL(
            "UPDATE {} SET key = NULL, destroyed_at = now() WHERE user_id = %s AND key_id = ANY(%s)"
            " AND destroyed_at IS NULL").format(facts)
        self._sql_fact_delete_user = sql.SQL("DELETE FROM {} WHERE user_id = %s").format(facts)
        self._sql_fact_delete = sql.SQL("DELETE FROM {} WHERE user_id = %s AND key_id = ANY(%s)").format(facts)
        self._sql_fact_select_many = sql.SQL(
            "SELECT user_id, key_id, key, destroyed_at FROM {} WHERE key_id = ANY(%s)").format(facts)
        self._sql_fact_vacuum = sql.SQL("VACUUM FULL {}").format(facts)
        create = [
            sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)),
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                " user_id text PRIMARY KEY,"
                " key bytea,"
                " key_format text,"
                " created_at timestamptz NOT NULL DEFAULT now(),"
                " destroyed_at timestamptz)"
            ).format(table),
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                " user_id text NOT NULL,"
                " key_id text NOT NULL,"
                " key bytea,"
                " created_at timestamptz NOT NULL DEFAULT now(),"
                " destroyed_at timestamptz,"
                " PRIMARY KEY (user_id, key_id))"
            ).format(facts),
        ]
        with self._lock:
            conn = self._conn()
            with conn.transaction():
                # Concurrent CREATE ... IF NOT EXISTS can still collide in the catalogs; serialise them.
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"memledger.user_keys:{schema}",))
                # an existing schema needs no CREATE right on the database (a role serving a schema made for it)
                if conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone():
                    create = create[1:]
                for stmt in create:
                    conn.execute(stmt)

    def _conn(self) -> Any:
        if self._pid != os.getpid():  # forked: never share a socket with the parent
            self._connection = None
            self._pid = os.getpid()
        conn = self._connection
        if conn is None or conn.closed or conn.broken:
            conn = self._psycopg.connect(
                self.conninfo, autocommit=True, connect_timeout=self.connect_timeout
            )
            self._connection = conn
        return conn

    def _run(self, fn: Any) -> Any:
        """Runs fn(conn) under the lock; retries once on a broken connection."""
        with self._lock:
            try:
                return fn(self._conn())
            except self._psycopg.OperationalError:
                conn = self._connection
                if conn is None or not (conn.closed or conn.broken):
                    raise
                return fn(self._conn())

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _select(self, user_id: str) -> tuple[Any, ...] | None:
        return self._run(lambda c: c.execute(self._sql_select, (user_id,)).fetchone())

    def _any_live_row(self) -> tuple[Any, ...] | None:
        return self._run(lambda c: c.execute(self._sql_any_live).fetchone())

    def users(self) -> list[tuple[str, bool]]:
        """(user_id, destroyed) for every user with a key row, by user id (see ``SQLiteKeyStore.users``)."""
        return [(u, bool(d)) for u, d in self._run(lambda c: c.execute(self._sql_users).fetchall())
                if not is_reserved(u)]  # the store's signing seed (ledger/signing.py) is no user

    def get_or_create(self, user_id: str) -> bytes:
        self._check_user_id(user_id)
        if self._known_destroyed(user_id):
            raise _erased_error(user_id)
        cached = self._cached(user_id)
        if cached is not None:
            return cached
        row = self._select(user_id)
        if row is None:
            self._check_config_before_new_key(user_id)
            blob, key_format = self._seal(user_id, os.urandom(DATA_KEY_BYTES))

            def insert_then_select(conn: Any) -> Any:
                conn.execute(self._sql_insert, (user_id, blob, key_format))
                # A separate statement: under READ COMMITTED it sees whichever insert committed first.
                return conn.execute(self._sql_select, (user_id,)).fetchone()

            row = self._run(insert_then_select)
        assert row is not None
        return self._key_from_row(user_id, row)

    def destroy(self, user_id: str) -> bool:
        self._check_user_id(user_id)

        def do(conn: Any) -> bool:
            with conn.transaction():
                destroyed = conn.execute(self._sql_destroy, (user_id,)).fetchone() is not None
                if not destroyed:
                    conn.execute(self._sql_tombstone, (user_id,))
                conn.execute(self._sql_fact_delete_user, (user_id,))
            return destroyed

        destroyed = self._run(do)
        self._remember_destroyed(user_id)
        return destroyed

    def is_destroyed(self, user_id: str) -> bool:
        self._check_user_id(user_id)
        if self._known_destroyed(user_id):
            return True
        row = self._select(user_id)
        if row is not None and row[2] is not None:
            self._remember_destroyed(user_id)
            return True
        return False

    def vacuum(self) -> None:
        """Rewrites the key table (VACUUM FULL) so dead row versions holding destroyed keys leave its files.

        Takes an exclusive lock on the (small) table for the duration. WAL segments and backups taken before
        the destroy still hold the old bytes; expiring those is an operational duty.
        """
        self._run(lambda c: c.execute(self._sql_vacuum))
        self._run(lambda c: c.execute(self._sql_fact_vacuum))

    def _select_fact(self, user_id: str, key_id: str) -> tuple[Any, ...] | None:
        return self._run(lambda c: c.execute(self._sql_fact_select, (user_id, key_id)).fetchone())

    def _select_facts(self, key_ids: list[str]) -> list[tuple[Any, ...]]:
        return list(self._run(lambda c: c.execute(self._sql_fact_select_many, (key_ids,)).fetchall()))

    def _insert_facts(self, rows: list[tuple[str, str, bytes]]) -> None:
        def do(conn: Any) -> None:
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(self._sql_fact_insert, rows)

        self._run(do)

    def _delete_facts(self, user_id: str, key_ids: list[str]) -> int:
        def do(conn: Any) -> int:
            with conn.transaction():
                return conn.execute(self._sql_fact_delete, (user_id, key_ids)).rowcount

        return int(self._run(do))

    def _destroy_facts(self, user_id: str, key_ids: list[str]) -> int:
        def do(conn: Any) -> int:
            with conn.transaction():
                return conn.execute(self._sql_fact_destroy, (user_id, key_ids)).rowcount

        return int(self._run(do))
