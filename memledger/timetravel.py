"""Time travel and audit: ``believed``, ``true_at``, ``diff`` and ``audit`` (docs/time-travel.md).

The read models here are what :class:`memledger.api.MemoryLedger` returns and what the CLI prints with ``--json``
(``model_dump(mode="json")``, field for field; shaped like ``profile``: ``{"user_id": ..., "facts": {KEY: ...}}``).
Answers are indexed lookups on the history projection (``projections/timetravel_queries.py``), never replays;
``replay/cutoff.py`` folds the log for the same answers and the tests hold the two equal.

Semantics (Datomic's as-of, XTDB's system and valid time; DESIGN.md "Time-travel semantics"):

* ``as_of`` — a system-time instant, **inclusive**: only events recorded at or before it count.
  ``axis="observed"`` reads the same instant as observed time instead (imported history: recorded today, said
  long ago): per fact, the events before the first one observed after it.
* ``valid_at`` — the valid-time slice: a version counts if ``valid_from <= valid_at < valid_to`` (half-open).
  Defaults to ``as_of`` (or to now when there is no ``as_of``).
* Every instant is an ISO 8601 string with an offset or an aware datetime; any offset is accepted and converted to
  UTC (the same instant in different offsets gives identical answers); naive ones raise
  :class:`~ledger.errors.BadInput` naming the field. Answers carry aware UTC datetimes; :func:`render_json`
  renders them in an IANA zone for ``--tz``.

Every function takes the :class:`~memledger.store.Store`; ``MemoryLedger.believed`` etc. are these.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ledger.errors import BadInput
from ledger.schemas import ErasedMark, FactFields, HistoryRow, check_key, check_user_id
from ledger.timeutil import from_micros, now_utc, parse_instant, to_micros

from .reads import history_row
from .scopes import Scope, check_scope, versions_in_scope
from .store import Store

Axis = Literal["system", "observed"]
AXES = ("system", "observed")


class BeliefView(FactFields):
    """One belief at a point of the two time axes: the fields of a profile's ``FactView``, plus where it came from.

    ``valid_from``/``valid_to`` are the version's valid range *as known at the cutoff* (``valid_to`` None = open).
    ``status`` is "believed", or "contested" while a lower-confidence inference disputes it (ledger/domain.py).
    ``recorded_at`` is when the version's event was recorded; ``believed_since`` is when (system time) the ledger
    started holding it with this range and status.
    """

    status: Literal["believed", "contested"]
    # additive
    believed_since: datetime
    observed_at: datetime | None
    source_ref: str | None
    event_id: str
    position: int


class Beliefs(ErasedMark):
    """``memledger believed`` / ``true-at`` ``--json``: beliefs by key at one (system or observed, valid) point.

    ``as_of`` None means "as known now" (``true_at``).
    """

    user_id: str
    axis: Axis
    as_of: datetime | None
    valid_at: datetime
    facts: dict[str, BeliefView]


class EventRef(BaseModel):
    """The event that made a difference: enough to find it (``event_id``, ``position``) and to say why."""

    event_id: str
    position: int
    version: int
    kind: str
    effect: str
    reason: str | None
    recorded_at: datetime
    observed_at: datetime | None
    source: str
    actor: str | None
    source_ref: str | None
    trace_id: str | None
    #: the sensitivity label of the event's version when the read did not ask for it: ``reason`` is None (absent
    #: from the output unless set)
    withheld: str | None = Field(default=None, exclude_if=lambda v: v is None)


class DiffEntry(BaseModel):
    """One key's belief before and after (None = no belief), and the event that made the difference."""

    before: BeliefView | None
    after: BeliefView | None
    event: EventRef


