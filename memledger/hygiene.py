"""Memory hygiene reads: scheduled facts, the quarantine, what is due for re-confirming, and memory health.

What a person or a source causes is an event, decided by the policy (ledger/domain.py with the rules of
ledger/hygiene.py: hedged, quarantined, released, corrected n times). What only time causes is derived here, at read
time, from recorded times, so ``verify`` stays deterministic:

* a fact whose ``valid_from`` is after ``now`` and after when it was said is **scheduled**: not
  current; while it waits, the version whose valid range covers ``now`` (if any) is the current one;
* a quarantined statement is **pending** until 72 hours after it was said (``observed_at``), then
  **expired**, unless a later event released it (**released**);
* a current fact is **due** once ``verify_after`` seconds of its key prefix (the key registry,
  ``ledger.slots.REGISTRY``; ``health.*``: 30 days) have passed since it was last stated or confirmed (the latest
  ``observed_at`` of its version and of reaffirmations of it), or when it was corrected three times or more.

Each function takes a :class:`~memledger.store.Store` and an optional ``now`` (aware; default the current time)
and reads projections only (profile, history, messages), never the log. Errors: :class:`ledger.errors.BadInput`
for a bad user id or ``now``.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field

from ledger.hygiene import QUARANTINE_WINDOW, REVIEW_AT
from ledger.schemas import check_user_id
from ledger.slots import REGISTRY
from ledger.timeutil import from_micros, now_utc, parse_instant, to_micros

from .poisoning import WithheldText, withheld_texts
from .reads import split_scheduled
from .store import Store

#: the window of ``freshness_7d`` (share of facts stated or confirmed in the last 7 days)
FRESH_WINDOW = timedelta(days=7)


class QuarantinedFact(BaseModel):
    """One quarantined statement (``memledger quarantine USER --json``: an item of ``items``).

    ``reason``: why it was quarantined (``"profile.age must be a whole number from 0 to 120"``, ``"reads as an
    instruction to the agent"``). ``observed_at``: when it was said; ``expires_at``: 72 hours later (UTC);
    ``recorded_at``: when the ledger recorded it.
    ``state``: ``pending`` (waiting for an independent second statement), ``released`` (``released_by`` is the
    version it became, ``released_at`` when), or ``expired`` (nobody confirmed it in time; it stays in history)."""

    key: str
    version: int
    value: Any
    text: str | None
    reason: str
    source: str
    source_ref: str | None
    session_id: str | None
    observed_at: datetime
    recorded_at: datetime
    expires_at: datetime
    state: Literal["pending", "released", "expired"]
    released_by: int | None
    released_at: datetime | None
    #: the sensitivity label when the read did not ask for it: ``value`` and ``text`` are None (absent otherwise)
    withheld: str | None = Field(default=None, exclude_if=lambda v: v is None)


class QuarantineList(BaseModel):
    """``memledger quarantine USER --json``: the user's quarantined statements, pending first, then by position;
    ``withheld_texts``: stored messages, summaries, state-card lines and current facts that ``context`` withholds because
    they read as an instruction to the assistant (memledger/poisoning.py), messages first."""

    user_id: str
    now: datetime
    items: list[QuarantinedFact]
    withheld_texts: list[WithheldText] = []


class DueFact(BaseModel):
    """A current fact to re-confirm with the user (``memledger due USER --json``: an item of ``items``).

    ``why``: ``verify_after`` (``confirmed_at`` + the key prefix's ``verify_after`` is at or before ``now``;
    ``due_at`` is that instant) or ``review`` (corrected ``corrections`` >= 3 times; ``due_at`` is when the third
    correction was recorded). ``confirmed_at``: when it was last stated or confirmed (``observed_at``, UTC)."""

    key: str
    version: int
    value: Any
    text: str | None
    confirmed_at: datetime
    due_at: datetime
    why: Literal["verify_after", "review"]
    corrections: int
    #: the sensitivity label when the read did not ask for it: ``value`` and ``text`` are None (absent otherwise)
    withheld: str | None = Field(default=None, exclude_if=lambda v: v is None)


class DueList(BaseModel):
    """``memledger due USER --json``: what needs re-confirming at ``now``, by ``due_at`` then key."""

    user_id: str
    now: datetime
    items: list[DueFact]


class ScheduledFact(BaseModel):
    """A fact whose valid time starts after ``now``: upcoming, not current, never "has happened"."""

    key: str
    version: int
    value: Any
    text: str | None
    valid_from: datetime
    source: str
    confidence: float
    sensitivity: str | None
    #: the sensitivity label when the read did not ask for it: ``value`` and ``text`` are None (absent otherwise)
    withheld: str | None = Field(default=None, exclude_if=lambda v: v is None)


class Stats(BaseModel):
    """``memledger stats [USER] --json``: memory health, for one user or the whole store.

    * ``user_id``: the user, or null for the whole store; ``users``: how many users hold a current or scheduled
      fact; ``facts``: current facts (scheduled ones excluded);
    * ``freshness_7d``: share of current facts stated or confirmed (``observed_at``) in the 7 days before ``now``
      (0..1; null with no facts); ``conflict_rate``: contested / current facts (null with no facts);
    * ``correction_rate_per_1k_messages``: corrections recorded per 1000 logged messages (null with no messages);
    * ``quarantined``: pending quarantined statements; ``due``: facts to re-confirm (``memledger due``);
      ``scheduled``: facts whose valid time has not started.
    """

    user_id: str | None
    users: int
    facts: int
    freshness_7d: float | None
    conflict_rate: float | None
    correction_rate_per_1k_messages: float | None
    quarantined: int
    due: int
    scheduled: int


def _now(now: Any) -> datetime:
    return parse_instant(now, "now") if now is not None else now_utc()


def _marks(row: dict[str, Any]) -> dict[str, Any]:
    return json.loads(row.get("hygiene") or "{}")


def facts_at(store: Store, cur: Any, user_id: str, now_us: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The user's (current, scheduled) facts at ``now_us`` (micros), as profile-shaped rows ordered by key (then
    valid_from), from what had been said by then.

    * When nothing the user's facts record was said after ``now_us`` (the usual case: ``now`` is the clock), the
      current facts are the profile's (:func:`split_scheduled`: the latest belief per key, a scheduled head replaced
      by the version covering ``now``).
    * When ``now`` is earlier than something already said, the current facts are those true at ``now`` as the
      statements said by then tell it: ``believed --axis observed --as-of NOW --valid-at NOW``
      (projections/timetravel_queries.py), so a statement made later is never counted (nor its corrections,
      reaffirmations or releases: see :func:`quarantine`, :func:`due`, :func:`stats`).
    * Scheduled: every version live at that cutoff whose valid time starts after ``now`` and after it was said —
      all of them, not only a key's head (a dentist on the 10th and an eye doctor on the 20th both wait).
    """
    from projections.timetravel_queries import Cutoff

    last = store.timetravel_queries.last_said(cur, user_id)
    live_now = last is None or last <= now_us
    # with ``now`` live the current facts are the profile's, so only rows starting after ``now`` are read
    live = store.timetravel_queries.live_rows(cur, user_id, Cutoff("now") if live_now else Cutoff("observed", now_us),
                                              starting_after=now_us if live_now else None)
    later = [r for r in live if r["valid_from"] > now_us and r["observed_at"] is not None
             and r["valid_from"] > r["observed_at"]]
    if live_now:
        current = split_scheduled(store, cur, user_id, store.profile_projection.rows(cur, user_id), now_us)
    else:
        current = [{**r, "status": "current" if r["status"] == "believed" else r["status"]}
                   for r in live if r["valid_from"] <= now_us < r["valid_to"]]
    return current, later


def scheduled(store: Store, user_id: str, now: Any = None) -> list[ScheduledFact]:
    """The user's scheduled facts at ``now``, soonest first."""
    user_id = check_user_id(user_id)
    now_dt = _now(now)
    store.before_read(None, 10.0)
    with store.db.read() as cur:
        _, later = facts_at(store, cur, user_id, to_micros(now_dt))
    return [ScheduledFact(key=r["key"], version=r["version"], value=_value(r["value_json"]), text=r["text"],
                          valid_from=from_micros(r["valid_from"]), source=r["source"], confidence=r["confidence"],
                          sensitivity=r["sensitivity"])
            for r in sorted(later, key=lambda r: (r["valid_from"], r["key"], r["version"]))]


def _value(value_json: str | None) -> Any:
    return None if value_json is None else json.loads(value_json)


def quarantine(store: Store, user_id: str, now: Any = None) -> QuarantineList:
    """The user's quarantined statements with their state at ``now`` (``memledger quarantine USER``)."""
    user_id = check_user_id(user_id)
    now_dt = _now(now)
    store.before_read(None, 10.0)
    with store.db.read() as cur:
        held, releases = _quarantine_at(store, cur, user_id, to_micros(now_dt))
    items = [_quarantined(r, releases, now_dt) for r in held]
    items.sort(key=lambda q: (q.state != "pending", q.observed_at, q.version))
    from .reads import profile

    withheld = withheld_texts(store, user_id, facts=profile(store, user_id).facts)
    return QuarantineList(user_id=user_id, now=now_dt, items=items, withheld_texts=withheld)


def _quarantine_at(store: Store, cur: Any, user_id: str | None,
                   now_us: int) -> tuple[list[dict[str, Any]], dict[tuple[str, str, int], dict[str, Any]]]:
    """Quarantined statements and their releases (projections/history.py ``quarantine_rows``) said at or before
    ``now_us``: a statement, or a release, said after ``now`` does not exist yet at ``now``."""
    held, releases = store.history_projection.quarantine_rows(cur, user_id)
    # a forgotten statement (memledger forget) has no content left to list
    return ([r for r in held if r["observed_at"] <= now_us and r["status"] != "forgotten"],
            {k: r for k, r in releases.items() if r["observed_at"] <= now_us})


def _quarantined(r: dict[str, Any], releases: dict[tuple[str, str, int], dict[str, Any]],
                 now_dt: datetime) -> QuarantinedFact:
    recorded = from_micros(r["recorded_at"])
    expires = from_micros(r["observed_at"]) + QUARANTINE_WINDOW
    rel = releases.get((r["user_id"], r["key"], r["version"]))
    state = "released" if rel is not None else ("expired" if now_dt >= expires else "pending")
    return QuarantinedFact(
        key=r["key"], version=r["version"], value=_value(r["value_json"]), text=r["text"],
        reason=_marks(r).get("quarantined", ""), source=r["source"], source_ref=r["source_ref"],
        session_id=r["session_id"], observed_at=from_micros(r["observed_at"]), recorded_at=recorded, expires_at=expires, state=state,  # type: ignore[arg-type]
        released_by=None if rel is None else rel["version"],
        released_at=None if rel is None else from_micros(rel["recorded_at"]))


def _due_rows(rows: list[dict[str, Any]], user_of: Any, confirmed: dict[tuple[str, str, int], int],
              now_dt: datetime, said_at: Any) -> list[tuple[dict[str, Any], DueFact]]:
    """The rows due at ``now_dt`` with their DueFact. ``said_at(row)``: when the row's own version was said (micros);
    a version flagged for review is no longer due for review once the user reaffirmed it after that."""
    out = []
    for r in rows:
        marks = _marks(r)
        seen = confirmed.get((user_of(r), r["key"], r["version"]), r["valid_from"])
        confirmed_at = from_micros(seen)
        n = int(marks.get("corrections", 0))
        after = REGISTRY.verify_after(r["key"])
        fact = None
        if after is not None and confirmed_at + timedelta(seconds=after) <= now_dt:
            fact = DueFact(key=r["key"], version=r["version"], value=_value(r.get("value_json")), text=r.get("text"),
                           confirmed_at=confirmed_at, due_at=confirmed_at + timedelta(seconds=after),
                           why="verify_after", corrections=n)
        elif n >= REVIEW_AT and seen <= (said_at(r) or seen):
            fact = DueFact(key=r["key"], version=r["version"], value=_value(r.get("value_json")), text=r.get("text"),
                           confirmed_at=confirmed_at, due_at=from_micros(r["recorded_at"]), why="review",
                           corrections=n)
        if fact is not None:
            out.append((r, fact))
    return out


def due(store: Store, user_id: str, now: Any = None) -> DueList:
    """The user's current facts that need re-confirming at ``now`` (``memledger due USER``)."""
    user_id = check_user_id(user_id)
    now_dt = _now(now)
    store.before_read(None, 10.0)
    now_us = to_micros(now_dt)
    with store.db.read() as cur:
        current, _ = facts_at(store, cur, user_id, now_us)
        confirmed = store.history_projection.confirmations(cur, user_id, upto=now_us)
        items = [f for _, f in _due_rows(current, lambda r: user_id, confirmed, now_dt,
                                         lambda r: _said_at(store, cur, user_id, r))]
    items.sort(key=lambda f: (f.due_at, f.key))
    return DueList(user_id=user_id, now=now_dt, items=items)


def due_keys(store: Store, user_id: str, now: datetime) -> dict[str, DueFact]:
    """``{key: DueFact}`` of :func:`due` (what ``context`` marks "unconfirmed since D; ask?")."""
    return {f.key: f for f in due(store, user_id, now).items}


class StatsCounts(BaseModel):
    """The counts :class:`Stats` is computed from (:func:`stats_counts`): stores merge by adding them (a shard map's
    ``stats``, memledger/sharding/sharded.py), then :meth:`stats` gives the rates of the sum, not a mean of rates."""

    user_id: str | None
    users: int
    facts: int
    fresh: int
    contested: int
    corrections: int
    messages: int
    quarantined: int
    due: int
    scheduled: int

    def __add__(self, other: StatsCounts) -> StatsCounts:
        return StatsCounts(user_id=self.user_id, **{f: getattr(self, f) + getattr(other, f)
                                                    for f in type(self).model_fields if f != "user_id"})

    def stats(self) -> Stats:
        n = self.facts
        return Stats(user_id=self.user_id, users=self.users, facts=n,
                     freshness_7d=None if n == 0 else round(self.fresh / n, 4),
                     conflict_rate=None if n == 0 else round(self.contested / n, 4),
                     correction_rate_per_1k_messages=None if self.messages == 0
                     else round(self.corrections * 1000 / self.messages, 4),
                     quarantined=self.quarantined, due=self.due, scheduled=self.scheduled)


def stats(store: Store, user_id: str | None = None, now: Any = None) -> Stats:
    """Memory health for ``user_id`` or the whole store (``memledger stats [USER]``), from projections only."""
    return stats_counts(store, user_id, now).stats()


def stats_counts(store: Store, user_id: str | None = None, now: Any = None) -> StatsCounts:
    """The counts behind :func:`stats` (facts current at ``now``, those fresh within 7 days, contested, corrections
    and messages recorded by then, pending quarantines, due and scheduled facts)."""
    if user_id is not None:
        user_id = check_user_id(user_id)
    now_dt = _now(now)
    now_us = to_micros(now_dt)
    store.before_read(None, 10.0)
    with store.db.read() as cur:
        current: list[dict[str, Any]] = []
        n_scheduled = holding = 0
        # per user: a past ``now`` must see each user's facts as said by then (facts_at)
        for u in [user_id] if user_id is not None else store.timetravel_queries.users(cur):
            cur_rows, later = facts_at(store, cur, u, now_us)
            for r in cur_rows:
                r["user_id"] = u
            current += cur_rows
            n_scheduled += len(later)
            holding += bool(cur_rows or later)
        confirmed = store.history_projection.confirmations(cur, user_id, upto=now_us)
        corrections = store.history_projection.correction_counts(cur, user_id, upto=now_us)
        messages = _message_count(store, cur, user_id, now_us)
        held, releases = _quarantine_at(store, cur, user_id, now_us)
        n_due = len(_due_rows(current, lambda r: r["user_id"], confirmed, now_dt,
                              lambda r: _said_at(store, cur, r["user_id"], r)))
    pending = sum(1 for r in held if _quarantined(r, releases, now_dt).state == "pending")
    n = len(current)
    since = now_us - int(FRESH_WINDOW.total_seconds() * 1_000_000)
    fresh = sum(1 for r in current
                if since <= confirmed.get((r["user_id"], r["key"], r["version"]), r["valid_from"]) <= now_us)
    contested = sum(1 for r in current if r["status"] == "contested")
    return StatsCounts(user_id=user_id, users=holding, facts=n, fresh=fresh, contested=contested,
                       corrections=corrections, messages=messages, quarantined=pending, due=n_due,
                       scheduled=n_scheduled)


def _said_at(store: Store, cur: Any, user_id: str, r: dict[str, Any]) -> int | None:
    """When row ``r``'s own version was said (micros): its ``observed_at`` if the row has one, else the history's
    (read in the caller's transaction)."""
    if r.get("observed_at") is not None:
        return int(r["observed_at"])
    return store.history_projection.observed_at_of(cur, user_id, r["key"], r["version"])


def _message_count(store: Store, cur: Any, user_id: str | None, now_us: int) -> int:
    """Messages logged (said at or before ``now_us``) by the user, or by everyone with None."""
    t = store.messages_projection.table("log")
    sql, params = f"SELECT COUNT(*) FROM {t} WHERE observed_at <= ?", [now_us]
    if user_id is not None:
        sql += " AND user_id = ?"
        params.append(user_id)
    cur.execute(sql, params)
    return int(cur.fetchone()[0])
