"""Indexed time-travel queries over the ``history`` projection's tables (no replay, no writes).

This module owns no tables: it reads ``history_timeline`` (bitemporal rows) and ``history_versions`` (one row per
event) written by :class:`projections.history.HistoryProjection`, so it adds no projection to rebuild. The slow
truth it must agree with is ``replay/cutoff.py`` (tests/test_timetravel.py checks both axes with hypothesis).

A **cutoff** says which prefix of the log a question sees; every instant is integer microseconds (UTC):

* ``Cutoff("now")`` — everything recorded so far: rows whose ``position_to`` is OPEN.
* ``Cutoff("system", T)`` — system time: events whose (monotonic, see replay/catchup.py) ``recorded_at <= T``,
  inclusive. A timeline row belongs to it iff ``recorded_from <= T < recorded_to``.
* ``Cutoff("observed", T)`` — observed time, for imported history: per fact stream (user_id, key), the events
  before the first one whose ``observed_at > T``. Within one stream that is the prefix a replay in log order
  reaches "once everything said up to T had been heard"; the policy's decisions only ever touch the same stream
  (ledger/domain.py), so per-stream prefixes are a consistent state. A row belongs to it iff
  ``position_from < F <= position_to`` where ``F`` is that first later-observed event's position (OPEN if none).

The valid-time slice at ``V`` is the half-open test ``valid_from <= V < valid_to`` (empty ranges are never stored).
For one (user_id, key) at most one row matches a cutoff and a slice, because the policy never lets a fact's live
valid ranges overlap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ledger.timeutil import OPEN

from .db import Cursor
from .base import rows_read_back
from .history import VERSION_COLS, HistoryProjection

#: the columns of a belief row: the timeline row's bitemporal ranges, and its version's event fields
BELIEF_COLS = [
    "key", "version", "valid_from", "valid_to", "status", "recorded_from", "position_from",
    "value_json", "text", "recorded_at", "observed_at", "source", "source_ref", "confidence", "event_id",
    "position",
]
_SELECT = (
    "t.key, t.version, t.valid_from, t.valid_to, t.status, t.recorded_from, t.position_from, "
    "v.value_json, v.text, v.recorded_at, v.observed_at, v.source, v.source_ref, v.confidence, v.event_id, "
    "v.position"
)

#: the columns of :meth:`TimeTravelQueries.live_rows`: a profile row's columns (projections/profile.py) plus when
#: the version was said
LIVE_COLS = [
    "key", "version", "valid_from", "valid_to", "status", "value_json", "text", "recorded_at", "observed_at",
    "source", "source_ref", "session_id", "confidence", "sensitivity", "position", "hygiene",
]
_LIVE_SELECT = (
    "t.key, t.version, t.valid_from, t.valid_to, t.status, v.value_json, v.text, v.recorded_at, v.observed_at, "
    "v.source, v.source_ref, v.session_id, v.confidence, v.sensitivity, v.position, v.hygiene"
)

@dataclass(frozen=True)
class Cutoff:
    """Which prefix of the log a question sees: ``axis`` is "now", "system" or "observed"; ``at`` micros (UTC)."""

    axis: str
    at: int | None = None


class TimeTravelQueries:
    """Read-only queries on one copy of the history projection (its table names follow its suffix)."""

    def __init__(self, history: HistoryProjection) -> None:
        self.tt = history.table("timeline")
        self.tv = history.table("versions")

    # -- the cutoff as SQL -------------------------------------------------------------------------------------
    def _cut(self, user_id: str, cut: Cutoff) -> tuple[str, str, list[Any]]:
        """(extra FROM clause, WHERE condition on the timeline alias ``t``, params in clause order)."""
        if cut.axis == "now":
            return "", "t.position_to = ?", [OPEN]
        if cut.axis == "system":
            return "", "t.recorded_from <= ? AND t.recorded_to > ?", [cut.at, cut.at]
        if cut.axis == "observed":
            join = (
                f" LEFT JOIN (SELECT key AS ckey, MIN(position) AS f FROM {self.tv} WHERE user_id = ? "
                "AND observed_at > ? GROUP BY key) c ON c.ckey = t.key"
            )
            cond = "t.position_from < COALESCE(c.f, ?) AND t.position_to >= COALESCE(c.f, ?)"
            return join, cond, [user_id, cut.at, OPEN, OPEN]
        raise ValueError(f"unknown axis {cut.axis!r}")

    # -- queries -----------------------------------------------------------------------------------------------
    def beliefs(self, cur: Cursor, user_id: str, cut: Cutoff, valid_at: int,
                key: str | None = None) -> list[dict[str, Any]]:
        """The user's beliefs at a cutoff, sliced at valid instant ``valid_at``: dicts of :data:`BELIEF_COLS`,
        ordered by key, at most one per key. ``valid_from``/``valid_to`` are the range as known at the cutoff
        (OPEN for an open end); ``status`` is "believed" or "contested"; ``recorded_from`` is when (system time)
        the ledger started holding the row."""
        join, cond, cut_params = self._cut(user_id, cut)
        join_params = cut_params[:2] if cut.axis == "observed" else []
        where_params = cut_params[2:] if cut.axis == "observed" else cut_params
        sql = (
            f"SELECT {_SELECT} FROM {self.tt} t JOIN {self.tv} v ON v.user_id = t.user_id AND v.key = t.key "
            f"AND v.version = t.version{join} WHERE t.user_id = ? AND {cond} AND t.valid_from <= ? "
            "AND t.valid_to > ?"
        )
        params: list[Any] = [*join_params, user_id, *where_params, valid_at, valid_at]
        if key is not None:
            sql += " AND t.key = ?"
            params.append(key)
        cur.execute(sql + " ORDER BY t.key", params)
        return rows_read_back(BELIEF_COLS, cur.fetchall())

    def users(self, cur: Cursor) -> list[str]:
        """Every user with a fact event in the projection, in order (``memledger stats`` of the whole store)."""
        cur.execute(f"SELECT DISTINCT user_id FROM {self.tv} ORDER BY user_id")
        return [r[0] for r in cur.fetchall()]

    def last_said(self, cur: Cursor, user_id: str) -> int | None:
        """The latest ``observed_at`` (micros) of the user's fact events, or None: a read "at" an instant before it
        must leave out what was said later (memledger/hygiene.py)."""
        cur.execute(f"SELECT MAX(observed_at) FROM {self.tv} WHERE user_id = ?", (user_id,))
        row = cur.fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def live_rows(self, cur: Cursor, user_id: str, cut: Cutoff,
                  starting_after: int | None = None) -> list[dict[str, Any]]:
        """Every timeline row of the user live at a cutoff, whatever its valid range, with its version's fields:
        dicts of :data:`LIVE_COLS` ordered by key then ``valid_from`` (``valid_from``/``valid_to``/``status`` are
        the timeline row's: the range as known at the cutoff, OPEN for an open end, "believed" or "contested").
        Memory hygiene reads (memledger/hygiene.py) take scheduled facts and facts current at a past instant from
        here, so two statements scheduled for the same key are both seen (a profile row holds only the head).
        Forgotten versions (``memledger forget``) are left out: at a cutoff before the forget they would be rows
        with no content. ``starting_after`` (micros): only rows whose valid time starts after it."""
        join, cond, cut_params = self._cut(user_id, cut)
        join_params = cut_params[:2] if cut.axis == "observed" else []
        where_params = cut_params[2:] if cut.axis == "observed" else cut_params
        after = "" if starting_after is None else " AND t.valid_from > ?"
        cur.execute(
            f"SELECT {_LIVE_SELECT} FROM {self.tt} t JOIN {self.tv} v ON v.user_id = t.user_id AND v.key = t.key "
            f"AND v.version = t.version{join} WHERE t.user_id = ? AND {cond} AND v.status <> 'forgotten'{after} "
            "ORDER BY t.key, t.valid_from",
            [*join_params, user_id, *where_params, *([] if starting_after is None else [starting_after])],
        )
        return rows_read_back(LIVE_COLS, cur.fetchall())

    def event_at(self, cur: Cursor, user_id: str, position: int) -> dict[str, Any] | None:
        """The ``history_versions`` row (dict of VERSION_COLS) of the user's event at log ``position``."""
        cur.execute(
            f"SELECT {', '.join(VERSION_COLS)} FROM {self.tv} WHERE user_id = ? AND position = ?",
            (user_id, position),
        )
        row = cur.fetchone()
        return None if row is None else rows_read_back(VERSION_COLS, [row])[0]

    def closing_position(self, cur: Cursor, user_id: str, key: str, version: int, position_from: int) -> int:
        """``position_to`` of the timeline row opened at ``position_from`` for (key, version); OPEN if open."""
        cur.execute(
            f"SELECT position_to FROM {self.tt} WHERE user_id = ? AND key = ? AND version = ? AND position_from = ?",
            (user_id, key, version, position_from),
        )
        row = cur.fetchone()
        return OPEN if row is None else int(row[0])

    def events(self, cur: Cursor, user_id: str, key: str | None, cut: Cutoff) -> list[dict[str, Any]]:
        """Every event of the user's facts (or of ``key``) that the cutoff sees, in log order (VERSION_COLS dicts).

        System axis: ``recorded_at <= T`` (``recorded_at`` in the projection is the monotonic system time, so this
        is a log prefix). Observed axis: per key, the events before the first one observed after T.
        """
        cols = ", ".join("v." + c for c in VERSION_COLS)
        sql = f"SELECT {cols} FROM {self.tv} v"
        params: list[Any] = []
        if cut.axis == "observed":
            sql += (
                f" LEFT JOIN (SELECT key AS ckey, MIN(position) AS f FROM {self.tv} WHERE user_id = ? "
                "AND observed_at > ? GROUP BY key) c ON c.ckey = v.key"
            )
            params += [user_id, cut.at]
        sql += " WHERE v.user_id = ?"
        params.append(user_id)
        if key is not None:
            sql += " AND v.key = ?"
            params.append(key)
        if cut.axis == "system":
            sql += " AND v.recorded_at <= ?"
            params.append(cut.at)
        elif cut.axis == "observed":
            sql += " AND v.position < COALESCE(c.f, ?)"
            params.append(OPEN)
        cur.execute(sql + " ORDER BY v.position", params)
        return rows_read_back(VERSION_COLS, cur.fetchall())
