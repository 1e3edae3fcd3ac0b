"""The view models of the timeline and health pages: plain JSON-shaped dicts built from the ledger's read side.

Nothing here writes, except :func:`record_shown`, which records the disclosures a page or an export makes (a
labelled fact shown is a sensitive fact let out, as in ``context``).

Instants in a view model are ISO 8601 UTC strings of fixed width with microseconds
(``2024-03-01T09:00:00.000000Z``, :func:`iso`), so the browser compares them as strings with exactly the
ledger's microsecond rule; an open end (valid or system) is ``null``.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from ledger.schemas import check_user_id
from ledger.timeutil import OPEN, from_micros, now_utc, parse_instant, to_micros

#: how a version is drawn, in the order a version's category is decided (docs/timeline.md)
CATEGORIES = ("forgotten", "quarantined", "scheduled", "corrected", "retracted", "superseded", "contested", "contesting",
              "hedged", "current")
#: the word each category shows inside its bar (never colour alone)
CATEGORY_WORD = {"forgotten": "forgotten (shredded)", "quarantined": "quarantined", "scheduled": "scheduled", "corrected": "corrected (misreported)",
                 "retracted": "retracted", "superseded": "superseded", "contested": "contested",
                 "contesting": "disputing (not believed)", "hedged": "hedged (uncertain)", "current": "current"}
#: history statuses of events that are not versions of a value: markers in the audit, never bars
NOT_VERSIONS = ("reaffirmation", "retraction", "withdrawal")
#: the purpose recorded with each disclosure a page or an export makes
PURPOSE_PAGE = "timeline page (memledger serve http /ui)"
PURPOSE_EXPORT = "timeline export (memledger timeline --html)"
#: a statement said this long (microseconds) before the ledger recorded it counts as back-dated (imported)
IMPORTED_GAP_US = 86_400 * 1_000_000
#: how many words of a free-text memory name its row
NAME_WORDS = 8
#: ... and at most this many characters of it
NAME_CHARS = 48
#: the group a free-text memory (``memory.<hex>``, a key derived from its text) is shown in
FREE_TEXT_GROUP = "memory"


def iso(value: Any) -> str | None:
    """A datetime or micros (int) as a fixed-width ISO 8601 UTC string with microseconds; None/OPEN -> None."""
    if value is None:
        return None
    if isinstance(value, int):
        if value >= OPEN:
            return None
        value = from_micros(value)
    return value.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _marks(raw: str | None) -> dict[str, Any]:
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        return {}


def _value(raw: str | None) -> Any:
    return None if raw is None else json.loads(raw)


def category(row: dict[str, Any], now_us: int) -> str:
    """The category a version is drawn in, from its ``history_versions`` row as known now (see CATEGORIES)."""
    status, marks = row["status"], _marks(row.get("hygiene"))
    if status == "forgotten":  # `memledger forget` shredded its value and text; history keeps the placeholder
        return "forgotten"
    if row["effect"] == "quarantine" or status == "quarantined":
        return "quarantined"
    if status in ("current", "contested") and row["valid_from"] is not None and row["valid_from"] > now_us \
            and row["valid_from"] > (row["observed_at"] or row["recorded_at"]):
        return "scheduled"
    if status == "misreported":
        return "corrected"
    if status == "retracted":
        return "retracted"
    if status in ("superseded", "closed"):
        vt = row["valid_to"]
        if vt is not None and vt > now_us and (row["valid_from"] or 0) <= now_us:
            # ended only from a future instant (Paris until the scheduled move to Berlin): still current now
            return "hedged" if marks.get("hedged") else "current"
        return "superseded"
    if status == "contested":
        return "contested"
    if status == "contesting":
        return "contesting"
    if marks.get("hedged"):
        return "hedged"
    return "current"


def row_name(key: str, versions: list[dict[str, Any]]) -> str:
    """The name a row is shown under: the key, unless the key is a free-text memory's digest (``memory.<hex>``,
    ``family.anna.memory.<hex>``), which says nothing to a reader; then the first words (at most
    :data:`NAME_CHARS` characters) of its latest shown text (or value), or "withheld (LABEL)" / "forgotten
    memory" when there is none to show."""
    parts = key.split(".")
    if FREE_TEXT_GROUP not in parts[:-1]:
        return key
    for v in reversed(versions):
        said = v.get("text") or (v.get("value") if isinstance(v.get("value"), str) else None)
        if said:
            said = " ".join(said.split())
            name = " ".join(said.split(" ")[:NAME_WORDS])[:NAME_CHARS].rstrip()  # Chinese has no spaces to cut at
            return name if name == said else name + "\u2026"
    if any(v.get("withheld") for v in versions):
        return f"withheld ({next(v['withheld'] for v in versions if v.get('withheld'))})"
    return "forgotten memory" if versions else key


