"""The per-user write lock: two writers that decide from what a user's memory holds (``remember``, ``relate``,
``forget``, ``unlink``, a source's withdrawal) never decide from the same state at once. A thread lock per store and
user in the process, plus a file lock in the home directory (SQLite) or a PostgreSQL advisory lock, across
processes."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from .store import Store

_THREAD_LOCKS: dict[tuple[str, str], threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


def _store_id(store: Store) -> str:
    s = store.settings
    return str(s.home) if s.home is not None else f"{s.dsn}#{s.schema}"


@contextmanager
def user_lock(store: Store, user_id: str) -> Iterator[None]:
    """Serialise the deciding writes of one user: in this process (a lock per store and user) and across
    processes."""
    ident = (_store_id(store), user_id)
    with _THREAD_LOCKS_GUARD:
        lock = _THREAD_LOCKS.setdefault(ident, threading.Lock())
    digest = hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:16]
    with lock:
        if store.settings.home is not None:
            import fcntl

            d = store.settings.home / "locks"
            d.mkdir(exist_ok=True)
            with open(d / f"remember-{digest}.lock", "a+b") as f:
                fcntl.flock(f, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(f, fcntl.LOCK_UN)
        else:
            from projections.db import connect

            with connect(store.settings.dsn) as conn:
                key = int(digest[:15], 16)
                conn.execute("SELECT pg_advisory_lock(%s)", (key,))
                try:
                    yield
                finally:
                    conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