class Diff(ErasedMark):
    """``memledger diff --json``: beliefs added, changed and dropped between two cutoffs (``from`` <= ``to``).

    Both sides are sliced at the same ``valid_at`` (default: ``to``), so every difference was made by an event
    the ``to`` cutoff sees and the ``from`` cutoff does not: for a new value (added, or changed to another
    version) the event that recorded that value; for the same version with another valid range or status (e.g.
    contested) the event that changed it; for dropped the event that ended the old belief (a retraction, or a
    correction / supersession / backfill whose range took valid_at away from it).
    """

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    user_id: str
    axis: Axis
    from_: datetime = Field(alias="from")
    to: datetime
    valid_at: datetime
    added: dict[str, DiffEntry]
    changed: dict[str, DiffEntry]
    dropped: dict[str, DiffEntry]


class AuditEvent(HistoryRow):
    """One event of an audit chain: a ``history`` row plus the policy's ``effect`` (new, supersede, backfill,
    reaffirm, contest, correct, retract — ledger/domain.py)."""

    effect: str


class AuditEntry(BaseModel):
    """The audit of one key: the belief (None if nothing is believed at the point asked) and the chain behind it.

    ``chain`` is every event of the fact that the cutoff sees, in log order, as ``history`` rows (who: actor,
    source; when: recorded_at, observed_at; from what: source_ref, derived_from, session_id, trace_id; what it
    replaced and why: replaces, reason). ``replaced_by`` is recomputed within the cutoff; each row's
    ``valid_from``/``valid_to``/``status`` are as known now, like ``history``. ``replaced`` lists the versions the
    belief replaced, nearest first, following ``replaces`` through supersessions and corrections.
    """

    belief: BeliefView | None
    replaced: list[int]
    chain: list[AuditEvent]


class Audit(ErasedMark):
    """``memledger audit --json``: per key, the belief at the point asked and the events behind it."""

    user_id: str
    axis: Axis
    as_of: datetime | None
    valid_at: datetime
    facts: dict[str, AuditEntry]


# -- boundary ----------------------------------------------------------------------------------------------------
def _axis(axis: Any) -> str:
    if axis not in AXES:
        raise BadInput("axis", f"{axis!r} is not an axis", "use system (recorded_at) or observed (observed_at)")
    return axis


def _cutoff(axis: str, as_of: datetime | None) -> Any:
    from projections.timetravel_queries import Cutoff

    if as_of is None:
        return Cutoff("now")
    return Cutoff(axis, to_micros(as_of))


def _belief(r: dict[str, Any]) -> BeliefView:
    return BeliefView(
        value=None if r["value_json"] is None else json.loads(r["value_json"]), text=r["text"], version=r["version"],
        recorded_at=from_micros(r["recorded_at"]), valid_from=from_micros(r["valid_from"]),
        valid_to=from_micros(r["valid_to"]), source=r["source"], confidence=r["confidence"], status=r["status"],
        believed_since=from_micros(r["recorded_from"]), observed_at=from_micros(r["observed_at"]),
        source_ref=r["source_ref"], event_id=r["event_id"], position=r["position"],
    )


def _event_ref(r: dict[str, Any]) -> EventRef:
    return EventRef(
        event_id=r["event_id"], position=r["position"], version=r["version"], kind=r["kind"], effect=r["effect"],
        reason=r["reason"], recorded_at=from_micros(r["recorded_at"]), observed_at=from_micros(r["observed_at"]),
        source=r["source"], actor=r["actor"], source_ref=r["source_ref"], trace_id=r["trace_id"],
    )


def _prepare(ml: Store, after: Any, timeout: float) -> None:
    """Before a read: catch the projections up (or, in worker mode, wait for ``after``), as every facade read does."""
    ml.before_read(after, timeout)


def _beliefs(ml: Store, cur: Any, user_id: str, cut: Any, valid_at: datetime,
             key: str | None = None) -> dict[str, BeliefView]:
    rows = ml.timetravel_queries.beliefs(cur, user_id, cut, to_micros(valid_at), key)
    return {r["key"]: _belief(r) for r in rows}


def _in_scope(ml: Store, cur: Any, user_id: str, scope: Scope, held: dict[str, Any]) -> dict[str, Any]:
    """The belief rows of ``held`` (by key) whose version was recorded in ``scope``."""
    keep = versions_in_scope(ml, cur, user_id, scope, list(held))
    return {k: r for k, r in held.items() if (k, r["version"]) in keep}


