"""The two backends of a store, each one class: :class:`SQLiteBackend` (an embedded home directory) and
:class:`PostgresBackend` (a schema of a PostgreSQL database).

A store's backend is chosen once, by :attr:`ledger.config.Settings.backend` from the resolved settings (``--home``
or ``--dsn``), the way eventsourcing chooses its infrastructure factory once from ``PERSISTENCE_MODULE``; what differs
between the backends is a method of these classes, never an ``if`` on the settings at the place that needs it. The
backend of the log is eventsourcing's own (:meth:`event_store_env` names it and the recorder classes that add the
ledger's queries, ledger/recorders.py); the read side's SQL dialect is chosen with it (projections/db.py).

The embedded home's file helpers (WAL mode, private permissions, compaction) live here too: only
:class:`SQLiteBackend` uses them.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from .errors import BadInput, MemledgerError

#: The files of an embedded store that hold personal data: the log, the read models, the per-user data keys.
STORE_FILES = ("events.db", "projections.db", "keys.db")
#: Folders of an embedded store (the semantic index: embeddings cache and per-user index files): 0700.
STORE_DIRS = ("vectors", "locks")
#: The files an erasure leaves as they are: the log (ciphertext only; rewriting a large log is costly) and the key
#: store (secure_delete already zeroed the key, and it runs in rollback-journal mode: no -wal copies).
NOT_COMPACTED = ("events.db", "keys.db")

_SETUP_KEY = 0x6D656D73  # "mems": held while a process creates a schema's tables
SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class SQLiteBackend:
    """An embedded store: the directory ``home`` holding ``events.db`` (the log), ``projections.db`` (the read
    models), ``keys.db`` (the data keys) and the ``vectors`` and ``locks`` folders.

    Attributes: ``name`` ``"sqlite"``; ``home`` the directory; ``dsn`` None; ``schema`` unused (kept for the
    settings' symmetry); ``projections_path`` the read models' file; ``log_name`` the log's file, for messages.
    """

    name = "sqlite"
    dsn = None

    def __init__(self, home: Path, schema: str = "memledger") -> None:
        self.home = home
        self.schema = schema
        self.projections_path = str(home / "projections.db")
        self.log_name = str(home / "events.db")

    @property
    def ident(self) -> str:
        """Names the store among the stores one process opens (the per-user locks' key)."""
        return str(self.home)

    def event_store_env(self) -> dict[str, str]:
        """The eventsourcing ``Application`` environment: the library's SQLite module, its file, and the recorder
        class that adds the ledger's stream lookups (ledger/recorders.py)."""
        return {
            "PERSISTENCE_MODULE": "eventsourcing.sqlite",
            "SQLITE_DBNAME": str(self.home / "events.db"),
            "SQLITE_LOCK_TIMEOUT": "60",
            "APPLICATION_RECORDER_TOPIC": "ledger.recorders:LedgerSQLiteRecorder",
        }

    def prepare_event_store(self) -> None:
        """Put ``events.db`` in WAL mode before eventsourcing opens it, retrying while another opener holds it.

        Why: eventsourcing's SQLite datastore switches a new database to WAL with ``PRAGMA journal_mode=WAL`` on its
        first connection, and that statement fails at once with "database is locked" when another connection is
        opening the same new file (SQLite does not apply the busy timeout to it). Several threads or processes
        opening a fresh store together lost one of them that way (found as a hung concurrency test: the dead thread
        never reached its barrier). Once the file is in WAL mode (a persistent property) eventsourcing only reads
        the mode.
        """
        conn = sqlite3.connect(str(self.home / "events.db"), timeout=60)
        try:
            use_wal(conn, "events.db")
        finally:
            conn.close()

    @contextmanager
    def setup_lock(self) -> Iterator[None]:
        """Nothing to serialise: SQLite's own locks keep two openers of a new file apart."""
        yield

    def open_home(self) -> str | None:
        """Create the home (0700) if missing; returns the warning of :func:`exposure` when others can read it.

        Raises:
            BadInput: ``--home`` names a file, not a directory.
            MemledgerError: the directory cannot be created.
        """
        if self.home.exists() and not self.home.is_dir():
            raise BadInput("--home", f"{str(self.home)!r} is a file, not a directory",
                           "give a directory for the ledger (it is created if missing)")
        create_private_home(self.home)
        return exposure(self.home)

    def protect_files(self) -> None:
        """Set the store's files and folders to the owner's alone (:func:`make_files_private`)."""
        make_files_private(self.home)

    def lacks_log(self) -> bool:
        """True when the home holds no log (``events.db``): opening it would create an empty store."""
        return not (self.home / "events.db").exists()

    def fresh(self) -> tuple[bool, set[str] | None]:
        """Whether opening will create the store, and the home's entries before (None: no home yet), for
        :meth:`drop_created`."""
        if not self.home.exists():
            return True, None
        if not self.home.is_dir() or (self.home / "events.db").exists():
            return False, None
        return True, set(os.listdir(self.home))

    def drop_created(self, before: set[str] | None) -> None:
        """Delete what opening the store created: the whole home if it did not exist (``before`` None), else only
        the entries that are not in ``before`` (whatever was in the directory before stays)."""
        import shutil

        if before is None:
            shutil.rmtree(self.home, ignore_errors=True)
            return
        for name in set(os.listdir(self.home)) - before:
            p = self.home / name
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink(missing_ok=True)

    def keystore(self, encrypt: bool, cache_ttl: float, encryption_env: str) -> Any:
        """``<home>/keys.db`` (:class:`ledger.keystores.SQLiteKeyStore`), or None when ``encrypt`` is False.

        Raises:
            MemledgerError: encryption off for a store that already has a ``keys.db`` -- its log holds ciphertext
                that only the key store can read, so switching off would return tokens as content.
        """
        from .keystores import SQLiteKeyStore

        path = self.home / "keys.db"
        if not encrypt:
            if path.exists():
                raise MemledgerError(f"{encryption_env}=off but {path} exists: this store was written encrypted; "
                                     f"unset {encryption_env} to open it")
            return None
        return SQLiteKeyStore(path, cache_ttl=cache_ttl)

    @contextmanager
    def lock(self, name: str, key: int) -> Iterator[None]:
        """Hold a cross-process lock for the block: the file lock ``<home>/locks/<name>.lock`` (``key`` names the
        same lock on PostgreSQL)."""
        import fcntl

        d = self.home / "locks"
        d.mkdir(exist_ok=True)
        with open(d / f"{name}.lock", "a+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def files(self, folder: str, name: str) -> list[Path]:
        """The files called ``name`` anywhere under the home's ``folder`` (e.g. a user's index files)."""
        return list((self.home / folder).rglob(name))

    def compact(self, keystore: Any, db: Any, tables: list[str]) -> list[str]:
        """Make deleted bytes leave the disk after an erasure: every ``*.db`` file of the home but
        :data:`NOT_COMPACTED` is compacted (:func:`compact_sqlite`; ``keystore``, ``db`` and ``tables`` are in those
        files). Returns the compacted files' paths relative to the home."""
        compacted = []
        for path in sorted(self.home.rglob("*.db")):
            rel = path.relative_to(self.home).as_posix()
            if rel not in NOT_COMPACTED and compact_sqlite(path):
                compacted.append(rel)
        return compacted


class PostgresBackend:
    """A store in the schema ``schema`` of the PostgreSQL database at ``dsn``: the log (eventsourcing's tables),
    the read models and the key tables side by side. No files: ``home`` and ``projections_path`` are None.

    Raises:
        BadInput: ``schema`` is not a plain schema name (:func:`check_schema_name`).
    """

    name = "postgres"
    home = None
    projections_path = None
    log_name = "the log (table stored_events)"

    def __init__(self, dsn: str, schema: str) -> None:
        self.dsn = dsn
        self.schema = check_schema_name(schema)

    @property
    def ident(self) -> str:
        """Names the store among the stores one process opens (the per-user locks' key)."""
        return f"{self.dsn}#{self.schema}"

    def event_store_env(self) -> dict[str, str]:
        """The eventsourcing ``Application`` environment: the library's PostgreSQL module, the server and schema
        from the DSN, and the recorder class that adds the ledger's stream lookups (ledger/recorders_postgres.py)."""
        u = urlparse(self.dsn)
        return {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": (u.path or "/postgres").lstrip("/") or "postgres",
            "POSTGRES_HOST": u.hostname or "127.0.0.1",
            "POSTGRES_PORT": str(u.port or 5432),
            "POSTGRES_USER": unquote(u.username or "postgres"),
            "POSTGRES_PASSWORD": unquote(u.password or ""),
            "POSTGRES_SCHEMA": self.schema,
            "POSTGRES_POOL_SIZE": "5",
            "POSTGRES_MAX_OVERFLOW": "10",
            "APPLICATION_RECORDER_TOPIC": "ledger.recorders_postgres:LedgerPostgresRecorder",
        }

    def prepare_event_store(self) -> None:
        """Nothing to prepare: eventsourcing creates its tables in the schema (made by the projection database)."""

    @contextmanager
    def setup_lock(self) -> Iterator[None]:
        """Serialise creating the store's tables across processes: a session-level advisory lock on its own
        connection. Why: ``CREATE TABLE IF NOT EXISTS`` is not safe against a concurrent identical statement in
        PostgreSQL (both can pass the existence check, and one then fails on ``pg_type``'s unique index).

        Raises:
            MemledgerError: the server cannot be reached (:func:`connect`).
        """
        with connect(self.dsn) as conn:
            conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (_SETUP_KEY, self.schema))
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (_SETUP_KEY, self.schema))

    def open_home(self) -> str | None:
        """No home directory: nothing to create, nothing exposed (None)."""
        return None

    def protect_files(self) -> None:
        """No files: the server's own permissions hold the data."""

    def lacks_log(self) -> bool:
        """False without asking the server: a missing schema is created by the opening it is about to make."""
        return False

    def fresh(self) -> tuple[bool, None]:
        """Whether opening will create the store (its schema does not exist yet), and None (see
        :meth:`drop_created`)."""
        with connect(self.dsn) as conn:
            row = conn.execute("SELECT 1 FROM information_schema.schemata WHERE schema_name = %s",
                               (self.schema,)).fetchone()
        return row is None, None

    def drop_created(self, before: None) -> None:
        """Drop the store's schema, everything in it."""
        with connect(self.dsn) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')

    def keystore(self, encrypt: bool, cache_ttl: float, encryption_env: str) -> Any:
        """The table ``<schema>.user_keys`` (:class:`ledger.keystore_postgres.PostgresKeyStore`), or None when
        ``encrypt`` is False."""
        if not encrypt:
            return None
        from .keystore_postgres import PostgresKeyStore

        return PostgresKeyStore(self.dsn or "", schema=self.schema, cache_ttl=cache_ttl)

    @contextmanager
    def lock(self, name: str, key: int) -> Iterator[None]:
        """Hold a cross-process lock for the block: the session advisory lock ``key`` (a bigint), on a connection
        of its own (``name`` names the same lock on SQLite).

        Raises:
            MemledgerError: the server cannot be reached.
        """
        with connect(self.dsn) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (key,))
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    def files(self, folder: str, name: str) -> list[Path]:
        """None: a PostgreSQL store keeps no files."""
        return []

    def compact(self, keystore: Any, db: Any, tables: list[str]) -> list[str]:
        """Make deleted bytes leave the table files after an erasure: ``VACUUM FULL`` on the key tables (the
        destroyed keys' dead row versions) and on ``tables`` of the projection database ``db``. Returns [] (no
        files)."""
        vacuum = getattr(keystore, "vacuum", None)  # None when encryption is off
        if vacuum is not None:
            vacuum()
        db.wipe(tables)
        return []


