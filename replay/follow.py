"""The projection worker: ``memledger project --follow`` keeps a store's projections up to date in its own process.

Production agents run many writer processes against one PostgreSQL store; they open the ledger with
``projection_mode="worker"`` so a write returns as soon as the log has committed, and one worker process follows
the log and applies it to the projections. A writer that must read its own write passes its receipt
(``profile(user, after=receipt)``); the read waits until the projections' tracking rows reach the receipt's
position (``MemoryLedger.wait_for``). docs/postgres.md measures what that costs.

How the worker learns of new events:

* **PostgreSQL** — LISTEN/NOTIFY. eventsourcing's ``PostgresApplicationRecorder`` sends ``NOTIFY <channel>`` inside
  every insert transaction (delivered on commit; the channel is the events table's name, ``recorder.channel_name``)
  — the same signal its own ``PostgresSubscription`` listens to. The worker LISTENs on a dedicated connection and
  wakes on each notification. It LISTENs *before* its first catch-up, so a commit landing between a catch-up and
  the next wait is queued on the connection, never missed. NOTIFY is per database, not per schema, so writes to
  other schemas of the database cause harmless spurious wake-ups; ``interval`` bounds the wait regardless.
* **SQLite** — no notifications: the worker polls the log's head every ``interval`` seconds (a single indexed
  ``MAX`` query; eventsourcing's SQLite recorder cannot feed a subscription).

Either way the work itself is :func:`replay.catchup.catch_up`, the loop inline mode uses: one exclusive transaction
per batch, rows and tracking positions committed together, so a worker killed mid-batch loses nothing and two
workers (or a worker and an inline reader) never apply an event twice. We do not use eventsourcing's
``ProjectionRunner``: it tracks positions in its own tracking table, whereas our projections must move their rows
and ``projection_tracking`` in one transaction shared with the inline path and blue/green rebuilds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

#: Default wait between checks when nothing wakes the worker (seconds).
POLL_SQLITE = 0.02
POLL_POSTGRES = 1.0


def follow(ml: Any, stop: threading.Event, *, interval: float | None = None,
           on_batch: Callable[[int, int], None] | None = None) -> int:
    """Catch ``ml``'s projections up to the head of the log, then keep following it until ``stop`` is set.

    Args:
        ml: an open :class:`ledger.MemoryLedger` (any projection mode; the worker itself always projects).
        stop: set it (e.g. from a signal handler) to return after the current batch.
        interval: the longest wait between checks of the log, seconds (default 0.02 on SQLite, 1.0 on PostgreSQL
            where NOTIFY wakes the worker at once).
        on_batch: called as ``on_batch(events_applied, position)`` after each committed batch.

    Returns:
        The position the projections had reached when ``stop`` was set.

    Raises:
        whatever the store raises (a lost database connection ends the worker; run it under a supervisor).
    """
    dsn = ml.settings.dsn
    if dsn is None:
        wait_s = POLL_SQLITE if interval is None else interval
        reached = ml.catch_up(on_batch=on_batch)
        while not stop.wait(wait_s):
            reached = ml.catch_up(on_batch=on_batch)
        return reached

    import psycopg
    from psycopg import sql

    wait_s = POLL_POSTGRES if interval is None else interval
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(ml.app.recorder.channel_name)))
        reached = ml.catch_up(on_batch=on_batch)
        while not stop.is_set():
            # Wake on the first notification or after wait_s; further queued ones only cause a cheap no-op check.
            for _ in conn.notifies(timeout=wait_s, stop_after=1):
                pass
            if stop.is_set():
                break
            reached = ml.catch_up(on_batch=on_batch)
    return reached
