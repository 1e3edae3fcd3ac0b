"""What both data-key stores share (ledger/keystores.py: SQLite; ledger/keystore_postgres.py: PostgreSQL): wrapping
a data key under the master key, and an optional in-process cache of keys and of destroyed users."""

from __future__ import annotations

import os
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
