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
from datetime import datetime, timezone
from typing import Any, Callable

from .crypto import (
    _FORMAT_RAW,
    _FORMAT_WRAPPED,
    _NONCE_BYTES,
    _WRAP_AAD_PREFIX,
    DATA_KEY_BYTES,
    MASTER_KEY_ENV,
    KeyStoreError,
    _check_master_key,
    _erased_error,
    _lib,
    load_master_key,
)
from .errors import SubjectErasedError

__all__ = ["PostgresKeyStore", "SQLiteKeyStore"]


class _KeyStoreBase:
    """Key wrapping and an optional in-process cache shared by both stores.

    Cache: destroyed users are remembered forever (destruction is permanent); live keys only for ``cache_ttl``
    seconds (default 0: every lookup asks the store, so a destroy by another process takes effect at once).
    A destroy through this object clears its own cache immediately.
    """

    def __init__(self, master_key: bytes | None, cache_ttl: float) -> None:
        if master_key is None:
            master_key = load_master_key()
        else:
            _check_master_key(master_key, "master_key")
        self._wrapper = _lib.AESGCM(master_key) if master_key is not None else None
        self.cache_ttl = float(cache_ttl)
        self._cache: dict[str, tuple[bytes, float]] = {}
        self._destroyed_cache: set[str] = set()
        self._fact_cache: dict[tuple[str, str], tuple[bytes, float]] = {}  # live wrapped per-fact keys, cache_ttl
        self._fact_destroyed: set[tuple[str, str]] = set()
        self._cache_lock = threading.Lock()
        self._config_checked = False

    @property
    def wraps_keys(self) -> bool:
        """True if data keys are stored wrapped by a master key."""
        return self._wrapper is not None

    # ---- wrapping

    def _seal(self, user_id: str, key: bytes) -> tuple[bytes, str]:
        if self._wrapper is None:
            return key, _FORMAT_RAW
        nonce = os.urandom(_NONCE_BYTES)
        aad = _WRAP_AAD_PREFIX + user_id.encode("utf-8")
        return nonce + self._wrapper.encrypt(nonce, key, aad), _FORMAT_WRAPPED

    def _unseal(self, user_id: str, blob: bytes, key_format: str) -> bytes:
        if key_format == _FORMAT_RAW:
            if self._wrapper is not None:
                msg = (
                    f"user_id {user_id!r}: key stored raw but a master key is configured; "
                    f"unset {MASTER_KEY_ENV} for this store (formats are never mixed)"
                )
                raise KeyStoreError(msg)
            key = bytes(blob)
        elif key_format == _FORMAT_WRAPPED:
            if self._wrapper is None:
                msg = (
                    f"user_id {user_id!r}: key stored wrapped but no master key is configured; "
                    f"set {MASTER_KEY_ENV} (base64 of the 32-byte master key)"
                )
                raise KeyStoreError(msg)
            blob = bytes(blob)
            aad = _WRAP_AAD_PREFIX + user_id.encode("utf-8")
            try:
                key = self._wrapper.decrypt(blob[:_NONCE_BYTES], blob[_NONCE_BYTES:], aad)
            except _lib.InvalidTag:
                msg = (
                    f"user_id {user_id!r}: cannot unwrap the data key -- wrong master key "
                    f"({MASTER_KEY_ENV}) or the stored key was altered"
                )
                raise KeyStoreError(msg) from None
        else:
            msg = f"user_id {user_id!r}: unknown key format {key_format!r} in key store"
            raise KeyStoreError(msg)
        if len(key) != DATA_KEY_BYTES:
            msg = f"user_id {user_id!r}: stored data key has {len(key)} bytes, expected {DATA_KEY_BYTES}"
            raise KeyStoreError(msg)
        return key

    # ---- cache

    def _cached(self, user_id: str) -> bytes | None:
        if self.cache_ttl <= 0:
            return None
        with self._cache_lock:
            hit = self._cache.get(user_id)
            if hit is None:
                return None
            if hit[1] < time.monotonic():
                del self._cache[user_id]
                return None
            return hit[0]

    def _remember(self, user_id: str, key: bytes) -> None:
        if self.cache_ttl > 0:
            with self._cache_lock:
                self._cache[user_id] = (key, time.monotonic() + self.cache_ttl)

    def _remember_destroyed(self, user_id: str) -> None:
        with self._cache_lock:
            self._cache.pop(user_id, None)
            self._destroyed_cache.add(user_id)
            for k in [k for k in self._fact_cache if k[0] == user_id]:
                del self._fact_cache[k]

    # ---- per-fact keys (ledger/crypto.py, "Per-fact keys")

    def _select_fact(self, user_id: str, key_id: str) -> tuple[Any, ...] | None:
        """The (wrapped key, destroyed_at) row of a per-fact key, or None. Each backend implements it."""
        raise NotImplementedError

    def _insert_facts(self, rows: list[tuple[str, str, bytes]]) -> None:
        raise NotImplementedError

    def _destroy_facts(self, user_id: str, key_ids: list[str]) -> int:
        raise NotImplementedError

    def put_fact_keys(self, rows: list[tuple[str, str, bytes]]) -> None:
        """Store new per-fact keys ``(user_id, key_id, wrapped key)`` in one transaction (a key id already stored
        is left as it is). Cached for ``cache_ttl`` like user keys."""
        if not rows:
            return
        for user_id, key_id, _ in rows:
            self._check_user_id(user_id)
            if not key_id:
                raise ValueError("key_id must be a non-empty string")
        self._insert_facts(rows)
        if self.cache_ttl > 0:
            until = time.monotonic() + self.cache_ttl
            with self._cache_lock:
                for user_id, key_id, blob in rows:
                    self._fact_cache[(user_id, key_id)] = (bytes(blob), until)

    def store_fact_keys(self, made: dict[str, list[tuple[str, bytes]]],
                        wrap: Callable[[bytes, str, str, bytes], bytes]) -> None:
        """Store new per-fact keys for several users, creating a user's data key first where it has none.

        ``made``: ``{user_id: [(key_id, raw 32-byte fact key), ...]}``; ``wrap(user_key, user_id, key_id, fact_key)``
        seals a fact key under its user's data key (:func:`ledger.crypto.wrap_fact_key`). This default takes one
        transaction per new user's key and one for the fact keys; :class:`SQLiteKeyStore` does it all in one.

        Raises:
            SubjectErasedError: a user's key was destroyed (nothing of the batch is stored).
        """
        keys = {user_id: self.get_or_create(user_id) for user_id in made}
        self.put_fact_keys([(u, key_id, wrap(keys[u], u, key_id, key)) for u, pairs in made.items()
                            for key_id, key in pairs])

    def _delete_facts(self, user_id: str, key_ids: list[str]) -> int:
        raise NotImplementedError

    def release_fact_keys(self, user_id: str, key_ids: list[str]) -> int:
        """Delete stored per-fact keys that no event names (a process's unused reserve, handed back when it closes:
        ledger/crypto.py ``EncryptingMapper.release_unused_fact_keys``). Rows go, not tombstones: unlike a forgotten
        key, nothing in the log refers to them; SQLite's secure_delete zeroes their bytes. Returns rows deleted."""
        return self._drop_fact_keys(user_id, key_ids, self._delete_facts, destroyed=False)

    def _drop_fact_keys(self, user_id: str, key_ids: list[str], op: Callable[[str, list[str]], int], *,
                        destroyed: bool) -> int:
        """Run ``op(user_id, sorted ids)`` (destroy or delete) and make this process's cache forget the keys; a
        destroyed key is remembered as such (``get_fact_key`` then says False, not None)."""
        self._check_user_id(user_id)
        ids = sorted({str(k) for k in key_ids})
        if not ids:
            return 0
        n = op(user_id, ids)
        with self._cache_lock:
            for key_id in ids:
                self._fact_cache.pop((user_id, key_id), None)
                if destroyed:
                    self._fact_destroyed.add((user_id, key_id))
        return n

    def get_fact_key(self, user_id: str, key_id: str) -> bytes | bool | None:
        """The wrapped per-fact key, ``False`` if it was destroyed (forgotten), None if there is no such row."""
        k = (user_id, key_id)
        if k in self._fact_destroyed:
            return False
        if self.cache_ttl > 0:
            with self._cache_lock:
                hit = self._fact_cache.get(k)
                if hit is not None and hit[1] >= time.monotonic():
                    return hit[0]
        row = self._select_fact(user_id, key_id)
        if row is None:
            return None
        blob, destroyed_at = row
        if destroyed_at is not None or blob is None:
            with self._cache_lock:
                self._fact_destroyed.add(k)
            return False
        blob = bytes(blob)
        if self.cache_ttl > 0:
            with self._cache_lock:
                self._fact_cache[k] = (blob, time.monotonic() + self.cache_ttl)
        return blob

    def _select_facts(self, key_ids: list[str]) -> list[tuple[Any, ...]]:
        """(user_id, key_id, wrapped key, destroyed_at) rows of these key ids. Each backend implements it."""
        raise NotImplementedError

    def get_fact_keys(self, pairs: set[tuple[str, str]] | list[tuple[str, str]]) -> dict[tuple[str, str], bytes | bool]:
        """Many per-fact keys in one query per 500 ids (a replay's batch): ``{(user_id, key_id): wrapped key, or False
        if destroyed}``; pairs with no row are left out (the caller then asks :meth:`get_fact_key`, which says so)."""
        wanted = {(u, k) for u, k in pairs}
        out: dict[tuple[str, str], bytes | bool] = {}
        todo = sorted({k for u, k in wanted if (u, k) not in self._fact_destroyed})
        for u, k in wanted:
            if (u, k) in self._fact_destroyed:
                out[(u, k)] = False
        for i in range(0, len(todo), 500):
            for user_id, key_id, blob, destroyed_at in self._select_facts(todo[i:i + 500]):
                pair = (str(user_id), str(key_id))
                if pair not in wanted:
                    continue  # a key id of another user: never handed over
                out[pair] = False if destroyed_at is not None or blob is None else bytes(blob)
        return out

    def destroy_fact_keys(self, user_id: str, key_ids: list[str]) -> int:
        """Destroy per-fact keys of ``user_id`` (key NULL, destroyed_at set; the bytes are overwritten: SQLite's
        secure_delete, PostgreSQL after :meth:`vacuum`). Returns how many live keys were destroyed. This process's
        cache forgets them at once; another process may keep using a cached one for up to ``cache_ttl`` seconds."""
        return self._drop_fact_keys(user_id, key_ids, self._destroy_facts, destroyed=True)

    def _known_destroyed(self, user_id: str) -> bool:
        return user_id in self._destroyed_cache

    @staticmethod
    def _check_user_id(user_id: str) -> str:
        if not isinstance(user_id, str) or not user_id:
            msg = f"user_id must be a non-empty string, got {user_id!r}"
            raise ValueError(msg)
        return user_id

    # -- shared by both stores: reading a key row ------------------------------------------------------------
    def _any_live_row(self) -> tuple[Any, ...] | None:
        """(user_id, key blob, key_format) of some user whose key is not destroyed, or None. Each backend has one."""
        raise NotImplementedError

    def check_configuration(self) -> None:
        """Refuse (KeyStoreError) if this process's master-key configuration cannot open the store's existing keys.

        The facade calls it before every write, so a wrongly configured process writes nothing, not even an event
        that needs no key (``session start`` without a task).
        Checked once per process; one row read."""
        self._check_config_before_new_key(None)

    def _check_config_before_new_key(self, user_id: str | None) -> None:
        """Before sealing a *new* user's key: an existing live key must unseal with this store's configuration.

        Why: a process with a wrong (or no) ``MEMLEDGER_MASTER_KEY`` used to create keys in the wrong format, so the
        store ended up mixing formats and no configuration could rebuild or verify it any more.
        Checked once per process (reads one row). Raises KeyStoreError naming the mismatch; nothing is written.
        """
        if self._config_checked:
            return
        row = self._any_live_row()
        if row is not None:
            try:
                self._unseal(row[0], row[1], row[2])
            except KeyStoreError as exc:
                what = "to write" if user_id is None else f"to create a key for user_id {user_id!r}"
                raise KeyStoreError(f"refusing {what}: this store's existing keys "
                                    f"do not open with this configuration ({exc})") from None
        self._config_checked = True

    def _select(self, user_id: str) -> tuple[Any, ...] | None:
        """The (key blob, key_format, destroyed_at) row of ``user_id``, or None. Each backend implements it."""
        raise NotImplementedError

    def _key_from_row(self, user_id: str, row: tuple[Any, ...]) -> bytes:
        blob, key_format, destroyed_at = row
        if destroyed_at is not None or blob is None:
            self._remember_destroyed(user_id)
            raise _erased_error(user_id)
        key = self._unseal(user_id, blob, key_format)
        self._remember(user_id, key)
        return key

    def get(self, user_id: str) -> bytes | None:
        """The user's data key, or None if it was never created or was destroyed."""
        self._check_user_id(user_id)
        if self._known_destroyed(user_id):
            return None
        cached = self._cached(user_id)
        if cached is not None:
            return cached
        row = self._select(user_id)
        if row is None:
            return None
        try:
            return self._key_from_row(user_id, row)
        except SubjectErasedError:
            return None


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


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
            "SELECT user_id, destroyed_at IS NOT NULL FROM user_keys ORDER BY user_id").fetchall()]

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
        return [(u, bool(d)) for u, d in self._run(lambda c: c.execute(self._sql_users).fetchall())]

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
