"""The plain reads: a user's current profile, a fact's history, the user's time zone.

Each is a function of a :class:`~memledger.store.Store`; ``MemoryLedger.profile`` / ``history`` are these.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ledger.errors import BadInput
from ledger.schemas import FactView, HistoryRow, Profile, Receipt, RoleContext
from ledger.timeutil import from_micros, now_utc, to_micros

from .store import Store

#: Profile fact keys read as the user's IANA time zone, first found wins (docs/sessions.md).
TZ_KEYS: tuple[str, ...] = ("profile.timezone", "profile.time_zone", "profile.tz", "timezone")


def split_scheduled(store: Store, cur: Any, user_id: str, rows: list[dict[str, Any]],
                    now_us: int) -> list[dict[str, Any]]:
    """The current part of profile rows (projections/profile.py ``rows``) at ``now_us`` (micros), by key.

    A row is scheduled (left out) when its ``valid_from`` is after ``now_us`` and after the instant it was said (a statement
    about the future: "check-up next Friday"); the version of its key covering ``now_us`` (a value it will
    supersede), if any, is current in its place, as a profile-shaped row with status ``current``. A row said after
    ``now_us`` and true from when it was said (``context --now`` in the past) is not scheduled: it is simply later
    than ``now``. :func:`facts_at` gives every scheduled version, not only a key's head."""
    current = []
    for r in rows:
        if r["valid_from"] <= now_us:
            current.append(r)
            continue
        said = store.history_projection.observed_at_of(cur, user_id, r["key"], r["version"])
        if said is None or r["valid_from"] <= said:
            current.append(r)
            continue
        before = store.history_projection.covering(cur, user_id, r["key"], now_us)
        if before is not None:
            current.append({**{k: before.get(k) for k in r}, "status": "current", "valid_to": before["valid_to"]})
    current.sort(key=lambda r: r["key"])
    return current


def _value(value_json: str | None) -> Any:
    return None if value_json is None else json.loads(value_json)


def profile(store: Store, user_id: str, *, after: int | Receipt | Iterable[Receipt] | None = None,
            timeout: float = 10.0, now: Any = None, agent_id: str | None = None,
            run_id: str | None = None) -> Profile:
    """The current facts of ``user_id`` (``memledger profile USER --json``).

    ``after``: a receipt (or its position): answer only once the projections include it (see :meth:`wait_for`;
    raises NotCaughtUp after ``timeout`` seconds). ``now`` (an aware datetime; default the clock): the instant that
    decides which facts are scheduled rather than current (``context --now``: a fact scheduled for 1 June is current
    in a context for 2 June). ``agent_id`` / ``run_id``: only the facts whose current version was written by that
    agent / in that run (memledger/scopes.py; each named scope must match).
    """
    from ledger.schemas import check_user_id

    from .scopes import check_scope, versions_in_scope

    user_id = check_user_id(user_id)
    scope = check_scope(agent_id, run_id)
    store.before_read(after, timeout)
    with store.db.read() as cur:
        # a fact scheduled for later is not current yet (memledger/hygiene.py); what it will replace still is
        # the latest belief per key, as the profile has always been: a context for a past ``now`` still shows what
        # was said later, marked "after now" (memledger/context.py); only the hygiene counts (memledger/hygiene.py)
        # read the facts as said by then
        rows = split_scheduled(store, cur, user_id, store.profile_projection.rows(cur, user_id),
                                  to_micros(now if now is not None else now_utc()))
        if scope:  # one WHERE on the history projection's actor / session_id columns
            keep = versions_in_scope(store, cur, user_id, scope, [r["key"] for r in rows])
            rows = [r for r in rows if (r["key"], r["version"]) in keep]
    from ledger.attributes import said

    facts = {}
    for r in rows:
        value = _value(r["value_json"])
        s = said(r["key"], r["text"], value=value)
        facts[r["key"]] = FactView(
            value=value, text=r["text"], version=r["version"],
            recorded_at=from_micros(r["recorded_at"]), valid_from=from_micros(r["valid_from"]),
            valid_to=from_micros(r["valid_to"]), source=r["source"], confidence=r["confidence"],
            status=r["status"], hedged=bool(json.loads(r.get("hygiene") or "{}").get("hedged")),
            attribute=s.attribute, extracted_value=s.value, ended=s.ended,
        )
    return Profile(user_id=user_id, facts=facts)

