"""Bulk replay: decode the log in large pages, apply it in memory, write the rows at once.

Used when a copy is built from scratch: ``rebuild`` (blue/green and in place, replay/rebuild.py) and a fresh
store's first catch-up (replay/catchup.py); and by any catch-up with a large span to apply (``catchup.BULK_MIN``
events: ``record()`` of a big batch, a ``project --follow`` worker behind) on copies that already hold rows — the
appliers treat those rows as rows of an earlier flush (below). The per-event path costs several SQL statements per event (history:
an INSERT, UPDATEs of earlier versions, the bitemporal insert-and-close); here each projection that offers
:meth:`projections.base.Projection.bulk` applies events to rows held in memory (its own rules, the very function its
per-event ``apply`` runs), and every ``chunk`` events one exclusive transaction writes them (COPY / executemany) and
moves the copy's tracking row to the last position applied. So rows and position still move together, a crash
loses at most the chunk being built, and the next run resumes from the tracking row.

Concurrency: the events are applied outside any transaction; the flush re-reads each copy's tracking row inside its
transaction and, if another process moved it meanwhile, gives up (rolls back, returns) so the ordinary catch-up loop
finishes from wherever the copy is. It gives up too when the ``erased_subjects`` register gained a user this pass
did not erase itself (another copy applied a tombstone meanwhile): the per-event path would have skipped that
user's events, which the pass may have applied in memory. Projections without ``bulk`` ride along event by event in the same flush
transactions (one decode of the log for all), with the deferred ``vectors`` projection's own batching: embedding
warmed into its cache outside the transaction, ``prepare`` per batch of ``catchup.BATCH`` events inside it. (The
first catch-up of a fresh store leaves ``vectors`` out, as every write's catch-up does: no model loads on a write.)
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from projections.base import LogEvent, Projection, erased_subjects, note_erased, position_of, set_position

from .events import (APPLY, BATCH, PURGE, SKIP, apply_one, decode, erasure_action, max_position, reads_of,
                     system_time, tracked_clock)

#: events applied in memory between two flushes (one transaction each) when the caller does not say. Memory held:
#: their rows, about 1.5 KB per fact event for profile + history (tracemalloc: 1.0 KB of lists and tuples, plus the
#: strings they keep); a flush of 50,000 events holds the projections' write lock ~1-2 s on a loaded 2-core machine.
CHUNK = 50_000
#: notifications per ``select_notifications`` call
PAGE = 5_000
#: SQLite page cache (KiB) while a flush writes (see :func:`_page_cache`)
FLUSH_CACHE_KIB = 256 * 1024


def from_memory(recent: Sequence[tuple[int, Any]] | None, start: int, stop: int, limit: int,
                recorded: int) -> tuple[list[LogEvent], int] | None:
    """The events at positions ``start`` .. ``min(stop, start + limit - 1)`` as :func:`replay.events.decode` would
    give them, taken from ``recent`` — ``(position, domain event)`` pairs this process just saved, in log order —
    or None when ``recent`` does not hold every one of those positions (then the caller reads the log).

    Why: a command's catch-up used to read back and decode (decrypt, transcode) the very events it had just saved;
    the objects are the ones the log holds (a saved event is immutable), so decoding them again only costs time.
    Only a gap-free run starting exactly at ``start`` is served, so another writer's event in between is never
    skipped. ``recorded`` is the system time reached before ``start``; it is made monotonic as ``decode`` does.
    """
    if not recent:
        return None
    first = recent[0][0]
    end = min(stop, start + limit - 1)
    if start < first or end > recent[-1][0] or end < start:
        return None
    i = start - first
    span = recent[i:i + end - start + 1]
    if len(span) != end - start + 1 or span[0][0] != start or span[-1][0] != end:
        return None  # a gap in the positions (another writer's event, or a skipped id): read the log
    out = []
    for position, event in span:
        stamp, recorded = system_time(event, recorded)
        out.append(LogEvent(position=position, event=event, recorded_at=stamp, clock=recorded))
    return out, recorded


class _Moved(Exception):
    """Another process moved a copy's tracking row while this one was applying in memory."""


