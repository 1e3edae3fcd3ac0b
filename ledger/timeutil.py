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


def parse_instant(value: str | datetime, field: str) -> datetime:
    """Parse an ISO 8601 instant with an offset (or an aware datetime) into an aware UTC datetime.

    Raises:
        BadInput: naming ``field`` if the value is naive, empty or not ISO 8601.
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
    return dt.astimezone(UTC)


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