def history(store: Store, user_id: str, key: str | None = None, *,
            after: int | Receipt | Iterable[Receipt] | None = None, timeout: float = 10.0,
            agent_id: str | None = None, run_id: str | None = None) -> list[HistoryRow]:
    """Every event of the user's facts (or one key's), in log order (``memledger history --json``).

    ``after``: as for :meth:`profile`. ``agent_id`` / ``run_id``: only the events recorded by that agent / in that
    run (memledger/scopes.py).
    """
    from ledger.schemas import check_key, check_user_id

    from .scopes import check_scope

    user_id = check_user_id(user_id)
    scope = check_scope(agent_id, run_id)
    if key is not None:
        key = check_key(key)
    store.before_read(after, timeout)
    with store.db.read() as cur:
        rows = store.history_projection.versions(cur, user_id, key)
    return [history_row(r) for r in rows if scope.matches(r["actor"], r["session_id"])]



def user_timezone(store: Store, user_id: str) -> str:
    """The user's IANA zone from their profile (first of :data:`TZ_KEYS` that names a valid zone), else "UTC"."""
    from .timefmt import to_local

    facts = profile(store, user_id).facts
    for key in TZ_KEYS:
        f = facts.get(key)
        if f is not None and isinstance(f.value, str):
            try:
                to_local(now_utc(), f.value)
            except BadInput:
                continue
            return f.value.strip()
    return "UTC"


def history_row(r: dict[str, Any]) -> HistoryRow:
    """A ``history_versions`` row (see projections/history.py) as the public :class:`HistoryRow`."""
    return HistoryRow(
        key=r["key"], value=_value(r["value_json"]), kind=r["kind"], reason=r["reason"], version=r["version"],
        recorded_at=from_micros(r["recorded_at"]), valid_from=from_micros(r["valid_from"]),
        valid_to=from_micros(r["valid_to"]), source=r["source"], source_ref=r["source_ref"],
        position=r["position"], event_id=r["event_id"], text=r["text"], observed_at=from_micros(r["observed_at"]),
        status=r["status"], replaces=r["replaces"], replaced_by=r["replaced_by"], confidence=r["confidence"],
        session_id=r["session_id"], actor=r["actor"], trace_id=r["trace_id"],
        derived_from=json.loads(r["derived_from"] or "[]"),
        role=None if r["role"] is None else RoleContext(**json.loads(r["role"])),
        sensitivity=r.get("sensitivity"),
    )


def people(ml: Store, user_id: str) -> list[Any]:
    """The user's entities with the ties they hold or held towards the user (:class:`ledger.mentions.Known`);
    none without the relations projection."""
    proj = getattr(ml, "relations_projection", None)
    if proj is None:
        return []
    with ml.db.read() as cur:
        return proj.known(cur, user_id)


def identity_rows(ml: Store, user_id: str) -> list[tuple[str, str, int, bool]]:
    """The user's identity links true now (memledger/identity.py): ``(other user id, relation type, valid_from in
    microseconds, erased)``; none without the relations projection."""
    proj = getattr(ml, "relations_projection", None)
    if proj is None:
        return []
    with ml.db.read() as cur:
        rows = proj.identity_links(cur, user_id, to_micros(now_utc()))
    keys = getattr(ml, "keystore", None)
    return [(them, t, vf, keys is not None and keys.is_destroyed(them)) for them, t, vf in rows]


def same_person(ml: Store, user_id: str) -> list[str]:
    """The user ids confirmed as the same person as ``user_id`` (``identity link --confirmed``) and not erased:
    the users a search of ``user_id`` also reads (memledger/identity.py)."""
    from ledger.relations import IDENTITY_TYPES

    return sorted(them for them, t, _, erased in identity_rows(ml, user_id) if t == IDENTITY_TYPES[0] and not erased)
