"""Errors raised at memledger's boundaries.

Every refusal names the field that was wrong, what was wrong and what to do instead, in the spirit of
eventsourcing's own messages ("set environment variable X"). The CLI maps :class:`BadInput` to exit code 2
and every other :class:`MemledgerError` to exit code 1; neither prints a traceback.
"""

from __future__ import annotations


class MemledgerError(Exception):
    """Base class of every error memledger raises on purpose."""

    exit_code = 1


class BadInput(MemledgerError, ValueError):
    """The caller's input was refused at the boundary; nothing was written.

    Attributes:
        field: the name of the offending field as the caller wrote it (``valid_from``, ``user_id``, ``line 3``...).
        problem: what was wrong.
        fix: what to do instead (may be empty).
    """

    exit_code = 2

    def __init__(self, field: str, problem: str, fix: str = "") -> None:
        self.field = field
        self.problem = problem
        self.fix = fix
        msg = f"{field}: {problem}"
        if fix:
            msg += f" ({fix})"
        super().__init__(msg)


class ConflictError(MemledgerError):
    """A command lost an optimistic-concurrency race more times than it was allowed to retry.

    Raised after the retries of :meth:`ledger.application.LedgerApplication.execute` are spent; the store holds
    the winner's events and nothing of the loser's.
    """


class IdempotencyMismatch(BadInput):
    """An idempotency key was reused with a different command (the first command's receipt still stands)."""


class NotCaughtUp(MemledgerError):
    """A read waited for a projection to reach a log position and the timeout ran out."""


class SubjectErasedError(MemledgerError):
    """The user was erased (crypto-shredded); nothing more can be recorded or read for them."""


class StoreDamaged(MemledgerError):
    """A file (or table) of the store cannot be used as it is: damaged, in the way, or behind its projections.
    Nothing was written; exit 1. Like :class:`BadInput` it names the ``field`` (the file), the ``problem`` and the
    ``fix`` (the CLI's ``--json`` error line carries all three)."""

    def __init__(self, field: str, problem: str, fix: str) -> None:
        self.field, self.problem, self.fix = field, problem, fix
        super().__init__(f"{field}: {problem}; {fix}")


def is_store_damage(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite reporting a damaged database file (not a database, malformed image), directly or
    wrapped by eventsourcing for the log: ``DatabaseError`` but not ``OperationalError`` (locked, busy, disk full,
    cannot open), of either library."""
    import sqlite3

    from eventsourcing.persistence import DatabaseError as LogDatabaseError
    from eventsourcing.persistence import OperationalError as LogOperationalError

    return isinstance(exc, (sqlite3.DatabaseError, LogDatabaseError)) and not isinstance(
        exc, (sqlite3.OperationalError, LogOperationalError))
