"""Where a ledger lives: ``--home`` / ``$MEMLEDGER_HOME`` (embedded SQLite) or ``--dsn`` / ``$MEMLEDGER_DSN``.

Embedded layout of a home directory::

    events.db         the log (eventsourcing.sqlite: stored_events with the notification log)
    projections.db    every projection's tables and projection_tracking

With a DSN, the log uses ``eventsourcing.postgres`` and the projections a schema of the same database. Which of the
two a store is, is decided once, by :attr:`Settings.backend` (ledger/backend.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from .backend import PostgresBackend, SQLiteBackend
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

    @cached_property
    def backend(self) -> SQLiteBackend | PostgresBackend:
        """The store's backend, chosen here and only here (ledger/backend.py): :class:`SQLiteBackend` for a home,
        :class:`PostgresBackend` for a DSN. Chosen once per settings object.

        Raises:
            BadInput: ``schema`` is not a plain PostgreSQL schema name (a DSN's store).
        """
        if self.dsn is not None:
            return PostgresBackend(self.dsn, self.schema)
        return SQLiteBackend(self.home, self.schema)  # type: ignore[arg-type]  # resolve() sets one of the two

    def prepare_event_store(self) -> None:
        """Make the log's database ready for eventsourcing to open (the backend's ``prepare_event_store``)."""
        self.backend.prepare_event_store()

    def event_store_env(self) -> dict[str, str]:
        """The eventsourcing ``Application`` environment for this store (the backend's ``event_store_env``)."""
        return self.backend.event_store_env()
