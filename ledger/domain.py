"""The domain: one :class:`Fact` aggregate per (user_id, key), its events, and the belief policy.

This module is where the bitemporal rules live (docs/time-travel.md and docs/corrections.md cite it). A fact's
stream holds *versions*: each assertion of a new value, and each correction, is a version with a valid range
``[valid_from, valid_to)``. The aggregate keeps, for every version, its valid range *as known now*; commands decide
what an event does (the policy) and the event records that decision in ``changes``, so that projections apply
decisions rather than re-derive them, and an audit shows what the ledger decided at the time.

Policy (the heart of it; DESIGN.md "change of mind vs correction"):

* **supersede** — a new value whose ``valid_from`` is at or after the head's: the head's valid range closes at the
  new ``valid_from`` ("used to like blue"); the new version becomes the head.
* **backfill** — a new value whose ``valid_from`` is before the head's (imported history recorded late): it takes
  the gap in valid time before its successor and does not displace the head.
* **reaffirm** — the same value again: recorded (an event, for the audit trail), the belief unchanged. A
  reaffirmation by the user clears a contest.
* **contest** — an ``agent_inference`` or ``external_import`` with a different value than a ``user_statement`` head
  (an assert that would supersede it, or a correct), whatever its confidence; or an ``agent_inference`` with lower
  confidence than a ``user_statement`` head: recorded, never believed; the head is marked contested until the user
  reaffirms or changes it. ``op="contest"`` records the same on purpose (remember's ``conflict``).
* **correct** — "I was born in 1995, not 1990": the head was never true. The new value takes over the head's whole
  valid range; the old version's range becomes empty (history keeps it as *misreported*).
* **withdraw** — ``retract-source``: the named ``source_ref`` stops counting as support on this fact (effect
  ``withdraw_source``; nothing else changes; memledger/withdrawal.py).
* **retract** — without ``valid_to``: the head is withdrawn entirely (it was a misunderstanding); with ``valid_to``:
  the head stopped being true at that instant (its range closes there; a ``valid_to`` not after the head's
  ``valid_from`` is refused). Either way there is no current value. An ``agent_inference`` or ``external_import``
  cannot retract a ``user_statement`` head (refused: the agent's view is recorded by an assert, which contests).

A sensitivity label sticks to the fact: a later version recorded without one (a correction, a change of mind)
keeps the label of the fact's latest labelled version, so correcting a health fact does not make it searchable.

Valid ranges are half-open and only ever *narrowed* by later events (closing, or emptied to ``[vf, vf)``), never
widened: system time moves forward, and what we once believed stays visible to as-of queries through the history
projection's bitemporal rows.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from eventsourcing.domain import Aggregate
from uuid_utils import uuid7

from . import hygiene
from .errors import BadInput, IdempotencyMismatch
from .schemas import FactCommand
from .slots import REGISTRY

#: Sources that never displace a ``user_statement`` head (they contest it).
NON_USER_SOURCES = ("agent_inference", "external_import")

#: Namespace of the deterministic stream ids: uuid5(NAMESPACE, "fact\x1f<user_id>\x1f<key>").
NAMESPACE = uuid.UUID("6f0c1f8e-5a54-4b7a-9d43-1d6b0a3e2c11")


def fact_id(user_id: str, key: str) -> uuid.UUID:
    """The stream (aggregate) id of the fact (user_id, key): deterministic, so any process finds the same stream."""
    return uuid.uuid5(NAMESPACE, f"fact\x1f{user_id}\x1f{key}")


def new_event_id() -> str:
    """A fresh event id: a UUIDv7 (RFC 9562) string, so ids sort in the order they were made.

    Why not uuid4: the history projection's unique index on ``event_id`` then takes every new id at its right
    edge, instead of at a random leaf of a B-tree that outgrows SQLite's page cache (a random id dirtied one index
    page per event and made appends slow down as the store grew; scripts/bench_growth.py). ``uuid_utils`` makes
    it faster than ``uuid.uuid4``; ids stay unique (74 random bits per millisecond) and parse as ``uuid.UUID``.
    """
    return str(uuid7())


def _iso(dt: datetime | None) -> str | None:
    return None if dt is None else dt.isoformat()


def _dt(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def new_key_allowed(key: str) -> bool:
    """A key may open a new stream only in lowercase (keys compare as written: ``Preference.Food`` and
    ``preference.food`` would be two facts). Existing streams keep their keys."""
    return key == key.lower()


@dataclass
class Version:
    """What the aggregate remembers of one version: enough to decide the next command."""

    version: int
    value_json: str | None  # None once forgotten
    valid_from: datetime
    valid_to: datetime | None  # as known now; None = open
    source: str
    confidence: float
    status: str  # current | contested | superseded | closed | misreported | retracted
    hedged: bool = False

    def covers(self, t: datetime) -> bool:
        return self.valid_from <= t and (self.valid_to is None or t < self.valid_to)

    @property
    def live(self) -> bool:
        """Has a non-empty valid range as known now."""
        return self.valid_to is None or self.valid_to > self.valid_from


@dataclass
class Decision:
    kind: str
    effect: str
    replaces: int | None
    valid_from: datetime | None
    valid_to: datetime | None
    changes: list[dict[str, Any]] = field(default_factory=list)
    #: the confidence recorded (None: the command's own) and the hygiene mark (ledger/hygiene.py), if any
    confidence: float | None = None
    hygiene: dict[str, Any] | None = None
    derived_from: list[str] = field(default_factory=list)


class Fact(Aggregate):
    """The stream of one fact (user_id, key). Its version numbers are the aggregate's versions (1, 2, ...)."""

    TOPIC = "memledger:Fact"

    class Event(Aggregate.Event):
        """Base of the fact events; every field is part of the stored schema (explicit TOPICs, class_version)."""

        TOPIC = "memledger:Fact.Event"
        #: Schema version of the stored state (eventsourcing stores it as ``class_version`` when > 1, and its
        #: mapper runs ``upcast_v1_v2`` ... on older states when decoding; see docs/rebuild.md, "Upcasting").
        class_version = 4

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            """v1 -> v2, in place: v1 stored the JSON *value* itself as ``value`` (v2: ``value_json``, its canonical
            JSON text, what projections store without re-encoding) and had no ``role`` nor ``sensitivity``.

            The same canonical JSON as commands write today, so a fact recorded under v1 projects exactly as if
            recorded now (tests/test_upcasting.py, on the v1 fixture database in tests/fixtures/).
            """
            from .schemas import canonical_json

            if "value" in state:
                value = state.pop("value")
                state["value_json"] = None if value is None else canonical_json(value)
            state.setdefault("role", None)
            state.setdefault("sensitivity", None)

        @staticmethod
        def upcast_v2_v3(state: dict[str, Any]) -> None:
            """v2 -> v3, in place: v3 added ``hygiene`` (the policy's hedged / quarantined / correction mark,
            ledger/hygiene.py); events recorded before it carry none."""
            state.setdefault("hygiene", None)

        @staticmethod
        def upcast_v3_v4(state: dict[str, Any]) -> None:
            """v3 -> v4, in place: v4 added ``fact_key_id``, the per-fact key the event's content is encrypted with
            (ledger/crypto.py, "Per-fact keys"); events recorded before it have none: their content is under the
            user's key, and ``forget`` refuses them (erasing the user still shreds them)."""
            state.setdefault("fact_key_id", None)

        user_id: str
        key: str
        event_id: str
        kind: str
        effect: str
        value_json: str | None
        text: str | None
        reason: str | None
        observed_at: datetime | None
        valid_from: datetime | None
        valid_to: datetime | None
        source: str
        source_ref: str | None
        session_id: str | None
        actor: str | None
        trace_id: str | None
        derived_from: list[str]
        confidence: float
        role: dict[str, Any] | None
        sensitivity: str | None
        idempotency_key: str | None
        command_fingerprint: str | None
        replaces: int | None
        changes: list[dict[str, Any]]
        hygiene: dict[str, Any] | None
        fact_key_id: str | None

        def mutate(self, aggregate: Fact | None) -> Fact | None:  # type: ignore[override]
            # The first event of a stream is an ordinary assertion, not a separate "Created" event (that would
            # double the events of a ledger made mostly of one-version facts), so build the shell here.
            if aggregate is None:
                aggregate = Fact.shell(self.originator_id, self.timestamp)
            return super().mutate(aggregate)

        def apply(self, aggregate: Fact) -> None:
            aggregate.on_event(self)

    class FactAsserted(Event):
        TOPIC = "memledger:FactAsserted"

    class FactCorrected(Event):
        TOPIC = "memledger:FactCorrected"

    class FactRetracted(Event):
        TOPIC = "memledger:FactRetracted"

    class FactForgotten(Event):
        """``memledger forget``: the placeholder left on the fact's stream when versions were shredded (their
        per-fact keys destroyed). Kind ``forgotten``, effect ``forget``; ``forgotten`` lists the versions, ``actor``
        says by whom, the timestamp when (UTC); ``derived_from`` names the forgotten events. It carries no content
        (value, text, reason and fingerprint are None), so nothing of it is encrypted. ``replaces`` is the head
        version when the head was forgotten (the fact then has no current value); ``changes`` empty the valid
        ranges of forgotten versions (status ``forgotten``), so no belief rests on them from now on.
        """

        TOPIC = "memledger:FactForgotten"
        forgotten: list[int]

    # -- state -------------------------------------------------------------------------------------------------
    @classmethod
    def shell(cls, aggregate_id: uuid.UUID, timestamp: datetime) -> Fact:
        """A fact with no events yet (version 0)."""
        agg = cls.__new__(cls)
        agg.__base_init__(originator_id=aggregate_id, originator_version=0, timestamp=timestamp)
        agg.versions = {}
        agg.head = None
        agg.idempotency = {}
        agg.user_id = None
        agg.key = None
        agg.quarantined = {}
        agg.corrections = 0
        return agg

    versions: dict[int, Version]
    head: int | None
    idempotency: dict[str, tuple[int, str, str, str, str]]  # key -> (version, event_id, fingerprint, kind, effect)

    def on_event(self, e: Fact.Event) -> None:
        self.user_id, self.key = e.user_id, e.key
        version = e.originator_version
        marks = getattr(e, "hygiene", None) or {}
        if e.effect in ("new", "supersede", "backfill", "correct"):
            # value_json is None for a version decoded after forget shredded it (ledger/crypto.py)
            assert e.valid_from is not None
            status = "superseded" if e.effect == "backfill" else "current"
            self.versions[version] = Version(
                version, e.value_json, e.valid_from, e.valid_to, e.source, e.confidence, status,
                bool(marks.get("hedged")),
            )
        if e.effect == "quarantine":
            self.quarantined[version] = {"value_json": e.value_json, "session_id": e.session_id,
                                         "source_ref": e.source_ref, "observed_at": e.observed_at,
                                         "event_id": e.event_id, "released": False}
        if marks.get("releases") in self.quarantined:
            self.quarantined[marks["releases"]]["released"] = True
        if e.effect == "correct" and e.source != "system_feedback":
            self.corrections += 1  # unlink's correction back (system_feedback) undoes a decision: not counted
        elif e.effect in ("new", "supersede"):
            self.corrections = 0  # a change of mind starts a new value: the old one's misreports do not count against it
        for ch in e.changes:
            v = self.versions[ch["version"]]
            v.valid_from = _dt(ch["valid_from"])  # type: ignore[assignment]
            v.valid_to = _dt(ch["valid_to"])
            v.status = ch["status"]
        if e.effect in ("new", "supersede", "correct"):
            self.head = version
        elif e.effect == "retract":
            self.head = None
        elif e.effect == "forget":
            for v in e.forgotten:
                if v in self.versions:
                    self.versions[v].value_json = None
                self.quarantined.pop(v, None)  # a shredded statement can no longer be released
            if self.head in e.forgotten:
                self.head = None
        if e.sensitivity:
            self.label = e.sensitivity  # the latest label of the stream, inherited by later unlabelled versions
        if e.idempotency_key:
            self.idempotency[e.idempotency_key] = (
                version, e.event_id, e.command_fingerprint or "", e.kind, e.effect,
            )

    # -- policy ------------------------------------------------------------------------------------------------
    def current(self) -> Version | None:
        """The head version (the latest belief), or None after a retraction or before any assertion."""
        return None if self.head is None else self.versions[self.head]

    def decide(self, cmd: FactCommand, recorded_at: datetime) -> Decision:
        """Apply the policy to a validated command; returns what the event will record. Raises BadInput."""
        observed = cmd.observed_at or recorded_at
        head = self.current()
        if cmd.op == "withdraw":
            # retract-source (memledger/withdrawal.py): "SOURCE_REF no longer counts as support on this fact".
            # Recorded so a later withdrawal of another source does not count it; changes nothing by itself (the
            # corrections or retractions it causes are their own events in the same save).
            if not self.versions and not self.quarantined:
                raise BadInput("key", f"{cmd.key!r} has no statements to withdraw a source from", "name a recorded key")
            return Decision("retracted", "withdraw_source", None, None, None, [])
        if cmd.op == "retract":
            if head is None:
                raise BadInput("key", f"{cmd.key!r} has no current value to retract", "assert it first")
            if cmd.source in NON_USER_SOURCES and head.source == "user_statement":
                # What the user said is withdrawn only by the user (or system feedback): an agent that disagrees
                # records its view, which contests (an agent_inference retract would empty the profile).
                raise BadInput("source", f"an {cmd.source} cannot retract what the user said ({cmd.key!r} "
                                         f"v{head.version} is a user_statement)",
                               "ask the user, or record the agent's view with assert --source agent_inference "
                               "(it is kept as contested)")
            if cmd.valid_to is not None and cmd.valid_to <= head.valid_from:
                # "It stopped being true before it started" is a typo more often than a withdrawal; it used to be
                # taken silently as a full withdrawal. Refused: nothing is written.
                raise BadInput("valid_to", f"{cmd.valid_to.isoformat()} is not after the value's valid_from "
                                           f"{head.valid_from.isoformat()}",
                               "give an instant after valid_from, or leave valid_to out to withdraw the value entirely")
            if cmd.valid_to is None and head.valid_from > observed and len(self.versions) > 1:
                # A scheduled head (valid from a date still to come) ended the value before it on that date; withdrawing
                # it left no value at all, now or later (retracting "moving to Berlin in 2099" would empty the
                # profile while Paris still holds). Refused until a retraction can reopen the earlier range.
                raise BadInput("key", f"{cmd.key!r} v{head.version} is scheduled for {head.valid_from.isoformat()} "
                                      "and has not happened; retracting it would leave no value, not even the one "
                                      "that holds until then",
                               f"cancel it by restating what still holds: memledger correct USER {cmd.key} VALUE "
                               "--reason 'plan cancelled'")
            if cmd.valid_to is None:
                change = self._change(head, head.valid_from, head.valid_from, "retracted")
            else:
                end = cmd.valid_to if head.valid_to is None else min(head.valid_to, cmd.valid_to)
                change = self._change(head, head.valid_from, end, "closed")
            return Decision("retracted", "retract", head.version, None, cmd.valid_to, [change])

        marks: dict[str, Any] = {}
        derived: list[str] = []
        # Quarantine (also against memory poisoning): a value failing its key's validator, or a text that
        # reads as an instruction to the agent, is recorded but not believed, unless it is the independent second
        # statement of a value quarantined within the last 72 hours, which releases it (ledger/hygiene.py).
        said = cmd.text if cmd.text is not None else (cmd.value if isinstance(cmd.value, str) else None)
        # bounds that move with time (birth_year <= this year) are judged at the year it was said in, not recorded
        problem = REGISTRY.check_value(cmd.key, cmd.value, observed)
        # the sentence and the value are both screened: a harmless text must not carry a poisoned value past it
        if problem is None and any(hygiene.reads_as_instruction(x, from_user=cmd.source == "user_statement")
                                   for x in (cmd.text, cmd.value if isinstance(cmd.value, str) else cmd.value_json)):
            problem = INSTRUCTION_PROBLEM
        if problem is not None and head is not None and head.value_json == cmd.value_json and cmd.op == "assert":
            problem = None  # the value believed now (released earlier) stated again: a reaffirmation, not a new outlier
        if problem is not None:
            # an outlier repeated by an independent source may be true; an instruction to the agent is not made safe
            # by being repeated (a second poisoned document released the first into context): never released
            q = None if problem == INSTRUCTION_PROBLEM else self._releasable(cmd, observed)
            if q is None:
                return Decision("asserted", "quarantine", None, cmd.valid_from or observed, cmd.valid_to, [],
                                confidence=cmd.effective_confidence(), hygiene={"quarantined": problem})
            marks["releases"] = q
            derived.append(self.quarantined[q]["event_id"])
        confidence = cmd.effective_confidence()
        if hygiene.is_hedged(said):
            confidence = min(confidence, hygiene.HEDGED_CONFIDENCE)
            marks["hedged"] = True
        d = self._decide_value(cmd, recorded_at, observed, head, bool(marks.get("hedged")))
        if d.effect == "correct" and cmd.source != "system_feedback":  # correction decay
            n = self.corrections + 1
            confidence = hygiene.decayed(confidence, n)
            marks["corrections"] = n
            if n >= hygiene.REVIEW_AT:
                marks["review"] = True
        if d.effect == "supersede" and head is not None and head.hedged and d.replaces == head.version \
                and head.value_json == cmd.value_json:
            marks["confirms"] = head.version  # an unhedged restatement of a hedged value: the firm version
        d.confidence, d.hygiene, d.derived_from = confidence, marks or None, derived
        return d

    def _releasable(self, cmd: FactCommand, observed: datetime) -> int | None:
        """The version of a quarantined statement of the same value that ``cmd`` (said at ``observed``) releases:
        unreleased, said within :data:`ledger.hygiene.QUARANTINE_WINDOW` of it, before or after (``observed_at``,
        when the sources said them: imported statements arrive in any order), and ``cmd`` independent of it."""
        judged = REGISTRY.judged_value(cmd.key, cmd.value)
        for version, q in sorted(self.quarantined.items(), reverse=True):
            # the same value: identical, or the same number in other words ("I'm 130" / "I am 130 years old");
            # within 72 hours either way, so statements imported out of order release each other too
            same = q["value_json"] == cmd.value_json or (
                q["value_json"] is not None and REGISTRY.judged_value(cmd.key, json.loads(q["value_json"])) == judged)
            if (not q["released"] and same
                    and abs(observed - q["observed_at"]) <= hygiene.QUARANTINE_WINDOW
                    and hygiene.independent(q, cmd.session_id, cmd.source_ref)):
                return version
        return None

    def _decide_value(self, cmd: FactCommand, recorded_at: datetime, observed: datetime, head: Version | None,
                      hedged: bool) -> Decision:
        """The policy for a command carrying a value (assert, correct, contest), once quarantine is ruled out."""
        value_json = cmd.value_json
        if cmd.op == "contest":
            # remember's "conflict" (ledger/resolution.py): a statement that may be about this fact, kept under its own
            # key; here it is recorded, never believed, and the head is marked contested until the user settles it.
            if head is None:
                raise BadInput("key", f"{cmd.key!r} has no current value to contest", "use assert for a new fact")
            changes = [] if head.status == "contested" else [
                self._change(head, head.valid_from, head.valid_to, "contested")]
            return Decision("asserted", "contest", head.version, cmd.valid_from or observed, cmd.valid_to, changes)
        if (
            head is not None
            and cmd.source in NON_USER_SOURCES
            and head.source == "user_statement"
            and value_json != head.value_json
            and (cmd.op == "correct" or (cmd.valid_from or observed) >= head.valid_from)
        ):
            # What the agent inferred or a document imported never displaces what the user said,
            # whatever its confidence: it is recorded and contests (the user reaffirming clears the contest, a new
            # user statement supersedes as usual). An import of earlier history still backfills below.
            changes = [] if head.status == "contested" else [
                self._change(head, head.valid_from, head.valid_to, "contested")]
            return Decision("asserted", "contest", head.version, cmd.valid_from or observed, cmd.valid_to, changes)
        if cmd.op == "correct":
            if head is None:
                raise BadInput("key", f"{cmd.key!r} has no current value to correct", "use assert for a new fact")
            # The correction takes over the misreported version's whole valid range.
            changes = [self._change(head, head.valid_from, head.valid_from, "misreported")]
            return Decision("corrected", "correct", head.version, head.valid_from, head.valid_to, changes)

        valid_from = cmd.valid_from or observed
        unhedges = (head is not None and head.hedged and not hedged and valid_from >= head.valid_from
                    and cmd.source in ("user_statement", "system_feedback"))
        if head is not None and value_json == head.value_json and not unhedges:
            changes = []
            # the user repeating the value, or system feedback settling it (unlink), clears a contest
            if head.status == "contested" and cmd.source in ("user_statement", "system_feedback"):
                changes.append(self._change(head, head.valid_from, head.valid_to, "current"))
            return Decision("reaffirmed", "reaffirm", head.version, head.valid_from, head.valid_to, changes)
        if (
            head is not None
            and cmd.source == "agent_inference"
            and head.source == "user_statement"
            and cmd.effective_confidence() < head.confidence
        ):
            changes = [] if head.status == "contested" else [
                self._change(head, head.valid_from, head.valid_to, "contested")
            ]
            return Decision("asserted", "contest", head.version, valid_from, cmd.valid_to, changes)

        # A new version enters the valid-time line at valid_from: it ends where the next later version begins,
        # and the version covering valid_from closes there (or is emptied if it began at the same instant).
        end = cmd.valid_to
        changes = []
        for v in sorted(self.versions.values(), key=lambda v: (v.valid_from, v.version)):
            if not v.live:
                continue
            if v.valid_from > valid_from:
                if end is None or v.valid_from < end:
                    end = v.valid_from
                break
        for v in self.versions.values():
            if v.live and v.valid_from <= valid_from and (v.valid_to is None or v.valid_to > valid_from):
                status = "superseded" if v.status in ("current", "contested") else v.status
                changes.append(self._change(v, v.valid_from, valid_from, status))
        if head is None:
            effect = "new"
        elif valid_from >= head.valid_from:
            effect = "supersede"
        else:
            effect = "backfill"
            # Only the head's status names it "current"; a backfilled version is history from birth.
        replaces = head.version if effect == "supersede" else None
        decision = Decision("asserted", effect, replaces, valid_from, end, changes)
        decision.changes.sort(key=lambda c: c["version"])
        return decision

    @staticmethod
    def _change(v: Version, vf: datetime, vt: datetime | None, status: str) -> dict[str, Any]:
        return {"version": v.version, "valid_from": _iso(vf), "valid_to": _iso(vt), "status": status}

    def record(self, cmd: FactCommand, recorded_at: datetime) -> tuple[Fact.Event | None, tuple | None]:
        """Decide and trigger the event for ``cmd``; returns (event, None), or (None, first receipt data) for an
        idempotent retry of a command this stream already recorded.

        Raises:
            IdempotencyMismatch: the key was used before for a different command.
            BadInput: the policy refused the command (correct/retract without a current value).
        """
        fingerprint = fingerprint_digest(cmd.fingerprint()) if cmd.idempotency_key else None
        if cmd.idempotency_key and cmd.idempotency_key in self.idempotency:
            first = self.idempotency[cmd.idempotency_key]
            if not same_fingerprint(first[2], fingerprint):
                raise IdempotencyMismatch(
                    "idempotency_key",
                    f"{cmd.idempotency_key!r} was already used for a different command on {cmd.key!r}",
                    "use a new key for a new command; a retry must repeat the command exactly",
                )
            return None, first
        if not self.versions and not new_key_allowed(cmd.key):
            # Keys are compared as written, so Preference.Food and preference.food would be two facts: a *new* key
            # must be lowercase. Keys created before this rule stay readable, retractable and forgettable.
            raise BadInput("key", f"{cmd.key!r} has capital letters, and new keys are lowercase",
                           f"use {cmd.key.lower()!r}")
        d = self.decide(cmd, recorded_at)
        event_class = self.event_class(cmd.op)
        event_id = new_event_id()
        self.trigger_event(
            event_class,
            user_id=cmd.user_id,
            key=cmd.key,
            event_id=event_id,
            kind=d.kind,
            effect=d.effect,
            value_json=cmd.value_json,
            text=cmd.text if cmd.text is not None or cmd.op in ("retract", "withdraw")
            else default_text(cmd.key, cmd.value),
            reason=cmd.reason,
            observed_at=cmd.observed_at or recorded_at,
            valid_from=d.valid_from,
            valid_to=d.valid_to,
            source=cmd.source,
            source_ref=cmd.source_ref,
            session_id=cmd.session_id,
            actor=cmd.actor,
            trace_id=cmd.trace_id,
            derived_from=list(cmd.derived_from) + [i for i in d.derived_from if i not in cmd.derived_from],
            confidence=cmd.effective_confidence() if d.confidence is None else d.confidence,
            role=cmd.role.model_dump() if cmd.role else None,
            sensitivity=cmd.sensitivity or getattr(self, "label", None),  # a label sticks to the fact
            idempotency_key=cmd.idempotency_key,
            command_fingerprint=fingerprint,
            replaces=d.replaces,
            changes=d.changes,
            hygiene=d.hygiene,
            fact_key_id=event_id,  # a per-fact key of its own (the mapper may name a pooled one): forget
            timestamp=recorded_at,
            **self.event_extra(cmd),
        )
        return self.pending_events[-1], None  # type: ignore[return-value]

    def event_class(self, op: str) -> type:
        """The event class recording a command ``op`` (a subclass with its own events overrides it:
        ledger/relations.py)."""
        return {"assert": Fact.FactAsserted, "correct": Fact.FactCorrected, "retract": Fact.FactRetracted,
                "withdraw": Fact.FactRetracted, "contest": Fact.FactAsserted}[op]

    def event_extra(self, cmd: FactCommand) -> dict[str, Any]:
        """Fields a subclass's events carry beyond a fact event's (none for a fact)."""
        return {}

    def forget(self, versions: list[int], forgotten_ids: list[str], actor: str | None,
               recorded_at: datetime) -> Fact.FactForgotten:
        """Trigger the :class:`FactForgotten` placeholder for ``versions`` (1-based stream versions, validated by
        the caller, memledger/forget.py) whose event ids are ``forgotten_ids``; returns the pending event.

        Each forgotten version that is a version of a value gets its valid range emptied at its ``valid_from``
        with status ``forgotten``; if the head is among them the fact has no current value (``replaces`` = head).
        """
        chosen = set(versions)
        changes = [self._change(v, v.valid_from, v.valid_from, "forgotten")
                   for n, v in sorted(self.versions.items()) if n in chosen]
        head = self.head if self.head in chosen else None
        self.trigger_event(
            Fact.FactForgotten,
            user_id=self.user_id, key=self.key, event_id=new_event_id(), kind="forgotten", effect="forget",
            value_json=None, text=None, reason=None, observed_at=recorded_at, valid_from=None, valid_to=None,
            source="system_feedback", source_ref=None, session_id=None, actor=actor, trace_id=None,
            derived_from=list(forgotten_ids), confidence=1.0, role=None, sensitivity=None, idempotency_key=None,
            command_fingerprint=None, replaces=head, changes=changes, hygiene=None, fact_key_id=None,
            forgotten=sorted(chosen), timestamp=recorded_at,
        )
        return self.pending_events[-1]  # type: ignore[no-any-return]

    @property
    def pending_events(self) -> list[Any]:
        return self._pending_events


