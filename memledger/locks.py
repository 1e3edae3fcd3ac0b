"""The per-user write lock: two writers that decide from what a user's memory holds (``remember``, ``relate``,
``forget``, ``unlink``, a source's withdrawal) never decide from the same state at once. A thread lock per store and
user in the process, plus the backend's cross-process lock (ledger/backend.py: a file lock in the home directory on
SQLite, an advisory lock on PostgreSQL)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from .store import Store

_THREAD_LOCKS: dict[tuple[str, str], threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


@contextmanager
def user_lock(store: Store, user_id: str) -> Iterator[None]:
    """Serialise the deciding writes of one user: in this process (a lock per store and user) and across
    processes."""
    ident = (store.backend.ident, user_id)
    with _THREAD_LOCKS_GUARD:
        lock = _THREAD_LOCKS.setdefault(ident, threading.Lock())
    digest = hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:16]
    # the lock's name (a file on SQLite) and key (an advisory lock on PostgreSQL) both come from the user's digest,
    # so every process of the store takes the same lock
    with lock, store.backend.lock(f"remember-{digest}", int(digest[:15], 16)):
        yield
