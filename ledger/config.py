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
        import sqlite3


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
