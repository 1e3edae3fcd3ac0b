"""Reading the log for the projections: decoding notifications into :class:`LogEvent` with monotonic system time,
and what a projection does with each event under erasure (apply it, skip it, or purge its user).

Shared by the per-event catch-up (replay/catchup.py) and the bulk writers (replay/bulk.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventsourcing.utils import resolve_topic

from ledger.crypto import is_erased
from ledger.moves import UserArrived
from ledger.privacy import SubjectErased
from ledger.timeutil import to_micros
from projections.base import LogEvent, Projection, erased_subjects, note_erased

#: notifications read and applied per transaction by the catch-up loop
BATCH = 1000


@dataclass(frozen=True)
class Unread:
    """An event that no projection being caught up applies, read only for what the catch-up itself needs: its
    system time (the monotonic clock runs along every event) and its user (the erasure register's skip rule).
    Never decrypted, never upcast; no projection's ``apply`` acts on it (none of them reads its class)."""

    topic: str
    timestamp: datetime
    user_id: str | None


def reads_of(projections: Sequence[Projection]) -> tuple[type, ...] | None:
    """The event classes some of ``projections`` apply (:attr:`Projection.reads`), plus the two every catch-up
    acts on itself (``SubjectErased``: purge; ``UserArrived``: the clock); None when one of them reads everything."""
    classes: list[type] = []
    for p in projections:
        if p.reads is None:
            return None
        classes.extend(p.reads)
    return (*classes, SubjectErased, UserArrived)


_TOPIC_CLASSES: dict[str, Any] = {}


def _is_read(topic: str, reads: tuple[type, ...]) -> bool:
    cls = _TOPIC_CLASSES.get(topic)
    if cls is None:
        try:
            cls = _TOPIC_CLASSES[topic] = resolve_topic(topic)
        except Exception:  # noqa: BLE001 - an unknown topic is decoded in full, where the mapper reports it
            return True
    return isinstance(cls, type) and issubclass(cls, reads)


def _unread(mapper: Any, n: Any) -> Unread:
    state = n.state  # the library's order (eventsourcing 9.5 Mapper.to_domain_event): cipher, compressor, transcoder
    if mapper.cipher:
        state = mapper.cipher.decrypt(state)
    if mapper.compressor:
        state = mapper.compressor.decompress(state)
    fields = mapper.transcoder.decode(state)
    return Unread(n.topic, fields["timestamp"], fields.get("user_id"))


def decode(app: Any, notifications: Sequence[Any], last_recorded_at: int,
           reads: tuple[type, ...] | None = None) -> tuple[list[LogEvent], int]:
    """Decode notifications into :class:`LogEvent`; system time is made monotonic along the log.

    ``reads`` (from :func:`reads_of`): decode in full only events of those classes; any other becomes an
    :class:`Unread` (its state's JSON parsed for the timestamp and user, no decryption: ~5 instead of ~25 us an
    event). A search after an agent logged a turn's messages caught up the vectors projection by decrypting every
    message, which it never reads (the ingest + first search profile in docs/performance.md)."""
    out = []
    recorded = last_recorded_at
    mapper = app.mapper
    # the encrypting mapper reads the batch's per-fact keys in one key-store query (ledger/crypto.py)
    many = getattr(mapper, "to_domain_events", None)
    wanted = None if reads is None else [_is_read(n.topic, reads) for n in notifications]
    full = notifications if wanted is None else [n for n, w in zip(notifications, wanted) if w]
    events = many(full) if many is not None else [mapper.to_domain_event(n) for n in full]
    if wanted is None or len(full) == len(notifications):
        decoded = events
    else:
        it = iter(events)
        decoded = [next(it) if w else _unread(mapper, n) for n, w in zip(notifications, wanted)]
    for n, event in zip(notifications, decoded):
        stamp, recorded = system_time(event, recorded)
        out.append(LogEvent(position=n.id, event=event, recorded_at=stamp, clock=recorded))
    return out, recorded


def system_time(event: Any, recorded: int) -> tuple[int, int]:
    """(the system time of ``event`` in microseconds, the running maximum after it), given the running maximum
    ``recorded`` before it: :func:`clock` on the event's timestamp (and a ``UserArrived``'s ``since``)."""
    since = to_micros(event.since) if isinstance(event, UserArrived) else None
    return clock(to_micros(event.timestamp), recorded, since)


def tracked_clock(before: int, le: LogEvent) -> int:
    """The running system time a tracking row stores after applying ``le``, given the one it stored ``before``:
    ``le.clock`` when decoding set it (a ``UserArrived`` marker may lower it), else the max of the stamps."""
    return le.clock if le.clock is not None else max(before, le.recorded_at)


def clock(ts: int, recorded: int, since: int | None = None) -> tuple[int, int]:
    """The monotonic system time rule, on microseconds: an event stamped ``ts`` gets ``max(ts, recorded)`` (a
    writer with a clock behind the log's is raised to it), and the running maximum becomes that.

    A ``UserArrived`` marker (ledger/moves.py; ``since`` given) restarts the maximum at ``since``, so the copied
    events of a user moved here from another shard keep the system times that shard gave them."""
    stamp = max(ts, recorded)
    return stamp, (min(stamp, since) if since is not None else stamp)


def max_position(app: Any) -> int:
    """The log's last notification id (0 for an empty log)."""
    return app.recorder.max_notification_id() or 0


def apply_one(cur: Any, projection: Projection, le: LogEvent, action: str | None = None) -> None:
    """Apply one event to one projection, honouring erasure (docs/erasure.md).

    * An event whose user was erased decodes with its personal fields ``None`` (ledger/crypto.py): it is skipped,
      so a rebuild after erasure never brings the user's rows back.
    * ``SubjectErased`` purges the user from the projection (``Projection.purge_user``), so events of the user
      that carry no encrypted field (and so are not marked erased) are removed again at the tombstone's position.
    * An event of a user in the ``erased_subjects`` register is skipped (``action`` from :func:`erasure_actions`):
      a writer still holding the user's key in its cache may append after the tombstone, and must not be projected.
    """
    if action is None:
        action = erasure_action(le.event)
    if action is PURGE:
        projection.purge_user(cur, le.event.user_id)
    elif action is APPLY:
        projection.apply(cur, le)


APPLY, PURGE, SKIP = "apply", "purge", "skip"


def erasure_action(event: Any, erased: set[str] | None = None) -> str:
    """What a projection does with ``event`` (see :func:`apply_one`; replay/bulk.py decides it once per event for
    every bulk applier): PURGE its user (a ``SubjectErased``), SKIP it (its user is in ``erased``, or it decoded as
    erased), or APPLY it."""
    if isinstance(event, SubjectErased):
        return PURGE
    if erased and getattr(event, "user_id", None) in erased:
        return SKIP
    return SKIP if is_erased(event) else APPLY


def erasure_actions(cur: Any, events: Sequence[LogEvent], erased: set[str] | None = None) -> dict[int, str]:
    """``{position: action}`` for a batch, in log order, inside the caller's transaction: reads the
    ``erased_subjects`` register (unless ``erased`` is given, which is then updated in place), adds each
    tombstone of the batch to it (and to the table), and skips every later event of an erased user."""
    if erased is None:
        erased = erased_subjects(cur)
    out = {}
    for le in events:
        action = out[le.position] = erasure_action(le.event, erased)
        if action is PURGE:
            erased.add(le.event.user_id)
            note_erased(cur, le.event.user_id, le.position)
    return out
