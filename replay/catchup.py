"""The catch-up loop: read the notification log after each projection's tracked position and apply it.

In the embedded default (SQLite) eventsourcing's ``ProjectionRunner`` cannot follow the log (its SQLite recorder has
no subscription), so the ledger calls :func:`catch_up` in process right after every save and before every read:
a command returns only once its events are projected, and a read never answers from a projection behind the log
(read-your-writes in microseconds, where polling ``wait()`` would cost 100 ms). The same loop serves full rebuilds
(from position 0) and the ``project --follow`` worker.

Atomicity: one batch of notifications is applied to every projection, and each projection's tracking row is
advanced, inside one exclusive transaction of the projections database. Two processes catching up at once
serialise on that transaction and re-read the tracking positions inside it, so no event is applied twice; a crash
mid-batch rolls the batch back and the next catch-up repeats it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from projections.base import LogEvent, Projection, position_of, set_position
from projections.db import ProjectionDB

from ledger.timeutil import to_micros

BATCH = 1000


def decode(app: Any, notifications: Sequence[Any], last_recorded_at: int) -> tuple[list[LogEvent], int]:
    """Decode notifications into :class:`LogEvent`; system time is made monotonic along the log."""
    out = []
    recorded = last_recorded_at
    to_domain_event = app.mapper.to_domain_event
    for n in notifications:
        event = to_domain_event(n)
        ts = to_micros(event.timestamp)
        if ts > recorded:
            recorded = ts
        out.append(LogEvent(position=n.id, event=event, recorded_at=recorded))
    return out, recorded


def max_position(app: Any) -> int:
    """The log's last notification id (0 for an empty log)."""
    return app.recorder.max_notification_id() or 0


def catch_up(
    app: Any,
    db: ProjectionDB,
    projections: Sequence[Projection],
    *,
    until: int | None = None,
    batch: int = BATCH,
    on_batch: Callable[[int, int], None] | None = None,
) -> int:
    """Apply every notification after each projection's position, up to ``until`` (default: the log's head).

    Returns the lowest position the projections have reached. ``on_batch(events_applied, position)`` is called after
    each committed batch (progress bars).
    """
    if not projections:
        return 0
    head = max_position(app) if until is None else until
    while True:
        with db.transaction() as cur:
            positions = {p.tracking_name: position_of(cur, p.tracking_name) for p in projections}
            low = min(pos for pos, _ in positions.values())
            if low >= head:
                return low
            notifications = app.recorder.select_notifications(
                start=low + 1, limit=batch, stop=head
            )
            if not notifications:
                return low
            # System time is made monotonic per projection copy, from where that copy left off.
            start_recorded = min(r for pos, r in positions.values() if pos == low)
            events, _ = decode(app, notifications, start_recorded)
            for p in projections:
                pos, recorded = positions[p.tracking_name]
                applied = False
                for le in events:
                    if le.position > pos:
                        p.apply(cur, le)
                        applied = True
                        recorded = max(recorded, le.recorded_at)
                if applied:
                    set_position(cur, p.tracking_name, events[-1].position, recorded)
        if on_batch is not None:
            on_batch(len(events), events[-1].position)
