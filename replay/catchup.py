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

Large spans (at least :data:`BULK_MIN` events behind, e.g. one ``record()`` of a big batch, or a ``project --follow``
worker that fell behind) go through the bulk writers of replay/bulk.py instead, on copies that already hold rows:
the in-memory appliers keep every write to a row written earlier as the UPDATE it is, so the rows are those of the
per-event path (tests/test_bulk_replay.py), and a flush that finds a copy moved by another process gives up and
leaves the rest to the per-event loop.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

from projections.base import LogEvent, Projection, position_of, positions_of, set_position
from projections.db import ProjectionDB

from .bulk import bulk_catch_up, from_memory
from .events import (APPLY, BATCH, PURGE, SKIP, apply_one, decode, erasure_action, reads_of,  # noqa: F401
                     erasure_actions, max_position, tracked_clock)

#: a catch-up with at least this many events to apply (head minus the lowest copy's position) goes through the bulk
#: writers (replay/bulk.py); smaller spans are applied event by event. Chosen with scripts/bench_append.py --bulk-min 1
#: (``record()`` of batches of N, bulk vs per-event in the same runs, medians of 3, load ~3): at N = 10 SQLite is
#: even (2,977 vs 3,049 events/s), PostgreSQL +14%; at 20 SQLite +3%, PostgreSQL +42%; at 50 +4% and +63%.
BULK_MIN = 20
#: events per flush transaction when a copy that already holds rows is caught up in bulk: bounds the write lock
#: held per flush (and the work lost when another process moves the copy meanwhile)
BULK_CHUNK = 10_000


def catch_up(
    app: Any,
    db: ProjectionDB,
    projections: Sequence[Projection],
    *,
    until: int | None = None,
    batch: int = BATCH,
    on_batch: Callable[[int, int], None] | None = None,
    bulk: bool = True,
    bulk_min: int | None = None,
    recent: Sequence[tuple[int, Any]] | None = None,
) -> int:
    """Apply every notification after each projection's position, up to ``until`` (default: the log's head).

    Returns the lowest position the projections have reached. ``on_batch(events_applied, position)`` is called after
    each committed batch (progress bars). ``bulk``: a copy at position 0 whose projection offers ``bulk()`` (a fresh
    store's first catch-up) is first brought up by the bulk path (replay/bulk.py); checked once per copy and
    database in this process, so later catch-ups pay nothing for it; and a span of at least ``bulk_min`` events
    (default :data:`BULK_MIN`, read at call time) on copies that already hold rows goes through the same bulk
    writers, in flushes of :data:`BULK_CHUNK` events. ``verify`` passes ``bulk=False``: its scratch replay is the
    per-event path, an independent check of copies built in bulk. Either way the per-event loop then runs to
    ``until`` (it finds nothing left when the bulk pass got there), so the call returns only once every event up to
    ``until`` is applied. ``recent``: ``(position, domain event)`` pairs this process has just saved (a command's
    own events, ``Store.write``), in log order: the spans they cover are projected from memory instead of read
    back from the log and decoded (replay/bulk.py :func:`~replay.bulk.from_memory`; any gap reads the log).
    """
    if not projections:
        return 0
    head = max_position(app) if until is None else until
    if bulk:
        fresh = _fresh(db, projections)
        if fresh and head > 0:
            # a fresh store's first command: its own events are in ``recent`` too (it read them back before)
            bulk_catch_up(app, db, fresh, until=head, on_batch=on_batch, recent=recent)
        min_span = BULK_MIN if bulk_min is None else bulk_min
        if head - _reached(db, projections) >= min_span:
            reached = bulk_catch_up(app, db, projections, until=head, chunk=BULK_CHUNK, on_batch=on_batch,
                                    min_span=min_span, recent=recent)
            _note_reached(db, projections, reached)
    warmers = [p for p in projections if hasattr(p, "warm")]
    while True:
        if warmers:
            warm(app, db, warmers, head, batch)
        with db.transaction() as cur:
            low, events = apply_batch(cur, app, projections, head, batch, recent)
            if not events:
                _note_reached(db, projections, low)
                return low
        if on_batch is not None:
            on_batch(len(events), events[-1].position)
        if events[-1].position >= head:  # every copy applied up to the batch's last event: no second transaction
            _note_reached(db, projections, events[-1].position)
            return events[-1].position


