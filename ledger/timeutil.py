"""Instants: parsing at the boundary, UTC storage, microsecond integers for indexes.

Rules (see docs/time-travel.md):
- every instant is timezone-aware; a naive datetime or an ISO string without an offset is refused with
  :class:`~ledger.errors.BadInput` naming the field — never guessed as local time;
- any offset is accepted and converted to UTC, so the same instant written in different offsets gives identical
  answers;
- projections store instants as integer microseconds since the Unix epoch (UTC), which index and compare exactly
  on SQLite and PostgreSQL alike; an open upper bound is stored as :data:`OPEN` (the largest BIGINT).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from .errors import BadInput

UTC = timezone.utc
OPEN = 2**63 - 1  # "until further notice": the open end of a half-open range, as a BIGINT
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: The instants accepted at the boundary, in UTC. A day of margin inside ``datetime``'s own range (years 1-9999):
#: an instant is shown in any zone (offsets up to ±24 h) and queried at ±1 µs, which must not overflow. A
#: ``--as-of 9999-12-31T23:59:59-05:00`` would otherwise fail with OverflowError (exit 1, no field named).
MIN_INSTANT = datetime(1, 1, 2, tzinfo=UTC)
MAX_INSTANT = datetime(9999, 12, 30, tzinfo=UTC)


def parse_instant(value: str | datetime, field: str) -> datetime:
    """Parse an ISO 8601 instant with an offset (or an aware datetime) into an aware UTC datetime.

    Raises:
        BadInput: naming ``field`` if the value is naive, empty, not ISO 8601, or outside
            [:data:`MIN_INSTANT`, :data:`MAX_INSTANT`] (0001-01-02 to 9999-12-30 UTC).
    """
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        text = value.strip()
        if not text:
            raise BadInput(field, "is empty", "give an ISO 8601 instant with an offset, e.g. 2024-05-01T09:00:00+08:00")
        try:
            dt = datetime.fromisoformat(text.replace("z", "Z"))
        except ValueError:
            raise BadInput(
                field, f"{value!r} is not an ISO 8601 instant", "write it like 2024-05-01T09:00:00Z or ...+08:00"
            ) from None
    else:
        raise BadInput(field, f"expected an ISO 8601 string or datetime, got {type(value).__name__}")
    if dt.tzinfo is None or dt.tzinfo.utcoffset(dt) is None:
        raise BadInput(
            field,
            f"{value!s} has no UTC offset (naive times are refused, never guessed)",
            "add an offset such as Z or +08:00",
        )
    try:
        utc = dt.astimezone(UTC)
    except OverflowError:  # e.g. 9999-12-31T23:59:59-05:00 is in year 10000 in UTC
        utc = None
    if utc is None or not MIN_INSTANT <= utc <= MAX_INSTANT:
        raise BadInput(field, f"{value!s} is outside the supported range",
                       "give an instant from 0001-01-02 to 9999-12-30 (UTC)")
    return utc


#: How far in the future an ``observed_at`` may lie (clock skew between the agent's machine and the store's).
MAX_CLOCK_SKEW = timedelta(minutes=5)


def check_observed(observed_at: datetime | None, field: str = "observed_at") -> datetime | None:
    """Refuse an ``observed_at`` later than now + :data:`MAX_CLOCK_SKEW`: it is when the source *said* it, which
    cannot be in the future. A typo (2032 for 2023) would lock a fact: every later statement
    would count as a backfill behind it, and the profile would keep the typo. To say a fact becomes true later, use
    ``valid_from``. Returns ``observed_at``. Raises BadInput naming ``field``."""
    if observed_at is not None and observed_at > now_utc() + MAX_CLOCK_SKEW:
        raise BadInput(field, f"{observed_at.isoformat()} is in the future",
                       "observed_at is when the source said it: give a past instant (for a fact that becomes true "
                       "later, set valid_from)")
    return observed_at


def to_micros(dt: datetime | None, open_value: int | None = None) -> int | None:
    """Aware datetime -> integer microseconds since the epoch (UTC); ``None`` -> ``open_value``."""
    if dt is None:
        return open_value
    delta = dt - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(us: int | None) -> datetime | None:
    """Integer microseconds since the epoch -> aware UTC datetime; ``None`` or :data:`OPEN` -> ``None``."""
    if us is None or us >= OPEN:
        return None
    return _EPOCH + timedelta(microseconds=us)


def now_utc() -> datetime:
    """The current instant, aware, in UTC."""
    return datetime.now(UTC)