def fact_effect(event: Any) -> str | None:
    """The policy's ``effect`` of a fact event, None for any other event. Relation events (ledger/relations.py)
    carry an ``effect`` too, decided by the same policy, but are no fact: the fact projections and the replay to a
    cutoff ask this rather than for the attribute."""
    return event.effect if isinstance(event, Fact.Event) else None


def fingerprint_digest(fingerprint: str) -> str:
    """What an event stores of a command's idempotency fingerprint: ``"sha256:" + hex`` of its canonical JSON. The
    whole JSON used to be stored (867 bytes per event on average, the largest field of the log); equality is all a
    retry check needs."""
    return "sha256:" + hashlib.sha256(fingerprint.encode("utf-8")).hexdigest()


def same_fingerprint(stored: str | None, digest: str | None) -> bool:
    """Whether a stored fingerprint (a digest, or the canonical JSON events recorded before digests) matches
    ``digest`` (:func:`fingerprint_digest` of the retried command)."""
    if stored == digest:
        return True
    return bool(stored) and digest is not None and not stored.startswith("sha256:") \
        and fingerprint_digest(stored) == digest  # type: ignore[union-attr]


#: the quarantine reason of a text that reads as an instruction to the agent (memory poisoning, docs/hygiene.md)
INSTRUCTION_PROBLEM = "reads as an instruction to the agent"


def default_text(key: str, value: Any) -> str:
    """The sentence stored when the caller gives none: ``"preference.drink: tea"``."""
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return f"{key}: {shown}"