_CHECKED: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
#: per database, the position each copy was last seen to have reached in this process (a lower bound: positions only
#: move forward, save a copy dropped and recreated, for which it only costs the choice of the faster path)
_REACHED: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()


def _reached(db: Any, projections: Sequence[Projection]) -> int:
    """A lower bound, known without a query, of the lowest position of ``projections`` (0 for a copy not seen yet):
    so a catch-up decides per-event vs bulk without a read of its own (the bulk pass reads the real positions)."""
    seen = _REACHED.get(db, {})
    return min(seen.get(p.tracking_name, 0) for p in projections)


def _note_reached(db: Any, projections: Sequence[Projection], position: int) -> None:
    seen = _REACHED.setdefault(db, {})
    for p in projections:
        seen[p.tracking_name] = max(seen.get(p.tracking_name, 0), position)


def _fresh(db: Any, projections: Sequence[Projection]) -> list[Projection]:
    """The non-deferred copies still at position 0 if one of them has a ``bulk()`` applier (else none); each copy is
    looked at once per (db, copy) per process."""
    seen = _CHECKED.setdefault(db, set())
    todo = [p for p in projections if p.tracking_name not in seen and not p.deferred]
    if not any(type(p).bulk is not Projection.bulk for p in todo):
        return []
    with db.read() as cur:
        fresh = [p for p in todo if position_of(cur, p.tracking_name)[0] == 0]
    seen.update(p.tracking_name for p in todo)
    return fresh if any(type(p).bulk is not Projection.bulk for p in fresh) else []


def warm(app: Any, db: ProjectionDB, projections: Sequence[Any], head: int, batch: int = BATCH) -> None:
    """Let expensive projections do their slow, side-effect-free work for the next batch (embedding texts into a
    cache) *outside* the exclusive transaction, so the write lock is never held while a model loads or runs.
    A race that moves the positions meanwhile only wastes the warm-up; ``apply_batch`` decides what is applied."""
    with db.read() as cur:
        positions = {p.tracking_name: position_of(cur, p.tracking_name)[0] for p in projections}
    low = min(positions.values())
    if low >= head:
        return
    notifications = app.recorder.select_notifications(start=low + 1, limit=batch, stop=head)
    if not notifications:
        return
    events, _ = decode(app, notifications, 0, reads_of([p for p in projections if positions[p.tracking_name] < head]))
    for p in projections:
        p.warm([le for le in events if le.position > positions[p.tracking_name]], db)


def apply_batch(cur: Any, app: Any, projections: Sequence[Projection], head: int,
                batch: int = BATCH, recent: Sequence[tuple[int, Any]] | None = None) -> tuple[int, list[LogEvent]]:
    """Inside the caller's exclusive transaction, apply the next batch (at most ``batch`` notifications, none past
    ``head``) to every projection behind, and advance their tracking rows. Returns (lowest position before the
    batch, the events of the batch — empty when every projection has reached ``head``).

    The body of :func:`catch_up`; blue/green rebuilds and ``verify`` call it to finish a copy inside the very
    transaction that switches or compares it (replay/rebuild.py, replay/verify.py). ``recent``: as for
    :func:`catch_up`.
    """
    positions = positions_of(cur, [p.tracking_name for p in projections])
    low = min(pos for pos, _ in positions.values())
    if low >= head:
        return low, []
    # System time is made monotonic per projection copy, from where that copy left off.
    start_recorded = min(r for pos, r in positions.values() if pos == low)
    served = from_memory(recent, low + 1, head, batch, start_recorded)
    if served is not None:
        events = served[0]
    else:
        notifications = app.recorder.select_notifications(start=low + 1, limit=batch, stop=head)
        if not notifications:
            return low, []
        behind = [p for p in projections if positions[p.tracking_name][0] < head]
        events, _ = decode(app, notifications, start_recorded, reads_of(behind))
    actions = erasure_actions(cur, events)
    for p in projections:
        pos, recorded = positions[p.tracking_name]
        mine = [le for le in events if le.position > pos and actions[le.position] is APPLY]
        p.prepare(cur, mine)
        applied = False
        for le in events:
            if le.position > pos:
                apply_one(cur, p, le, actions[le.position])
                applied = True
                recorded = tracked_clock(recorded, le)
        p.finish(cur, mine)
        if applied:
            set_position(cur, p.tracking_name, events[-1].position, recorded)
    return low, events
