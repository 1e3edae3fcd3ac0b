"""Times shown to the user: an instant in the user's zone (:func:`to_local`, :func:`format_local`) and a coarse
duration (:func:`ago_text`). Shared by context assembly, session resume and the reads; imports nothing heavier than
:mod:`zoneinfo`, so a verb that only shows a time does not load the relative-date parser (memledger/relative_time.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ledger.errors import BadInput

__all__ = ["ago_text", "format_local", "require_aware", "to_local", "user_zone"]


def user_zone(tz: str | tzinfo | None, field: str = "tz") -> tzinfo:
    """Resolve the user's zone: an IANA name, a tzinfo, or ``None`` (UTC)."""
    if tz is None:
        return timezone.utc
    if isinstance(tz, tzinfo):
        return tz
    if not isinstance(tz, str):
        raise BadInput(field, f"expected an IANA time-zone name, got {type(tz).__name__}",
                       'give an IANA name such as "Asia/Shanghai" or "Europe/Paris"')
    name = tz.strip()
    try:
        if not name:
            raise ValueError("empty")
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise BadInput(field, f"unknown time zone {tz!r}",
                       'give an IANA name such as "Asia/Shanghai" or "Europe/Paris"') from None


def require_aware(value: object, field: str) -> datetime:
    if not isinstance(value, datetime):
        raise BadInput(field, f"expected a timezone-aware datetime, got {type(value).__name__}",
                       "pass a datetime with tzinfo, e.g. datetime(2024, 5, 1, 9, tzinfo=timezone.utc)")
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise BadInput(field, f"{value.isoformat()} is naive (no UTC offset; naive times are refused, never guessed)",
                       "pass a timezone-aware datetime, e.g. with tzinfo=timezone.utc")
    return value


def to_local(dt: datetime, tz: str | tzinfo | None = None) -> datetime:
    """The same instant expressed in the user's zone (aware). ``tz=None`` means UTC.

    Raises ``BadInput`` (a ``ValueError``) naming ``dt`` if it is naive, or ``tz`` if the name is unknown.
    """
    return require_aware(dt, "dt").astimezone(user_zone(tz))


def format_local(dt: datetime, tz: str | tzinfo | None = None) -> str:
    """Render a stored (UTC) instant for the user: ``YYYY-MM-DD HH:MM ±HH:MM`` in their zone.

    2023-05-12T04:45Z with ``tz="Asia/Shanghai"`` renders ``"2023-05-12 12:45 +08:00"``.
    """
    local = to_local(dt, tz)
    offset = local.utcoffset() or timedelta(0)
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(int(offset.total_seconds())) // 60
    return f"{local:%Y-%m-%d %H:%M} {sign}{minutes // 60:02d}:{minutes % 60:02d}"


def ago_text(seconds: int) -> str:
    """A coarse human duration: ``"just now"``, ``"5 minutes"``, ``"3 hours"``, ``"3 days"``, ``"2 weeks"``."""
    units = [(365 * 86400, "year"), (30 * 86400, "month"), (7 * 86400, "week"), (86400, "day"), (3600, "hour"),
             (60, "minute")]
    for size, name in units:
        n = seconds // size
        if n >= 1:
            return f"{n} {name}{'s' if n > 1 else ''}"
    return "just now"