# -- queries -----------------------------------------------------------------------------------------------------
def believed(ml: Store, user_id: str, as_of: Any, valid_at: Any = None, axis: str = "system", *,
             after: Any = None, timeout: float = 10.0) -> Beliefs:
    """What the ledger believed about ``user_id`` at ``as_of`` (inclusive), sliced at ``valid_at`` (default as_of).

    ``after``/``timeout`` (every query here): as for :meth:`MemoryLedger.profile` — in worker mode, answer only once
    the projections include that receipt (raises NotCaughtUp after ``timeout`` seconds).

    Raises:
        BadInput: bad user_id, axis, or an instant that is naive / not ISO 8601 (fields ``as_of``, ``valid_at``).
    """
    user_id = check_user_id(user_id)
    axis = _axis(axis)
    if as_of is None:
        raise BadInput("as_of", "is missing", "give the instant to look back to, e.g. 2024-05-01T00:00:00Z")
    t = parse_instant(as_of, "as_of")
    v = t if valid_at is None else parse_instant(valid_at, "valid_at")
    _prepare(ml, after, timeout)
    with ml.db.read() as cur:
        facts = _beliefs(ml, cur, user_id, _cutoff(axis, t), v)
    return Beliefs(user_id=user_id, axis=axis, as_of=t, valid_at=v, facts=facts)  # type: ignore[arg-type]


def profile_as_of(ml: Store, user_id: str, *, as_of: Any, axis: str = "system", valid_at: Any = None) -> Beliefs:
    """The profile as the ledger believed it at ``as_of`` (system time, or observed time with ``axis="observed"``),
    sliced at ``valid_at`` (default ``as_of``): :func:`believed`, for context assembled with a knowledge cut-off
    (``context --as-of``). Its ``facts`` carry what a profile's do (value, text, valid range, source, status)."""
    return believed(ml, user_id, as_of, valid_at, axis)


def true_at(ml: Store, user_id: str, valid_at: Any, axis: str = "system", *, after: Any = None,
            timeout: float = 10.0) -> Beliefs:
    """What was true of ``user_id`` at valid instant ``valid_at``, as known now (every event recorded so far).

    "Now" is the end of both axes, so ``axis`` only labels the answer. Raises :class:`BadInput` like
    :func:`believed`.
    """
    user_id = check_user_id(user_id)
    axis = _axis(axis)
    if valid_at is None:
        raise BadInput("valid_at", "is missing", "give the instant of the world you ask about")
    v = parse_instant(valid_at, "valid_at")
    _prepare(ml, after, timeout)
    with ml.db.read() as cur:
        facts = _beliefs(ml, cur, user_id, _cutoff(axis, None), v)
    return Beliefs(user_id=user_id, axis=axis, as_of=None, valid_at=v, facts=facts)  # type: ignore[arg-type]


