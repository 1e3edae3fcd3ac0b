"""Where a ledger lives: ``--home`` / ``$MEMLEDGER_HOME`` (embedded SQLite) or ``--dsn`` / ``$MEMLEDGER_DSN``.

Embedded layout of a home directory::

    events.db         the log (eventsourcing.sqlite: stored_events with the notification log)
    projections.db    every projection's tables and projection_tracking

With a DSN, the log uses ``eventsourcing.postgres`` and the projections a schema of the same database.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from .errors import BadInput

HOME_ENV = "MEMLEDGER_HOME"
DSN_ENV = "MEMLEDGER_DSN"
DEFAULT_HOME = ".memledger"


@dataclass(frozen=True)
class Settings:
    """Resolved storage settings. Exactly one of ``home`` (a directory) or ``dsn`` is set."""

    home: Path | None
    dsn: str | None
    schema: str = "memledger"

    @classmethod
    def resolve(cls, home: str | os.PathLike[str] | None = None, dsn: str | None = None,
                schema: str | None = None) -> Settings:
        """Explicit arguments win, then ``$MEMLEDGER_DSN``, then ``$MEMLEDGER_HOME``, then ``./.memledger``."""
        if home is not None and dsn is not None:
            raise BadInput("--dsn", "given together with --home", "choose one store")
        if home is not None and not str(home).strip():
            # an empty --home used to mean the current directory: the store's files landed among the caller's
            raise BadInput("--home", "is empty", "give the ledger's directory, or leave --home out (default "
                                                 f"${HOME_ENV} or {DEFAULT_HOME})")
        if dsn is not None and not dsn.strip():
            raise BadInput("--dsn", "is empty", "give a postgresql:// URL, or leave --dsn out")
        if home is None and dsn is None:
            dsn = os.environ.get(DSN_ENV) or None
            if dsn is None:
                home = os.environ.get(HOME_ENV) or DEFAULT_HOME
        if dsn is not None:
            if not dsn.startswith(("postgresql://", "postgres://")):
                raise BadInput("--dsn", f"{dsn!r} is not a postgresql:// URL", "e.g. postgresql://postgres@127.0.0.1:5432/test")
            return cls(home=None, dsn=dsn, schema=schema or os.environ.get("MEMLEDGER_SCHEMA", "memledger"))
        return cls(home=Path(home).expanduser(), dsn=None)

    def prepare_event_store(self) -> None:
        """SQLite: put ``events.db`` in WAL mode before eventsourcing opens it, retrying while another opener holds it.

        Why: eventsourcing's SQLite datastore switches a new database to WAL with ``PRAGMA journal_mode=WAL`` on its
        first connection, and that statement fails at once with "database is locked" when another connection is
        opening the same new file (SQLite does not apply the busy timeout to it). Several threads or processes
        opening a fresh store together lost one of them that way (found as a hung concurrency test: the dead thread
        never reached its barrier). Once the file is in WAL mode (a persistent property) eventsourcing only reads
        the mode. PostgreSQL: nothing to do.
        """
        if self.home is None:
            return
        conn = sqlite3.connect(str(self.home / "events.db"), timeout=60)
        try:
            use_wal(conn, "events.db")
        finally:
            conn.close()

    def event_store_env(self) -> dict[str, str]:
        """The eventsourcing ``Application`` environment for this store."""
        if self.home is not None:
            return {
                "PERSISTENCE_MODULE": "eventsourcing.sqlite",
                "SQLITE_DBNAME": str(self.home / "events.db"),
                "SQLITE_LOCK_TIMEOUT": "60",
            }
        u = urlparse(self.dsn)
        env = {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": (u.path or "/postgres").lstrip("/") or "postgres",
            "POSTGRES_HOST": u.hostname or "127.0.0.1",
            "POSTGRES_PORT": str(u.port or 5432),
            "POSTGRES_USER": unquote(u.username or "postgres"),
            "POSTGRES_PASSWORD": unquote(u.password or ""),
            "POSTGRES_SCHEMA": self.schema,
            "POSTGRES_POOL_SIZE": "5",
            "POSTGRES_MAX_OVERFLOW": "10",
        }
        return env


def use_wal(conn: sqlite3.Connection, what: str = "database") -> None:
    """Put ``conn``'s database in WAL mode (a persistent property of the file), retrying while it is locked.

    Why: ``PRAGMA journal_mode=WAL`` on a new file fails at once with "database is locked" when another connection
    is opening the same file: SQLite does not apply the busy timeout to it. Several threads or processes opening a
    fresh store together lost one of them (found as a hung concurrency test whose dead thread never reached its
    barrier). Only a file not yet in WAL mode is switched; afterwards the mode is just read.
    """
    import time

    for attempt in range(200):
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            time.sleep(min(0.1, 0.002 * (attempt + 1)))
    raise sqlite3.OperationalError(f"{what}: could not switch to WAL mode, the file stayed locked")


#: The files of an embedded store that hold personal data: the log, the read models, the per-user data keys.
STORE_FILES = ("events.db", "projections.db", "keys.db")
#: Folders of an embedded store (the semantic index: embeddings cache and per-user index files): 0700.
STORE_DIRS = ("vectors", "locks")


def create_private_home(home: Path) -> None:
    """Create the store directory ``home`` (and missing parents) readable by its owner only.

    ``home`` itself gets mode 0700 whatever the umask when this call creates it (its parents keep the umask's
    mode, as ``mkdir -p`` does): the store holds every user's memories and, without a master key, their raw data
    keys, so no other local account may list or open it. Files created inside are then unreachable by others
    whatever their own mode; :func:`make_files_private` also sets them to 0600.

    Raises:
        MemledgerError: the directory cannot be created (a read-only or virtual file system, no permission),
            with the OS's reason and what to do.
    """
    from .errors import MemledgerError

    existed = home.exists()
    try:
        home.mkdir(parents=True, exist_ok=True)
        # A new folder, or an empty one the store is about to fill (`mkdir x; memledger --home x ...`), becomes the
        # owner's alone; a folder that already holds other things is left as it is (exposure() warns about it).
        if not existed or (home.stat().st_mode & 0o077 and not any(home.iterdir())):
            os.chmod(home, 0o700)
    except OSError as exc:
        raise MemledgerError(f"cannot create the ledger directory {str(home)!r}: {exc.strerror or exc}; give "
                             "--home (or $MEMLEDGER_HOME) a directory you can write") from None


def make_files_private(home: Path) -> None:
    """Set the store files of ``home`` (:data:`STORE_FILES`, the ``*.db`` files of :data:`STORE_DIRS`, and SQLite's
    ``-wal``/``-shm`` beside them) to 0600 and the store folders to 0700.

    SQLite creates a database's ``-wal`` and ``-shm`` files with the database file's own permissions, so they
    follow. Files this process does not own are left as they are (:func:`exposure` reports them).
    """
    # the store's folders and their sub-folders two levels down (vectors/<model>/<copy>), not every index file: a
    # private folder already keeps them from other accounts, and a store may hold one index file per user
    dirs = [home / d for d in STORE_DIRS]
    dirs += [s for d in dirs if d.is_dir() for s in d.iterdir() if s.is_dir()]
    dirs += [s for d in dirs[len(STORE_DIRS):] for s in d.iterdir() if s.is_dir()]
    files = [home / name for name in STORE_FILES] + [p for d in dirs if d.is_dir() for p in d.glob("*.db")]
    files += [p for p in (home / "locks").glob("*.lock")] if (home / "locks").is_dir() else []
    for path in [*dirs, *(q for p in files for q in (p, p.with_name(p.name + "-wal"), p.with_name(p.name + "-shm")))]:
        try:
            if path.exists() and path.stat().st_mode & 0o077:
                os.chmod(path, 0o700 if path.is_dir() else 0o600)
        except PermissionError:
            pass


def exposure(home: Path) -> str | None:
    """A warning if other local accounts can read the store at ``home``, else None.

    The store is exposed when ``home`` lets group or others in (search or read bit) and a store file in it is
    group- or world-readable. The warning names the ``chmod`` that fixes it.
    """
    try:
        if not home.stat().st_mode & 0o055:
            return None
        candidates = [home / n for n in STORE_FILES]
        for d in STORE_DIRS:
            if (home / d).is_dir() and (home / d).stat().st_mode & 0o055:
                candidates += sorted((home / d).glob("*.db"))
        readable = [str(p.relative_to(home)) for p in candidates if p.exists() and p.stat().st_mode & 0o044]
    except OSError:
        return None
    if not readable:
        return None
    return (f"warning: {', '.join(readable)} in {home} can be read by other local accounts (they hold users' "
            f"memories and keys); fix with: chmod -R go-rwx {home}")