def bulk_catch_up(app: Any, db: Any, projections: Sequence[Projection], *, until: int | None = None,
                  chunk: int = CHUNK, on_batch: Callable[[int, int], None] | None = None,
                  cur: Any = None, min_span: int = 0, recent: Sequence[tuple[int, Any]] | None = None) -> int:
    """Bring ``projections`` up to ``until`` (default: the log's head) in one pass over the log, chunk by chunk.

    Args:
        app: the eventsourcing application (its recorder and mapper: upcasting and decryption apply).
        db: the :class:`projections.db.ProjectionDB`.
        projections: the copies to bring up. Those with ``bulk()`` are applied in memory; the others are applied
            event by event inside each flush transaction (so the log is decoded once for all) in batches of
            ``catchup.BATCH`` events, each ``prepare``-d first; one with ``warm`` (``vectors``: embedding) is warmed
            in such batches just before the flush transaction, outside it (not when ``cur`` is given).
        until: the last position to apply (inclusive).
        chunk: events per flush transaction (>= 1). Memory: one chunk's rows of the bulk projections (about 1.5
            KB per fact event for profile + history), plus the chunk's decoded events when a per-event projection is
            among ``projections``, plus one page of notifications.
        on_batch: ``on_batch(events, position)`` after each committed flush (progress, heartbeats).
        cur: run every read and flush in the caller's (exclusive) transaction instead of one transaction per
            chunk (the in-place rebuild replays in one transaction).
        min_span: do nothing (return the lowest position) when fewer than this many events separate the lowest
            copy from ``until``, as read at the start (catch_up's threshold for the bulk path).
        recent: ``(position, event)`` pairs this process just saved, in log order: pages they cover are taken from
            memory instead of the log (:func:`from_memory`).

    Returns:
        the lowest position the copies reached; 0 and nothing done when none offers ``bulk()``.
        Lower than ``until`` when another process moved one of the copies meanwhile (the flush then rolls back):
        the caller's ordinary catch-up finishes from there.
    """
    copies = list(projections)
    bulk = {p.tracking_name: p.bulk() for p in copies}
    if not any(a is not None for a in bulk.values()):
        return 0
    head = max_position(app) if until is None else until
    with _txn(db, cur, read=True) as c:
        state = {p.tracking_name: position_of(c, p.tracking_name) for p in copies}
        erased = erased_subjects(c)  # the erasure register (projections/base.py): later events of these are skipped
    low = min(pos for pos, _ in state.values())
    if low >= head or head - low < min_span:
        return low
    # System time is made monotonic along the log from where the lowest copy left off (as apply_batch does).
    recorded = min(r for pos, r in state.values() if pos == low)
    appliers = [(state[p.tracking_name][0], bulk[p.tracking_name]) for p in copies
                if bulk[p.tracking_name] is not None]
    others = [p for p in copies if bulk[p.tracking_name] is None]
    # events that none of the copies still behind applies are read for their time only (replay/events.py)
    reads = reads_of([p for p in copies if state[p.tracking_name][0] < head])
    held: list[LogEvent] = []  # events since the last flush (kept only for the per-event projections)
    actions: dict[int, str] = {}  # erasure action of each held event
    tombstones: list[tuple[str, int]] = []  # (user_id, position) of the chunk's SubjectErased, for the register
    count = 0  # events since the last flush

    def flush(last: LogEvent) -> bool:
        if cur is None:  # slow, side-effect-free work (embedding into the cache) outside the exclusive transaction
            for p in others:
                if hasattr(p, "warm"):
                    mine = [le for le in held
                            if le.position > state[p.tracking_name][0] and actions[le.position] is APPLY]
                    for i in range(0, len(mine), BATCH):
                        p.warm(mine[i:i + BATCH], db)
        try:
            with _txn(db, cur) as c, _page_cache(c):
                for p in copies:
                    if position_of(c, p.tracking_name) != state[p.tracking_name]:
                        raise _Moved(p.tracking_name)
                if not erased_subjects(c) <= erased:  # a tombstone applied meanwhile by another copy
                    raise _Moved("erased_subjects")
                for user_id, position in tombstones:
                    note_erased(c, user_id, position)
                for p in copies:
                    pos, rec = state[p.tracking_name]
                    if last.position <= pos:
                        continue
                    a = bulk[p.tracking_name]
                    if a is not None:
                        a.flush(c)
                    else:
                        mine = [le for le in held if le.position > pos]
                        for i in range(0, len(mine), BATCH):  # as apply_batch: prepare what is applied
                            applied = [le for le in mine[i:i + BATCH] if actions[le.position] is APPLY]
                            p.prepare(c, applied)
                            for le in mine[i:i + BATCH]:
                                apply_one(c, p, le, actions[le.position])
                            p.finish(c, applied)
                    # the running clock after the last event (not a max of stamps: a UserArrived marker lowers it)
                    state[p.tracking_name] = (last.position, tracked_clock(rec, last))
                    set_position(c, p.tracking_name, *state[p.tracking_name])
        except _Moved:
            return False
        if on_batch is not None:
            on_batch(count, last.position)
        return True

    # The rows held are many small lists that live until the flush: the cyclic garbage collector scans them again
    # and again as they grow, finding nothing to free (bulk pass of 50k events: 7.3 s with it, 5.3 s without,
    # medians of 3, load average ~6). Off for the pass; the rows hold no reference cycles.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        reached = low
        while reached < head:
            served = from_memory(recent, reached + 1, head, PAGE, recorded)
            if served is not None:
                events, recorded = served
            else:
                notifications = app.recorder.select_notifications(start=reached + 1, limit=PAGE, stop=head)
                if not notifications:
                    break
                events, recorded = decode(app, notifications, recorded, reads)
            for le in events:
                position = le.position
                action = erasure_action(le.event, erased)  # apply_one's rules, decided once for every applier
                if action is PURGE:
                    erased.add(le.event.user_id)
                    tombstones.append((le.event.user_id, position))
                if action is not SKIP:
                    for start, a in appliers:
                        if position > start:
                            if action is APPLY:
                                a.apply(le)
                            else:
                                a.purge_user(le.event.user_id)
                if others:
                    held.append(le)
                    actions[position] = action
                count += 1
                if count >= chunk:
                    if not flush(le):
                        return _low(db, copies)
                    held, actions, tombstones, count = [], {}, [], 0
            reached = events[-1].position
        if count and not flush(events[-1]):
            return _low(db, copies)
        return min(pos for pos, _ in state.values())
    finally:
        if gc_was_enabled:
            gc.enable()


def _low(db: Any, copies: Sequence[Projection]) -> int:
    with db.read() as cur:
        return min(position_of(cur, p.tracking_name)[0] for p in copies)


@contextmanager
def _page_cache(cur: Any) -> Iterator[None]:
    """On SQLite, a page cache of :data:`FLUSH_CACHE_KIB` for the flush, then the connection's own size again.

    A flush dirties more pages than SQLite's default 2 MB cache holds; it then spills dirty pages to the WAL in the
    middle of the transaction and writes them again as the B-trees keep changing (measured: 200k events' history
    rows inserted in 10.2 s with the default cache, 6.8 s with 400 MB). The cache only grows as pages are touched.
    """
    with cur.sql_dialect.page_cache(cur, FLUSH_CACHE_KIB):
        yield


@contextmanager
def _txn(db: Any, cur: Any, read: bool = False) -> Iterator[Any]:
    """The caller's cursor if given, else a transaction of its own (a read snapshot when ``read``)."""
    if cur is not None:
        yield cur
    else:
        with (db.read() if read else db.transaction()) as c:
            yield c
