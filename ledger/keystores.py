"""Where per-user data keys live: ``SQLiteKeyStore`` (``<home>/keys.db``) and ``PostgresKeyStore``
(``<schema>.user_keys``), both implementing :class:`ledger.crypto.KeyStore`.

A data key is 32 random bytes, stored raw or wrapped with AES-GCM under ``$MEMLEDGER_MASTER_KEY`` (bound to the
user id by the associated data). Destroying a key overwrites and deletes its row; destruction is remembered so an
erased user id stays burned.

Per-fact keys (``memledger forget``) live beside them in table ``fact_keys`` (``<schema>.fact_keys``): one row per
fact event, ``(user_id, key_id, key, created_at, destroyed_at)``, the key wrapped under the user's data key by
ledger/crypto.py (:func:`~ledger.crypto.wrap_fact_key`). Destroying one sets ``key`` to NULL and ``destroyed_at``; a
row that is gone is told apart from one never made (a wrong key store). Destroying the user deletes the user's
``fact_keys`` rows as well. See ledger/crypto.py for the mapper that uses the keys and docs/erasure.md for why.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from typing import Any, Callable

from .crypto import (
    DATA_KEY_BYTES,
    _erased_error,
)
from .errors import SubjectErasedError
from .keystore_base import _KeyStoreBase, _now_iso
from .keystore_postgres import PostgresKeyStore
from .signing import is_reserved

__all__ = ["PostgresKeyStore", "SQLiteKeyStore"]


class SQLiteKeyStore(_KeyStoreBase):
    """Per-user data keys in table ``user_keys`` of their own SQLite file.

    Keep this file apart from the event database: erasure relies on this file forgetting keys, while the event
    log is append-only and backed up freely.

    Concurrency: one connection per thread (and per process: a forked child opens its own). Creation runs in a
    ``BEGIN IMMEDIATE`` transaction, which takes SQLite's write lock before reading, so of two threads or
    processes creating the same user's key the second waits, then finds and returns the first one's key;
    ``INSERT OR IGNORE`` plus a re-read backs that up.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        master_key: bytes | None = None,
        cache_ttl: float = 0.0,
        timeout: float = 30.0,
    ) -> None:
        super().__init__(master_key, cache_ttl)
        self.path = os.fspath(path)
        if self.path == ":memory:" or self.path.startswith("file::memory:"):
            msg = "SQLiteKeyStore needs a file path (an in-memory database is per connection)"
            raise ValueError(msg)
        self.timeout = timeout
        self._local = threading.local()
        self._all_conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        conn = self._conn()
        # The rollback journal (not WAL): with WAL the frames that inserted a key stay in the -wal file after a
        # checkpoint until they happen to be overwritten, so a destroyed key could survive there. In DELETE mode
        # the journal holds old pages only while a write transaction runs and is deleted at commit.
        conn.execute("PRAGMA journal_mode=DELETE")
        # A new file lets pages freed by deleted rows go back to the file system (reclaim_space): a process hands
        # its unused key reserve back at close, ~64 rows per user it wrote for. Takes effect only before the first
        # table exists; an older file keeps its free pages for later rows (a VACUUM converts it). Set on an empty
        # file only: the pragma rewrites the header of an existing one, and opening must change nothing.
        if conn.execute("PRAGMA page_count").fetchone()[0] == 0:
            conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS user_keys ("
                " user_id TEXT PRIMARY KEY,"
                " key BLOB,"  # NULL once destroyed
                " key_format TEXT,"  # 'raw' | 'aesgcm-v1'
                " created_at TEXT NOT NULL,"
                " destroyed_at TEXT"
                ")"
            )
            conn.execute(
                "CREATE TABLE IF NOT EXISTS fact_keys ("
                " user_id TEXT NOT NULL,"
                " key_id TEXT NOT NULL,"
                " key BLOB,"  # wrapped under the user's data key; NULL once destroyed (forget)
                " created_at TEXT NOT NULL,"
                " destroyed_at TEXT,"
                " PRIMARY KEY (user_id, key_id)"
                ")"
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _conn(self) -> sqlite3.Connection:
        pid = os.getpid()
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == pid:
            return conn
        conn = sqlite3.connect(
            self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
        )
        # SQLite does not erase deleted or overwritten content: the old record bytes stay in the page's free
        # space (or in free pages) and can be read from the file with a hex editor long after the UPDATE/DELETE.
        # secure_delete=ON makes SQLite overwrite freed content with zeros, so destroying a key really removes
        # its bytes from the file. (Whether the old bytes survive a given UPDATE depends on where SQLite puts
        # the rewritten cell -- today's row layout happens to overwrite the key in place, a shorter row would
        # not; we do not rely on that.) It is a per-connection setting, hence set on every connection we open.
        conn.execute("PRAGMA secure_delete=ON")
        self._local.conn = conn
        self._local.pid = pid
        with self._conns_lock:
            self._all_conns.append(conn)
        return conn

    def close(self) -> None:
        """Closes every connection this store opened in this process."""
        with self._conns_lock:
            conns, self._all_conns = self._all_conns, []
        for conn in conns:
            try:
                conn.close()
            except sqlite3.ProgrammingError:  # pragma: no cover - closed from another thread already
                pass
        self._local = threading.local()

    def _select(self, user_id: str) -> tuple[Any, ...] | None:
        return self._row(self._conn(), user_id)

    def _any_live_row(self) -> tuple[Any, ...] | None:
        return self._conn().execute(
            "SELECT user_id, key, key_format FROM user_keys WHERE key IS NOT NULL LIMIT 1").fetchone()

    def users(self) -> list[tuple[str, bool]]:
        """(user_id, destroyed) for every user this store has a key row for, by user id: every write creates the
        user's key, so these are the users the ledger holds or has erased (the shard rebalance lists them)."""
        return [(u, bool(d)) for u, d in self._conn().execute(
            "SELECT user_id, destroyed_at IS NOT NULL FROM user_keys ORDER BY user_id").fetchall()
            if not is_reserved(u)]  # the store's signing seed (ledger/signing.py) is no user

    def _row(self, conn: sqlite3.Connection, user_id: str) -> tuple[Any, ...] | None:
        return conn.execute(
            "SELECT key, key_format, destroyed_at FROM user_keys WHERE user_id = ?", (user_id,)
        ).fetchone()

    def get_or_create(self, user_id: str) -> bytes:
        self._check_user_id(user_id)
        if self._known_destroyed(user_id):
            raise _erased_error(user_id)
        cached = self._cached(user_id)
        if cached is not None:
            return cached
        conn = self._conn()
        row = self._row(conn, user_id)  # fast path, no write lock
        if row is None:
            self._check_config_before_new_key(user_id)
            blob, key_format = self._seal(user_id, os.urandom(DATA_KEY_BYTES))
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(
                    "INSERT OR IGNORE INTO user_keys (user_id, key, key_format, created_at)"
                    " VALUES (?, ?, ?, ?)",
                    (user_id, blob, key_format, _now_iso()),
                )
                row = self._row(conn, user_id)  # ours, or the one a racing writer committed first
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        assert row is not None
        return self._key_from_row(user_id, row)

    def destroy(self, user_id: str) -> bool:
        self._check_user_id(user_id)
        conn = self._conn()
        now = _now_iso()
        conn.execute("BEGIN IMMEDIATE")
        try:
            cur = conn.execute(
                "UPDATE user_keys SET key = NULL, destroyed_at = ? WHERE user_id = ? AND destroyed_at IS NULL",
                (now, user_id),
            )
            destroyed = cur.rowcount > 0
            if not destroyed:
                conn.execute(
                    "INSERT OR IGNORE INTO user_keys (user_id, key, key_format, created_at, destroyed_at)"
                    " VALUES (?, NULL, NULL, ?, ?)",
                    (user_id, now, now),
                )
            # the per-fact keys are useless without the user's key; they go too (secure_delete zeroes them)
            conn.execute("DELETE FROM fact_keys WHERE user_id = ?", (user_id,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self._remember_destroyed(user_id)
        return destroyed

    def is_destroyed(self, user_id: str) -> bool:
        self._check_user_id(user_id)
        if self._known_destroyed(user_id):
            return True
        row = self._conn().execute("SELECT destroyed_at FROM user_keys WHERE user_id = ?", (user_id,)).fetchone()
        if row is not None and row[0] is not None:
            self._remember_destroyed(user_id)
            return True
        return False


    def _select_fact(self, user_id: str, key_id: str) -> tuple[Any, ...] | None:
        return self._conn().execute("SELECT key, destroyed_at FROM fact_keys WHERE user_id = ? AND key_id = ?",
                                    (user_id, key_id)).fetchone()

    def _select_facts(self, key_ids: list[str]) -> list[tuple[Any, ...]]:
        return self._conn().execute(
            "SELECT user_id, key_id, key, destroyed_at FROM fact_keys WHERE key_id IN "
            f"({', '.join('?' * len(key_ids))})", key_ids).fetchall()

    def _insert_facts(self, rows: list[tuple[str, str, bytes]]) -> None:
        conn = self._conn()
        now = _now_iso()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("INSERT OR IGNORE INTO fact_keys (user_id, key_id, key, created_at) VALUES (?, ?, ?, ?)",
                             [(u, k, blob, now) for u, k, blob in rows])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def store_fact_keys(self, made: dict[str, list[tuple[str, bytes]]],
                        wrap: Callable[[bytes, str, str, bytes], bytes]) -> None:
        """As the base class, in ONE transaction: the keys of users new to the store and their first fact keys are
        committed together. Why: a key-store commit is a rollback-journal write and an fsync here, and a process's first
        write for a new user paid two of them (its data key, then its fact key; scripts/bench_append.py).

        The new user's key is inserted with ``INSERT OR IGNORE`` under ``BEGIN IMMEDIATE`` and read back, so when
        another process created it first the fact keys are wrapped under the winner's key, never under ours.
        """
        keys: dict[str, bytes] = {}
        missing: list[str] = []
        conn = self._conn()
        for user_id in made:
            self._check_user_id(user_id)
            if self._known_destroyed(user_id):
                raise _erased_error(user_id)
            cached = self._cached(user_id)
            row = None if cached is not None else self._row(conn, user_id)  # fast path, no write lock
            if cached is not None:
                keys[user_id] = cached
            elif row is not None:
                keys[user_id] = self._key_from_row(user_id, row)  # SubjectErasedError for an erased user
            else:
                missing.append(user_id)
        if missing:
            self._check_config_before_new_key(missing[0])
        now = _now_iso()
        conn.execute("BEGIN IMMEDIATE")
        try:
            for user_id in missing:
                blob, key_format = self._seal(user_id, os.urandom(DATA_KEY_BYTES))
                conn.execute("INSERT OR IGNORE INTO user_keys (user_id, key, key_format, created_at) VALUES (?, ?, ?, ?)",
                             (user_id, blob, key_format, now))
                keys[user_id] = self._key_from_row(user_id, self._row(conn, user_id))  # ours, or a racing writer's
            rows = [(u, key_id, wrap(keys[u], u, key_id, key)) for u, pairs in made.items() for key_id, key in pairs]
            for _, key_id, _ in rows:
                if not key_id:
                    raise ValueError("key_id must be a non-empty string")
            conn.executemany("INSERT OR IGNORE INTO fact_keys (user_id, key_id, key, created_at) VALUES (?, ?, ?, ?)",
                             [(u, k, blob, now) for u, k, blob in rows])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        if self.cache_ttl > 0:
            until = time.monotonic() + self.cache_ttl
            with self._cache_lock:
                for user_id, key_id, blob in rows:
                    self._fact_cache[(user_id, key_id)] = (bytes(blob), until)

    def reclaim_space(self) -> None:
        """Give the file's free pages back to the file system (``PRAGMA incremental_vacuum``; a no-op for a file
        made before ``auto_vacuum=INCREMENTAL``). secure_delete has already zeroed what the freed rows held."""
        # executescript steps the statement to its end; execute() stops after its first step, one page
        self._conn().executescript("PRAGMA incremental_vacuum;")

    def _delete_facts(self, user_id: str, key_ids: list[str]) -> int:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            n = conn.execute(f"DELETE FROM fact_keys WHERE user_id = ? AND key_id IN ({', '.join('?' * len(key_ids))})",
                             [user_id, *key_ids]).rowcount
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return n

    def _destroy_facts(self, user_id: str, key_ids: list[str]) -> int:
        conn = self._conn()
        now = _now_iso()
        conn.execute("BEGIN IMMEDIATE")
        try:
            n = 0
            for key_id in key_ids:
                n += conn.execute("UPDATE fact_keys SET key = NULL, destroyed_at = ? WHERE user_id = ? AND key_id = ?"
                                  " AND destroyed_at IS NULL", (now, user_id, key_id)).rowcount
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return n