def diff(ml: Store, user_id: str, from_: Any, to: Any, valid_at: Any = None, axis: str = "system", *,
         after: Any = None, timeout: float = 10.0, agent_id: str | None = None, run_id: str | None = None) -> Diff:
    """Beliefs added, changed and dropped between cutoffs ``from_`` and ``to`` (both inclusive as-ofs), each with
    the event that did it. Both sides are sliced at ``valid_at`` (default ``to``).

    ``agent_id`` / ``run_id``: each side holds only the beliefs whose version was written in that scope (as
    :meth:`MemoryLedger.believed` with them), so the diff is the change between those two scoped reads: a belief
    of agent a replaced by agent b's value is dropped from a's diff, by b's event, and added to b's.

    Raises:
        BadInput: as :func:`believed`, or ``to`` before ``from``, or a malformed ``agent_id`` / ``run_id``.
    """
    user_id = check_user_id(user_id)
    axis = _axis(axis)
    scope = check_scope(agent_id, run_id)
    for name, value in (("from", from_), ("to", to)):
        if value is None:
            raise BadInput(name, "is missing", "give both --from and --to (ISO 8601 with an offset)")
    t1 = parse_instant(from_, "from")
    t2 = parse_instant(to, "to")
    if t2 < t1:
        raise BadInput("to", f"{t2.isoformat()} is before from {t1.isoformat()}",
                       "swap the two instants: the later one goes second")
    v = t2 if valid_at is None else parse_instant(valid_at, "valid_at")
    q = ml.timetravel_queries
    _prepare(ml, after, timeout)
    added: dict[str, DiffEntry] = {}
    changed: dict[str, DiffEntry] = {}
    dropped: dict[str, DiffEntry] = {}
    with ml.db.read() as cur:
        held_then = {r["key"]: r for r in q.beliefs(cur, user_id, _cutoff(axis, t1), to_micros(v))}
        held_now = {r["key"]: r for r in q.beliefs(cur, user_id, _cutoff(axis, t2), to_micros(v))}
        if scope:  # both sides as the scoped believed reads them
            held_then, held_now = (_in_scope(ml, cur, user_id, scope, held) for held in (held_then, held_now))
        for key in sorted(set(held_then) | set(held_now)):
            b, a = held_then.get(key), held_now.get(key)
            if a is not None and b is not None and a["version"] == b["version"] and \
                    a["position_from"] == b["position_from"]:
                continue  # the very same timeline row: nothing happened to this belief in between
            if a is not None and (b is None or a["version"] != b["version"]):
                # Another value: the event that recorded it (after `from`: valid ranges only ever narrow, so a
                # version that existed at `from` without covering valid_at cannot cover it later).
                position = a["position"]
            elif a is not None:
                # The same version, another range or status: the event that opened the row held at `to`.
                position = a["position_from"]
            else:
                assert b is not None
                position = q.closing_position(cur, user_id, key, b["version"], b["position_from"])
            event = q.event_at(cur, user_id, position)
            assert event is not None, (key, position)
            entry = DiffEntry(before=None if b is None else _belief(b), after=None if a is None else _belief(a),
                              event=_event_ref(event))
            (added if b is None else dropped if a is None else changed)[key] = entry
    return Diff(user_id=user_id, axis=axis, from_=t1, to=t2, valid_at=v,  # type: ignore[arg-type]
                added=added, changed=changed, dropped=dropped)