def group_of(key: str) -> str:
    """The attribute a row is grouped under: the key's first part (``preference`` of ``preference.drink``);
    free-text memories of anyone, the user's or a relative's, share one group."""
    parts = key.split(".")
    return FREE_TEXT_GROUP if FREE_TEXT_GROUP in parts[:-1] else parts[0]


def _activity(entry: dict[str, Any]) -> str:
    """The latest instant anything was said about a key (an event's observed time, else its recorded time): when
    the row last moved in the user's life, which for imported history is long before it was recorded."""
    return max((e["observed_at"] or e["recorded_at"] or "") for e in entry["events"]) if entry["events"] else ""


def groups(keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows grouped by attribute, the group with the latest activity first and, inside a group, the row with
    the latest activity first (ties by name): ``[{"group", "keys": [key, ...], "last_activity"}]``."""
    by: dict[str, list[dict[str, Any]]] = {}
    for k in keys:
        by.setdefault(k["group"], []).append(k)
    out = []
    for name, ks in by.items():
        ks = sorted(ks, key=lambda k: k["name"].lower())
        ks.sort(key=lambda k: k["last_activity"], reverse=True)
        out.append({"group": name, "keys": [k["key"] for k in ks], "last_activity": ks[0]["last_activity"]})
    out.sort(key=lambda g: g["group"])
    out.sort(key=lambda g: g["last_activity"], reverse=True)
    return out


def default_axis(rows: list[dict[str, Any]]) -> str:
    """``"observed"`` when the history was imported (most statements said more than a day before the ledger
    recorded them: on system time they all sit within the seconds of the import), else ``"system"``."""
    said = [r for r in rows if r.get("observed_at") is not None and r.get("recorded_at") is not None]
    back = sum(1 for r in said if r["recorded_at"] - r["observed_at"] > IMPORTED_GAP_US)
    return "observed" if rows and back * 2 > len(rows) else "system"


def believed_at(view: dict[str, Any], at: str, axis: str = "system") -> dict[str, dict[str, Any]]:
    """``{key: {"version", "status"}}`` believed at instant ``at`` (an :func:`iso` string) about the same valid
    instant: the rule the page's script applies (timeline.js ``heldAt``), written once more in Python so a test can
    hold both against :meth:`MemoryLedger.believed` (as-of inclusive, valid time half-open).

    ``axis="system"``: the bitemporal row held at ``at`` (``recorded_from <= at < recorded_to``). ``"observed"``:
    per key, the row held just before the key's first event observed after ``at`` (``position_from < F <=
    position_to``, F that event's log position, or no bound if none), as ``believed --axis observed``.
    """
    out = {}
    for k in view["keys"]:
        later = [e["position"] for e in k["events"] if e["observed_at"] is not None and e["observed_at"] > at]
        first_later = min(later) if later else None
        for t in k["timeline"]:
            if axis == "system":
                held = t["recorded_from"] <= at and (t["recorded_to"] is None or at < t["recorded_to"])
            else:
                held = (first_later is None and t["position_to"] is None) or (
                    first_later is not None and t["position_from"] < first_later
                    and (t["position_to"] is None or first_later <= t["position_to"]))
            if held and t["valid_from"] <= at and (t["valid_to"] is None or at < t["valid_to"]):
                out[k["key"]] = {"version": t["version"], "status": t["status"]}
                break
    return out


def user_view(ml: Any, user_id: str, *, allow_sensitive: frozenset[str] | set[str] = frozenset(),
              now: Any = None, agent_id: str | None = None, run_id: str | None = None) -> dict[str, Any]:
    """The timeline of one user: one entry per key with its versions, bitemporal rows and events; the sessions
    with their messages; the disclosures; the ticks of the system-time slider.

    Args:
        ml: an open :class:`~memledger.api.MemoryLedger` (or Store).
        user_id: whose memory.
        allow_sensitive: labels whose facts are shown; a labelled version with another label is shown withheld
            (value and text ``None``, ``withheld`` = its label).
        now: the instant the page is drawn at (default the current time, UTC): scheduled facts, the slider's end.
        agent_id, run_id: only what was written by that agent / in that run (memledger/scopes.py), as a scoped
            ``audit`` shows it: the events recorded in the scope, the keys they touch, their disclosures, the run's
            session (a message records no agent: an agent's timeline has no session); people and relations are not
            written by scope, so a scoped timeline leaves them out.

    Returns a JSON-shaped dict (instants as :func:`iso` strings): ``user_id``, ``generated_at``, ``erased``
    (then ``erasure`` and nothing else), ``keys``, ``sessions``, ``people`` (the relation versions), ``disclosures``,
    ``ticks`` and ``observed_ticks`` (the slider's stops on each axis), ``default_axis`` (:func:`default_axis`),
    ``groups`` (:func:`groups`: the order rows are drawn in), ``shown`` (the ``(key, version, label)`` of each
    labelled version shown, for :func:`record_shown`). Each key carries its ``name`` (:func:`row_name`), ``group``
    (:func:`group_of`) and ``last_activity``.

    Raises:
        BadInput: an invalid ``user_id``, ``now``, ``agent_id`` or ``run_id``.
    """
    from ..scopes import check_scope

    user_id = check_user_id(user_id)
    scope = check_scope(agent_id, run_id)
    now_dt = now_utc() if now is None else parse_instant(now, "now")
    now_us = to_micros(now_dt)
    erased_at = ml.erased_at(user_id)
    if erased_at is not None:
        return {"user_id": user_id, "generated_at": iso(now_dt), "erased": True,
                "erasure": erasure_receipt(ml, user_id, erased_at), "keys": [], "sessions": [], "disclosures": [],
                "ticks": [], "observed_ticks": [], "shown": [], "people": [], "groups": [],
                "default_axis": "system"}
    ml.before_read(None, 10.0)
    tt = ml.timetravel_queries.tt
    with ml.db.read() as cur:
        rows = ml.history_projection.versions(cur, user_id)
        cur.execute(f"SELECT key, version, valid_from, valid_to, recorded_from, recorded_to, status, position_from, "
                    f"position_to FROM {tt} "
                    "WHERE user_id = ? ORDER BY key, position_from", (user_id,))
        timeline = cur.fetchall()
        proj = getattr(ml, "disclosures_projection", None)
        disclosures = [] if proj is None else proj.rows(cur, user_id)
    if scope:  # the events recorded in the scope, and the bitemporal rows and disclosures of their versions
        rows = [r for r in rows if scope.matches(r["actor"], r["session_id"])]
        kept = {(r["key"], r["version"]) for r in rows}
        timeline = [t for t in timeline if (t[0], t[1]) in kept]
        disclosures = [d for d in disclosures if (d["key"], d["version"]) in kept]
    by_key: dict[str, dict[str, Any]] = {}
    for r in rows:
        by_key.setdefault(r["key"], {"key": r["key"], "versions": [], "events": [], "timeline": []})
    first_range: dict[tuple[str, int], tuple[int, int]] = {}
    for key, version, vf, vt, rf, rt, status, pf, pt in timeline:
        first_range.setdefault((key, version), (vf, vt))
        by_key.setdefault(key, {"key": key, "versions": [], "events": [], "timeline": []})["timeline"].append(
            {"version": version, "valid_from": iso(vf), "valid_to": iso(vt), "recorded_from": iso(rf),
             "recorded_to": iso(rt), "status": status, "position_from": int(pf),
             "position_to": None if int(pt) >= OPEN else int(pt)})
    shown: list[tuple[str, int, str]] = []
    for r in rows:
        label = r["sensitivity"]
        withheld = label if label is not None and label not in allow_sensitive else None
        event = {
            "version": r["version"], "kind": r["kind"], "effect": r["effect"], "status": r["status"],
            "value": None if withheld else _value(r["value_json"]), "text": None if withheld else r["text"],
            "withheld": withheld, "sensitivity": label, "reason": None if withheld else r["reason"],
            "recorded_at": iso(r["recorded_at"]), "observed_at": iso(r["observed_at"]),
            "valid_from": iso(r["valid_from"]), "valid_to": iso(r["valid_to"]),
            "source": r["source"], "source_ref": r["source_ref"], "session_id": r["session_id"],
            "actor": r["actor"], "trace_id": r["trace_id"], "derived_from": json.loads(r["derived_from"] or "[]"),
            "confidence": r["confidence"], "replaces": r["replaces"], "replaced_by": r["replaced_by"],
            "position": r["position"], "event_id": r["event_id"], "hygiene": _marks(r.get("hygiene")),
        }
        entry = by_key[r["key"]]
        entry["events"].append(event)
        if r["status"] in NOT_VERSIONS or r["effect"] == "forget":  # the forget event itself is no version
            continue
        if label is not None and withheld is None:
            shown.append((r["key"], r["version"], label))
        # the bar: the valid range as known now; a range a correction or retraction emptied is drawn where it
        # stood when first recorded (its first bitemporal row), or from when it was said
        vf, vt = r["valid_from"], r["valid_to"]
        if vf is None or (vt is not None and vt <= vf):
            vf, vt = first_range.get((r["key"], r["version"]), (r["observed_at"] or r["recorded_at"], OPEN))
        cat = category(r, now_us)
        # a range a retraction closed at a past instant ("I moved away on 1 May") ended; nothing replaced it
        word = "ended" if cat == "superseded" and r["status"] == "closed" else CATEGORY_WORD[cat]
        entry["versions"].append({**event, "category": cat, "word": word,
                                  "bar_from": iso(vf), "bar_to": iso(vt)})
    sessions = ml.sessions(user_id)
    messages = ml.messages(user_id)
    if scope:  # a message records its run (its session) but no agent
        sessions = [] if scope.agent_id is not None else [x for x in sessions if x["session_id"] == scope.run_id]
        messages = [] if scope.agent_id is not None else [m for m in messages if m["session_id"] == scope.run_id]
    by_session: dict[str, list[dict[str, Any]]] = {}
    for m in messages:
        by_session.setdefault(m["session_id"], []).append(
            {"message_id": m.get("message_id"), "role": m.get("role"), "speaker": m.get("speaker"),
             "text": m.get("text"), "observed_at": iso(m.get("observed_at")), "recorded_at": iso(m.get("recorded_at"))})
    session_rows = [{"session_id": s["session_id"], "task": s.get("task"), "status": s.get("status"),
                     "started_at": iso(s.get("started_at")), "ended_at": iso(s.get("ended_at")),
                     "last_at": iso(s.get("last_at")), "messages": by_session.pop(s["session_id"], [])}
                    for s in sessions]
    for sid, ms in by_session.items():  # messages kept by an open --no-memory session
        session_rows.append({"session_id": sid, "task": None, "status": "no memory", "started_at":
                             ms[0]["observed_at"], "ended_at": None, "last_at": ms[-1]["observed_at"], "messages": ms})
    for entry in by_key.values():
        entry["name"] = row_name(entry["key"], entry["versions"] or entry["events"])
        entry["group"] = group_of(entry["key"])
        entry["last_activity"] = _activity(entry)
    keys = [by_key[k] for k in sorted(by_key)]
    ticks = _ticks(timeline, now_us)
    observed_ticks = _observed_ticks(rows, timeline, now_us)
    people = [] if scope else _people(ml, user_id, allow_sensitive, shown)
    return {"user_id": user_id, "generated_at": iso(now_dt), "erased": False, "erasure": None,
            "scope": {k: v for k, v in (("agent_id", scope.agent_id), ("run_id", scope.run_id)) if v} or None,
            "keys": keys, "groups": groups(keys), "default_axis": default_axis(rows),
            "sessions": session_rows, "people": people,
            "disclosures": [{"key": d["key"], "version": d["version"], "sensitivity": d["sensitivity"],
                             "recorded_at": iso(d["recorded_at"]), "position": d["position"],
                             "session_id": d["session_id"], "purpose": d["purpose"], "trace_id": d["trace_id"]}
                            for d in disclosures],
            "ticks": ticks, "observed_ticks": observed_ticks, "shown": shown}


def _people(ml: Any, user_id: str, allow_sensitive: Any, shown: list[tuple[str, int, str]]) -> list[dict[str, Any]]:
    """The people lane: each relation version that made a valid range (docs/relations.md), as known now, with
    its entity's name and sentence; a labelled one not allowed keeps its bar with ``withheld`` and no name. Each
    labelled one shown is added to ``shown`` (recorded as a disclosure with the page's)."""
    proj = getattr(ml, "relations_projection", None)
    if proj is None:
        return []
    from ..relations import hidden_entities
    from ..sensitivity import Grant

    with ml.db.read() as cur:
        names = {r["entity_id"]: r["name"] for r in proj.entities(cur, user_id)}
        rows = proj.versions(cur, user_id)
    secret, _ = hidden_entities(ml, user_id, Grant(frozenset(allow_sensitive)))
    out = []
    for r in rows:
        if r["effect"] not in ("new", "supersede", "backfill", "correct") or r["valid_from"] is None:
            continue
        label = r["sensitivity"]
        withheld = (label if label is not None and label not in allow_sensitive
                    else secret.get(r["subject"]) or secret.get(r["object"]))
        if label is not None and withheld is None:
            shown.append((r["key"], int(r["version"]), label))
        subject = "user" if r["subject"] == "self" else names.get(r["subject"], "?")
        out.append({"key": r["key"], "version": int(r["version"]), "relation_type": r["relation_type"],
                    "subject": None if withheld else subject, "entity": None if withheld else names.get(r["object"]),
                    "text": None if withheld else r["text"], "status": r["status"], "withheld": withheld,
                    "valid_from": iso(r["valid_from"]), "valid_to": iso(r["valid_to"]), "source": r["source"],
                    "recorded_at": iso(r["recorded_at"]), "position": int(r["position"])})
    return out


def _ticks(timeline: list[tuple], now_us: int) -> list[str]:
    """The slider's stops: every instant from the first recording to ``now`` at which a belief can change (a
    bitemporal row's recorded or valid bound), then ``now``. Between two stops every answer stays the same."""
    starts = [row[4] for row in timeline]
    if not starts:
        return [iso(now_us)]
    lo = min(starts)
    hi = max(now_us, max(starts))
    stops = set()
    for _k, _v, vf, vt, rf, rt, *_rest in timeline:
        for x in (vf, vt, rf, rt):
            if lo <= x <= hi:
                stops.add(x)
    stops.add(hi)
    return [iso(x) for x in sorted(stops)]


def _observed_ticks(rows: list[dict[str, Any]], timeline: list[tuple], now_us: int) -> list[str]:
    """The slider's stops on the observed axis: every instant from the first statement to ``now`` at which a belief
    can change (an event's ``observed_at``, a bitemporal row's valid bound), then ``now``."""
    said = [r["observed_at"] for r in rows if r["observed_at"] is not None]
    if not said:
        return [iso(now_us)]
    lo, hi = min(said), max(now_us, max(said))
    stops = {x for x in said if x <= hi} | {hi}
    for _k, _v, vf, vt, *_rest in timeline:
        stops |= {x for x in (vf, vt) if lo <= x <= hi}
    return [iso(x) for x in sorted(stops)]


def erasure_receipt(ml: Any, user_id: str, erased_at: datetime) -> dict[str, Any]:
    """What the ledger still says about an erased user: when, the tombstone's log position, that the key is gone."""
    position = None
    with ml.db.read() as cur:
        cur.execute("SELECT position FROM erased_subjects WHERE user_id = ?", (user_id,))
        row = cur.fetchone()
        if row is not None:
            position = int(row[0])
    return {"user_id": user_id, "erased_at": iso(erased_at), "position": position, "key_destroyed": True,
            "note": "Everything about this user was erased (their key destroyed, every projection purged); "
                    "nothing about them is kept or shown."}


def record_shown(ml: Any, view: dict[str, Any], purpose: str) -> list[int]:
    """Record one disclosure per labelled version the view shows (``SensitiveFactIncluded``, as ``context`` does);
    returns the log positions (empty when nothing labelled is shown)."""
    if not view.get("shown"):
        return []
    return ml.record_disclosures(view["user_id"], [tuple(x) for x in view["shown"]], purpose=purpose)


# -- health -------------------------------------------------------------------------------------------------------
def health_view(ml: Any, *, points: int = 12, now: Any = None, top: int = 10) -> dict[str, Any]:
    """The store's memory health over time and the users with the most conflicts.

    ``series``: ``points`` instants evenly spaced from the first statement (its ``observed_at``: when it was said)
    to ``now`` (UTC), each with ``memledger stats --now`` at that instant (docs/hygiene.md: the facts said by then,
    judged then): ``facts``, ``freshness_7d``, ``conflict_rate``, ``correction_rate_per_1k_messages``,
    ``quarantined``, ``due``. ``window``: the first and last instant and the step in seconds. ``top_conflicts``:
    users by contested beliefs held now, then by disputes ever recorded; ``users``: how many users hold a belief
    now, and ``user_ids``: who (sorted), so the page links to each one's timeline.

    Raises:
        BadInput: ``points`` outside 2..200, or a bad ``now``.
    """
    from ledger.errors import BadInput

    if not isinstance(points, int) or isinstance(points, bool) or not 2 <= points <= 200:
        raise BadInput("points", f"{points!r} is not from 2 to 200", "ask for 2 to 200 points")
    now_dt = now_utc() if now is None else parse_instant(now, "now")
    now_us = to_micros(now_dt)
    ml.before_read(None, 10.0)
    tv, tt = ml.history_projection.table("versions"), ml.timetravel_queries.tt
    with ml.db.read() as cur:
        cur.execute(f"SELECT MIN(COALESCE(observed_at, recorded_at)) FROM {tv}")
        first = cur.fetchone()[0]
        cur.execute(f"SELECT user_id, SUM(CASE WHEN status = 'contested' THEN 1 ELSE 0 END), COUNT(*) FROM {tt} "
                    "WHERE position_to = ? GROUP BY user_id", (OPEN,))
        held = {u: (int(c or 0), int(n)) for u, c, n in cur.fetchall()}
        cur.execute(f"SELECT user_id, COUNT(*) FROM {tv} WHERE effect = 'contest' GROUP BY user_id")
        contests = {u: int(n) for u, n in cur.fetchall()}
    series = []
    step = 0.0
    if first is not None:
        start = min(int(first), now_us)
        step = (now_us - start) / (points - 1)
        for i in range(points):
            at = int(start + step * i) if i < points - 1 else now_us
            s = ml.stats(now=from_micros(at))
            series.append({"at": iso(at), "facts": s.facts, "freshness_7d": s.freshness_7d,
                           "conflict_rate": s.conflict_rate,
                           "correction_rate_per_1k_messages": s.correction_rate_per_1k_messages,
                           "quarantined": s.quarantined, "due": s.due})
    users = sorted(set(held) | set(contests), key=lambda u: (-held.get(u, (0, 0))[0], -contests.get(u, 0), u))
    top_rows = [{"user_id": u, "contested_now": held.get(u, (0, 0))[0], "beliefs_now": held.get(u, (0, 0))[1],
                 "contests_recorded": contests.get(u, 0)} for u in users
                if held.get(u, (0, 0))[0] or contests.get(u, 0)][:top]
    return {"generated_at": iso(now_dt), "series": series, "top_conflicts": top_rows, "users": len(held),
            "user_ids": sorted(held),
            "window": None if not series else {"from": series[0]["at"], "to": series[-1]["at"],
                                                "step_seconds": round(step / 1e6, 3)}}


__all__ = ["CATEGORIES", "CATEGORY_WORD", "PURPOSE_EXPORT", "PURPOSE_PAGE", "believed_at", "category",
           "default_axis", "erasure_receipt", "group_of", "groups", "health_view", "iso", "record_shown", "row_name",
           "user_view"]