def connect(dsn: str) -> Any:
    """One autocommit psycopg connection.

    Raises:
        MemledgerError: the server cannot be reached (a clear message instead of a driver traceback; CLI exit 1).
    """
    import psycopg

    try:
        return psycopg.connect(dsn, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        raise MemledgerError(f"cannot connect to PostgreSQL ({first}): is the server up and the --dsn right?") \
            from None


def check_schema_name(schema: str) -> str:
    """Refuse a PostgreSQL schema name that would need quoting tricks (it is spliced into DDL); returns it.

    Raises:
        BadInput: naming ``schema`` (lower-case letters, digits and ``_``, at most 63, not starting with a digit).
    """
    if not isinstance(schema, str) or not SCHEMA_RE.match(schema):
        raise BadInput("schema", f"{schema!r} is not a plain PostgreSQL schema name",
                       "use lower-case letters, digits and '_' (at most 63, not starting with a digit)")
    return schema


# ------------------------------------------------------------------------------------- the embedded home's files


def use_wal(conn: sqlite3.Connection, what: str = "database") -> None:
    """Put ``conn``'s database in WAL mode (a persistent property of the file), retrying while it is locked.

    Why: ``PRAGMA journal_mode=WAL`` on a new file fails at once with "database is locked" when another connection
    is opening the same file: SQLite does not apply the busy timeout to it. Several threads or processes opening a
    fresh store together lost one of them (found as a hung concurrency test whose dead thread never reached its
    barrier). Only a file not yet in WAL mode is switched; afterwards the mode is just read.

    Raises:
        sqlite3.OperationalError: the file stayed locked (200 tries), or any other error of the statement.
    """
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


def compact_sqlite(path: str | os.PathLike[str]) -> bool:
    """Rewrite an SQLite file so deleted rows' bytes leave the disk: VACUUM, then truncate the WAL.

    ``secure_delete`` (set on every projection connection) already zeroes freed cells; VACUUM rebuilds the file
    without free pages, and ``wal_checkpoint(TRUNCATE)`` empties the ``-wal`` file, whose frames still hold the
    page images written before the purge. Returns False if another connection kept the WAL from being truncated
    (a reader in the middle of a transaction); erasure then reports the file as not compacted.
    """
    conn = sqlite3.connect(os.fspath(path), isolation_level=None, timeout=60)
    try:
        conn.execute("PRAGMA secure_delete=ON")
        conn.execute("VACUUM")
        busy, _log, _ckpt = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return busy == 0
    finally:
        conn.close()


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