def audit(ml: Store, user_id: str, key: str | None = None, *, trace_id: str | None = None,
          source_ref: str | None = None, as_of: Any = None, valid_at: Any = None, axis: str = "system",
          after: Any = None, timeout: float = 10.0, agent_id: str | None = None, run_id: str | None = None) -> Audit:
    """For each belief at the point asked (now by default), the chain of events behind it.

    With ``key``, that fact is audited even when nothing is believed (e.g. after a retraction: the chain says
    why). ``trace_id`` / ``source_ref`` keep only facts whose chain holds an event with that trace / source_ref.
    ``agent_id`` / ``run_id``: only the beliefs whose version was written in that scope (as
    :meth:`MemoryLedger.believed` with them), each chain holding only the events recorded in it (as
    :meth:`MemoryLedger.history` with them); with ``key``, the fact is audited when an event of it was recorded in
    the scope. ``replaced`` still names every version the belief replaced (numbers only).

    Raises:
        BadInput: as :func:`believed`, or an empty trace_id / source_ref, or a malformed ``agent_id`` / ``run_id``.
    """
    user_id = check_user_id(user_id)
    axis = _axis(axis)
    scope = check_scope(agent_id, run_id)
    if key is not None:
        key = check_key(key)
    for name, value in (("trace", trace_id), ("source_ref", source_ref)):
        if value is not None and not value.strip():
            raise BadInput(name, "is empty", "leave it out, or give the id to filter by")
    t = None if as_of is None else parse_instant(as_of, "as_of")
    v = (t or now_utc()) if valid_at is None else parse_instant(valid_at, "valid_at")
    cut = _cutoff(axis, t)
    _prepare(ml, after, timeout)
    facts: dict[str, AuditEntry] = {}
    with ml.db.read() as cur:
        beliefs = _beliefs(ml, cur, user_id, cut, v, key)
        if scope:
            keep = versions_in_scope(ml, cur, user_id, scope, list(beliefs))
            beliefs = {k: b for k, b in beliefs.items() if (k, b.version) in keep}
        events = ml.timetravel_queries.events(cur, user_id, key, cut)
    by_key: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        by_key.setdefault(e["key"], []).append(e)
    if scope:  # the lineage below still reads every event; the chains shown hold the scope's
        shown = {k: [e for e in chain if scope.matches(e["actor"], e["session_id"])] for k, chain in by_key.items()}
    else:
        shown = by_key
    keys = sorted(beliefs) if key is None else ([key] if shown.get(key) else [])
    for k in keys:
        chain = by_key.get(k, [])
        if trace_id is not None and not any(e["trace_id"] == trace_id for e in shown.get(k, [])):
            continue
        if source_ref is not None and not any(e["source_ref"] == source_ref for e in shown.get(k, [])):
            continue
        replaced_by: dict[int, int] = {}
        replaces: dict[int, int] = {}
        for e in chain:
            if e["replaces"] is not None and e["effect"] in ("supersede", "correct", "retract"):
                replaced_by[e["replaces"]] = e["version"]
                if e["effect"] != "retract":
                    replaces[e["version"]] = e["replaces"]
        rows = []
        for e in shown.get(k, []):
            row = history_row({**e, "replaced_by": replaced_by.get(e["version"])})
            rows.append(AuditEvent(**dict(row), effect=e["effect"]))
        belief = beliefs.get(k)
        lineage: list[int] = []
        cursor = None if belief is None else replaces.get(belief.version)
        while cursor is not None and cursor not in lineage:
            lineage.append(cursor)
            cursor = replaces.get(cursor)
        facts[k] = AuditEntry(belief=belief, replaced=lineage, chain=rows)
    return Audit(user_id=user_id, axis=axis, as_of=t, valid_at=v, facts=facts)  # type: ignore[arg-type]


# -- rendering ---------------------------------------------------------------------------------------------------
def zone(tz: str | None) -> Any:
    """The ``ZoneInfo`` for an IANA name (None -> None, i.e. UTC as stored).

    Raises:
        BadInput: field ``tz`` if the name is not a known IANA zone.
    """
    if tz is None:
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        if not tz.strip() or tz.startswith("/") or ".." in tz:
            raise ValueError(tz)
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise BadInput("tz", f"{tz!r} is not an IANA time zone", "use a name such as Europe/Paris or UTC") from None


def render_json(model: BaseModel, tz: str | None = None) -> Any:
    """``model_dump(mode="json")``, with every instant rendered in zone ``tz`` (same instants, other offsets).

    Only the models' datetime fields are converted; fact values are never touched, even if they look like dates.
    Raises :class:`BadInput` (field ``tz``) for an unknown zone.
    """
    z = zone(tz)
    if z is None:
        return model.model_dump(mode="json")

    def walk(x: Any) -> Any:
        if isinstance(x, BaseModel):
            # Python-mode fields keep datetimes as datetimes; values (Any) are JSON-decoded, never datetimes.
            data = {}
            for name, field in type(x).model_fields.items():
                value = getattr(x, name)
                if field.exclude_if is not None and field.exclude_if(value):
                    continue  # absent unless set (``erased``, ``withheld``), as in model_dump
                out_name = field.serialization_alias or field.alias or name
                data[out_name] = walk(value)
            return data
        if isinstance(x, datetime):
            return x.astimezone(z).isoformat()
        if isinstance(x, dict):
            return {k: walk(val) for k, val in x.items()}
        if isinstance(x, list):
            return [walk(val) for val in x]
        return x

    return walk(model)
