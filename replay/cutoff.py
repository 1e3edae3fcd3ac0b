"""The slow truth of time travel: fold the log up to a cutoff, with no projection involved.

Reads the notification log from position 1 (eventsourcing's ``recorder.select_notifications``), decodes each event
with the application's mapper (so encryption and upcasting apply exactly as for projections), gives each event the
same monotonic system time the catch-up loop gives it (:func:`replay.catchup.decode`), and rebuilds the
:class:`ledger.domain.Fact` aggregates from the events the cutoff admits by calling each event's ``mutate`` — the
same code that decides commands. Its answers must equal the indexed ones of ``projections/timetravel_queries.py``;
tests/test_timetravel.py checks that on random command sequences, and scripts/bench_timetravel.py measures how much
slower it is.

Cutoffs (instants are integer microseconds since the epoch, UTC):

* ``axis="system"``: the events whose monotonic ``recorded_at <= as_of`` (a prefix of the log, inclusive);
* ``axis="observed"``: per fact stream, the events before the first one whose ``observed_at > as_of``;
* ``as_of=None``: every event (as known now).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ledger.domain import Fact, fact_effect
from ledger.timeutil import OPEN, to_micros
from projections.base import LogEvent

from .events import decode

PAGE = 5000


def _erased(event: Any) -> bool:
    from ledger.crypto import is_erased

    return is_erased(event)


def _log_until(app: Any, as_of: int | None, page: int = PAGE) -> Iterator[LogEvent]:
    """The log's events in order from position 1, decoded with the catch-up loop's monotonic system time
    (:func:`replay.catchup.decode`), ending before the first one recorded after ``as_of`` (integer microseconds,
    UTC; None: the whole log). System time is monotonic along the log, so nothing later can be admitted."""
    recorded, start = 0, 1
    while True:
        notifications = app.recorder.select_notifications(start=start, limit=page)
        if not notifications:
            return
        events, recorded = decode(app, notifications, recorded)
        for le in events:
            if as_of is not None and le.recorded_at > as_of:
                return
            yield le
        start = notifications[-1].id + 1


@dataclass(frozen=True)
class ReplayedBelief:
    """One belief as the fold sees it: the version covering the valid instant, its range (OPEN = open end) and
    status ("believed" or "contested")."""

    key: str
    version: int
    value_json: str
    valid_from: int
    valid_to: int
    status: str


def fold_to_cutoff(app: Any, user_id: str | None, as_of: int | None, axis: str = "system",
                   page: int = PAGE) -> dict[str, Fact]:
    """Rebuild the Fact aggregates of ``user_id`` (every user if None) from the events the cutoff admits.

    Returns key -> aggregate (for one user) or "user\\x1fkey" -> aggregate (all users). Reads the whole log up to
    the cutoff: cost is linear in the log's length, which is the point of comparing it with the indexed queries.
    """
    if axis not in ("system", "observed"):
        raise ValueError(f"unknown axis {axis!r}")
    facts: dict[str, Fact] = {}
    closed: set[str] = set()  # observed axis: streams that met an event observed after the cutoff
    for le in _log_until(app, as_of if axis == "system" else None, page):
        e = le.event
        if fact_effect(e) is None:
            if type(e).__name__ == "SubjectErased":
                # Erasure (docs/erasure.md): the projections purge the user at the tombstone; so does the fold.
                prefix = "" if user_id is not None else f"{e.user_id}\x1f"
                if user_id is None or e.user_id == user_id:
                    for name in [n for n in facts if n.startswith(prefix)]:
                        del facts[name]
            continue
        if _erased(e):
            continue  # decoded after the user's key was destroyed: skipped, as replay/catchup.py does
        if user_id is not None and e.user_id != user_id:
            continue
        name = e.key if user_id is not None else f"{e.user_id}\x1f{e.key}"
        if axis == "observed" and as_of is not None:
            if name in closed:
                continue
            if to_micros(e.observed_at) > as_of:
                closed.add(name)
                continue
        facts[name] = e.mutate(facts.get(name))
    return facts


def beliefs_from_facts(facts: dict[str, Fact], valid_at: int) -> list[ReplayedBelief]:
    """For each aggregate, the live version whose valid range covers ``valid_at`` (half-open), by key.

    Raises:
        AssertionError: if two live versions of one fact cover the instant (the policy forbids it).
    """
    out = []
    for name in sorted(facts):
        fact = facts[name]
        covering = []
        for v in fact.versions.values():
            vf = to_micros(v.valid_from)
            vt = to_micros(v.valid_to, OPEN)
            if vf < vt and vf <= valid_at < vt:
                covering.append(ReplayedBelief(name, v.version, v.value_json, vf, vt,
                                               "contested" if v.status == "contested" else "believed"))
        assert len(covering) <= 1, f"overlapping live versions of {name}: {covering}"
        out.extend(covering)
    return out


def replay_believed(app: Any, user_id: str, as_of: int | None, valid_at: int,
                    axis: str = "system") -> list[ReplayedBelief]:
    """What the ledger believed about ``user_id`` at the cutoff, sliced at ``valid_at``: by folding the log."""
    return beliefs_from_facts(fold_to_cutoff(app, user_id, as_of, axis), valid_at)


#: the events the session projections apply (ledger/sessions.py): everything else is skipped by the fold below
SESSION_EVENTS = ("SessionStarted", "MessageLogged", "StateCardUpdated", "SessionSummarized", "SessionEnded")


def sessions_at_cutoff(app: Any, user_id: str, as_of: int, axis: str = "system", page: int = PAGE) -> Any:
    """The session read models of ``user_id`` as the ledger knew them at ``as_of`` (integer microseconds, UTC).

    Replays the log (from position 1, like :func:`fold_to_cutoff`) into scratch copies of the ``state_cards``,
    ``messages`` and ``summaries`` projections held in an in-memory SQLite database, applying only this user's
    session events that the cutoff admits: ``axis="system"`` the events recorded at or before ``as_of`` (a prefix of
    the log); ``"observed"`` the events observed at or before it. The same ``apply`` code as the serving
    projections, so the scratch rows answer the same queries (``sessions``, ``card``, ``open_cards``, ``recent``,
    ``rows``). Cost is linear in the log's length: it serves ``context --as-of`` / ``resume --as-of``, an audit
    question, not every turn.

    Returns:
        an object with ``db`` (a :class:`projections.db.ProjectionDB`; close it when done), ``state_cards``,
        ``messages`` and ``summaries`` (the projection objects whose tables it holds).

    Raises:
        ValueError: an unknown ``axis``.
    """
    from types import SimpleNamespace

    from projections.db import ProjectionDB
    from projections.messages import MessagesProjection
    from projections.state_cards import StateCardsProjection
    from projections.summaries import SummariesProjection

    if axis not in ("system", "observed"):
        raise ValueError(f"unknown axis {axis!r}")
    scratch = SimpleNamespace(db=ProjectionDB(sqlite_path=":memory:"), state_cards=StateCardsProjection(),
                              messages=MessagesProjection(), summaries=SummariesProjection())
    projections = [scratch.state_cards, scratch.messages, scratch.summaries]
    with scratch.db.transaction() as cur:
        for p in projections:
            p.create(cur)
        for le in _log_until(app, as_of if axis == "system" else None, page):
            e = le.event
            if getattr(e, "user_id", None) != user_id or type(e).__name__ not in SESSION_EVENTS or _erased(e):
                continue
            if axis == "observed" and to_micros(e.observed_at) > as_of:
                continue
            for p in projections:
                p.apply(cur, le)
    return scratch
