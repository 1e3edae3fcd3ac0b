"""Entities and relations: the people, pets, places and organisations in a user's life, and how they are tied.

An **entity** is one stream per (user_id, entity_id): a kind (:data:`ENTITY_KINDS`), a name and aliases ("Anna",
"my sister", 我姐姐). Its id is random (``e`` + 12 hex digits), so nothing personal is in the plaintext metadata;
the name and the aliases are encrypted under the user's key like a fact's text (ledger/privacy.py), so erasing the
user shreds them.

A **relation** is an edge from a *subject* (the user, written ``self``, or one of the user's entities) to an
entity, typed from :data:`RELATION_TYPES` (or a free type). It is a :class:`Relation`, which is a :class:`Fact`
whose value is the object's entity id: the same bitemporal policy decides supersede, backfill, reaffirm, contest,
correct and retract (ledger/domain.py), and the events record the decision in ``changes`` in the same way. Only the
event classes differ (``RelationAsserted``, ``RelationCorrected``, ``RelationRetracted``), so the fact projections
never see a relation and the ``relations`` projection (projections/relations.py) sees nothing else.

Which stream an edge lives on decides what replaces what:

* a **single-valued** type (``manager_of``, ``wife``, ``lives_in``, ...) has one stream per (subject, type), key
  ``<subject>.<type>``: relating a new entity supersedes the old one ("Dana left, Omar runs my team now": Dana's
  valid range closes at Omar's ``valid_from``), and a correction replaces it over its whole range (never true);
* a **multi-valued** type (``sister``, ``friend``, ``works_at``, ...) has one stream per (subject, type, object),
  key ``<subject>.<type>.<object>``: a second sister is another stream, and ending one touches no other.

An ``agent_inference`` never displaces a ``user_statement``: it is recorded and contests it, as for facts.
"""

from __future__ import annotations

import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventsourcing.domain import Aggregate
from pydantic import field_validator

from .domain import NAMESPACE, Fact, new_event_id
from .errors import BadInput
from .schemas import FactCommand, check_label

__all__ = [
    "ENTITY_KINDS", "SELF", "RELATION_TYPES", "RelationType", "RelationTypes", "Entity", "EntityRecorded",
    "Relation", "RelationCommand", "entity_stream_id", "relation_stream_id", "new_entity_id", "relation_key",
    "check_relation_type", "check_entity_id", "MAX_HOPS", "IDENTITY_TYPES",
]

#: the kinds an entity may have
ENTITY_KINDS = ("person", "pet", "place", "organisation", "other")
#: the subject that names the user themself
SELF = "self"
#: walks along relations stop after this many hops
MAX_HOPS = 3
#: an entity id: ``e`` and 12 lowercase hex digits (random: no personal content in plaintext metadata)
ENTITY_ID_RE = re.compile(r"^e[0-9a-f]{12}$")
TYPE_RE = re.compile(r"^[a-z][a-z0-9_]*$")
MAX_TYPE = 64


def check_relation_type(name: Any, field: str = "relation_type") -> str:
    """A relation type: a lowercase identifier (``manager_of``), at most 64 characters. Raises BadInput."""
    if not isinstance(name, str) or not TYPE_RE.match(name) or len(name) > MAX_TYPE:
        shown = name.strip().lower().replace(" ", "_").replace("-", "_") if isinstance(name, str) else ""
        hint = f"e.g. {shown!r}" if shown and TYPE_RE.match(shown) else "e.g. sister, manager_of, works_at"
        raise BadInput(field, f"{name!r} is not a relation type",
                       f"use a lowercase identifier (letters, digits, _), at most {MAX_TYPE} characters, {hint}")
    return name


def check_entity_id(value: Any, field: str = "entity") -> str:
    """An entity id (``e`` + 12 hex digits). Raises BadInput."""
    if not isinstance(value, str) or not ENTITY_ID_RE.match(value):
        raise BadInput(field, f"{value!r} is not an entity id", "entity ids look like e3fa9c1d2b7a4 (memledger entities USER)")
    return value


@dataclass(frozen=True)
class RelationType:
    """One relation type: its ``name``, ``cardinality`` (``single``: a new object supersedes the old one for the
    same subject; ``multi``: objects accumulate), the default ``sensitivity`` label of its edges (None: unlabelled),
    the entity kind an unknown object is created with, and ``phrase``, how an edge reads (``{subject}`` and
    ``{object}`` are names)."""

    name: str
    cardinality: str = "multi"
    sensitivity: str | None = None
    kind: str = "person"
    phrase: str = "{subject} → {name} → {object}"

    def reads(self, subject: str, obj: str) -> str:
        """The edge as a sentence: ``"Omar is the user's manager"``."""
        return self.phrase.format(subject=subject, object=obj, name=self.name)


class RelationTypes:
    """The registry of relation types. Unknown types are allowed (free types: multi-valued, unlabelled); register
    one to give it a cardinality, a label, a default entity kind or a phrase: ``RELATION_TYPES.register("coach",
    "single")``."""

    def __init__(self) -> None:
        self._types: dict[str, RelationType] = {}

    def register(self, name: str, cardinality: str = "multi", *, sensitivity: str | None = None,
                 kind: str = "person", phrase: str | None = None) -> RelationType:
        """Add or replace a type. Raises BadInput for a malformed name, cardinality, label or kind."""
        name = check_relation_type(name)
        if cardinality not in ("single", "multi"):
            raise BadInput("cardinality", f"{cardinality!r} is not single or multi",
                           "use single (a new object replaces the old) or multi (objects accumulate)")
        if sensitivity is not None:
            check_label(sensitivity)
        if kind not in ENTITY_KINDS:
            raise BadInput("kind", f"{kind!r} is not an entity kind", "use one of " + ", ".join(ENTITY_KINDS))
        rt = RelationType(name, cardinality, sensitivity, kind, phrase or "{subject} → " + name + " → {object}")
        self._types[name] = rt
        return rt

    def get(self, name: str) -> RelationType:
        """The registered type, or a free one (multi-valued, unlabelled, kind ``other``)."""
        return self._types.get(name) or RelationType(name, "multi", None, "other", "{subject} → " + name + " → {object}")

    def known(self) -> list[RelationType]:
        """The registered types, by name."""
        return [self._types[n] for n in sorted(self._types)]


RELATION_TYPES = RelationTypes()
for _name in ("sister", "brother", "son", "daughter", "child", "parent", "cousin", "aunt", "uncle", "grandmother",
              "grandfather"):
    RELATION_TYPES.register(_name, "multi", phrase="{object} is {subject}'s " + _name)
for _name in ("mother", "father", "wife", "husband", "partner", "spouse"):
    RELATION_TYPES.register(_name, "single", phrase="{object} is {subject}'s " + _name)
RELATION_TYPES.register("friend", "multi", phrase="{object} is {subject}'s friend")
RELATION_TYPES.register("colleague", "multi", phrase="{object} is {subject}'s colleague")
RELATION_TYPES.register("manager_of", "single", phrase="{object} is {subject}'s manager")
RELATION_TYPES.register("doctor_of", "multi", sensitivity="health", phrase="{object} is {subject}'s doctor")
RELATION_TYPES.register("therapist_of", "multi", sensitivity="health", phrase="{object} is {subject}'s therapist")
RELATION_TYPES.register("dentist_of", "multi", sensitivity="health", phrase="{object} is {subject}'s dentist")
RELATION_TYPES.register("works_at", "multi", kind="organisation", phrase="{subject} works at {object}")
RELATION_TYPES.register("member_of", "multi", kind="organisation", phrase="{subject} is a member of {object}")
RELATION_TYPES.register("lives_in", "single", kind="place", phrase="{subject} lives in {object}")
RELATION_TYPES.register("owns", "multi", kind="pet", phrase="{subject} owns {object}")
# identity links between two user ids of one person (memledger/identity.py): never a role of the user
RELATION_TYPES.register("same_person", "multi", kind="other", phrase="{subject} and {object} are the same person")
RELATION_TYPES.register("may_be_same_person", "multi", kind="other",
                        phrase="{subject} may be the same person as {object} (not confirmed)")
IDENTITY_TYPES = ("same_person", "may_be_same_person")


def new_entity_id() -> str:
    """A fresh random entity id."""
    return "e" + secrets.token_hex(6)


def entity_stream_id(user_id: str, entity_id: str) -> uuid.UUID:
    """The stream id of an entity: ``uuid5(NAMESPACE, "entity\\x1f<user_id>\\x1f<entity_id>")``."""
    return uuid.uuid5(NAMESPACE, f"entity\x1f{user_id}\x1f{entity_id}")


def relation_stream_id(user_id: str, key: str) -> uuid.UUID:
    """The stream id of a relation stream: ``uuid5(NAMESPACE, "relation\\x1f<user_id>\\x1f<key>")``."""
    return uuid.uuid5(NAMESPACE, f"relation\x1f{user_id}\x1f{key}")


def relation_key(subject: str, relation_type: str, obj: str) -> str:
    """The stream key of an edge: ``<subject>.<type>`` for a single-valued type, ``<subject>.<type>.<object>``
    for a multi-valued one (see the module docstring)."""
    if RELATION_TYPES.get(relation_type).cardinality == "single":
        return f"{subject}.{relation_type}"
    return f"{subject}.{relation_type}.{obj}"


# --------------------------------------------------------------------------------------------------------- entities


class Entity(Aggregate):
    """One entity of one user: kind, name and aliases. Its events carry the whole state after them."""

    TOPIC = "memledger:Entity"

    class Created(Aggregate.Created):
        # never triggered (the first event is an EntityRecorded); with an explicit aggregate TOPIC every event class
        # on it needs one
        TOPIC = "memledger:Entity.Created"

    class Event(Aggregate.Event):
        """Base of the entity events. ``name`` and ``aliases`` are encrypted (ledger/privacy.py)."""

        TOPIC = "memledger:Entity.Event"
        user_id: str
        entity_id: str
        event_id: str
        kind: str
        name: str | None
        aliases: list[str] | None
        source: str
        source_ref: str | None
        actor: str | None
        trace_id: str | None

        def mutate(self, aggregate: Entity | None) -> Entity | None:  # type: ignore[override]
            if aggregate is None:
                aggregate = Entity.shell(self.originator_id, self.timestamp)
            return super().mutate(aggregate)

        def apply(self, aggregate: Entity) -> None:
            aggregate.user_id, aggregate.entity_id, aggregate.kind = self.user_id, self.entity_id, self.kind
            aggregate.name, aggregate.aliases = self.name, list(self.aliases or [])

    class EntityRecorded(Event):
        """An entity named for the first time."""

        TOPIC = "memledger:EntityRecorded"

    class EntityRevised(Event):
        """An entity's name, aliases or kind changed (aliases only ever added by ``relate``)."""

        TOPIC = "memledger:EntityRevised"

    @classmethod
    def shell(cls, aggregate_id: uuid.UUID, timestamp: datetime) -> Entity:
        """An entity with no events yet (version 0)."""
        agg = cls.__new__(cls)
        agg.__base_init__(originator_id=aggregate_id, originator_version=0, timestamp=timestamp)
        agg.user_id = agg.entity_id = agg.kind = agg.name = None
        agg.aliases = []
        return agg

    def record(self, *, user_id: str, entity_id: str, kind: str, name: str, aliases: list[str], source: str,
               source_ref: str | None, actor: str | None, trace_id: str | None, recorded_at: datetime) -> Any:
        """Trigger ``EntityRecorded`` (a new entity) or ``EntityRevised``; returns the pending event."""
        cls = Entity.EntityRecorded if self.version == 0 else Entity.EntityRevised
        self.trigger_event(cls, user_id=user_id, entity_id=entity_id, event_id=new_event_id(), kind=kind, name=name,
                           aliases=list(aliases), source=source, source_ref=source_ref, actor=actor,
                           trace_id=trace_id, timestamp=recorded_at)
        return self._pending_events[-1]


EntityRecorded = Entity.EntityRecorded


# -------------------------------------------------------------------------------------------------------- relations


class RelationCommand(FactCommand):
    """A :class:`FactCommand` on a relation stream: ``key`` is :func:`relation_key`, ``value`` the object's entity
    id; ``subject`` (``self`` or an entity id), ``relation_type`` and ``object`` name the edge. ``misreported``
    (a retraction only): the edge was never true (a correction of a multi-valued relation, whose new object is a
    stream of its own)."""

    subject: str
    relation_type: str
    object: str
    misreported: bool = False

    @field_validator("relation_type", mode="before")
    @classmethod
    def _type(cls, v: Any) -> str:
        return check_relation_type(v)


class Relation(Fact):
    """The stream of one edge (single-valued type: of the (subject, type) pair). The policy is :class:`Fact`'s."""

    TOPIC = "memledger:Relation"

    class Created(Aggregate.Created):
        # never triggered (a stream begins with an assertion, as a fact's does); with an explicit aggregate TOPIC
        # every event class on it needs one
        TOPIC = "memledger:Relation.Created"

    class Event(Aggregate.Event):
        """Base of the relation events: a fact event's fields (the same meaning) plus the edge's ends and type."""

        TOPIC = "memledger:Relation.Event"
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
        subject: str
        relation_type: str
        object: str

        def mutate(self, aggregate: Relation | None) -> Relation | None:  # type: ignore[override]
            if aggregate is None:
                aggregate = Relation.shell(self.originator_id, self.timestamp)
            return super().mutate(aggregate)

        def apply(self, aggregate: Relation) -> None:
            aggregate.on_event(self)  # type: ignore[arg-type]

    class RelationAsserted(Event):
        TOPIC = "memledger:RelationAsserted"

    class RelationCorrected(Event):
        TOPIC = "memledger:RelationCorrected"

    class RelationRetracted(Event):
        TOPIC = "memledger:RelationRetracted"

    class RelationForgotten(Event):
        """Reserved for shredding one edge (as ``FactForgotten`` does for a fact); nothing records it yet."""

        TOPIC = "memledger:RelationForgotten"
        forgotten: list[int]

    # eventsourcing redefines a base aggregate's event classes on a subclass; naming them here keeps the fact
    # events' names pointing at the relation's own classes (and their own topics)
    FactAsserted = RelationAsserted
    FactCorrected = RelationCorrected
    FactRetracted = RelationRetracted
    FactForgotten = RelationForgotten

    def event_class(self, op: str) -> type:
        return {"assert": Relation.RelationAsserted, "correct": Relation.RelationCorrected,
                "retract": Relation.RelationRetracted, "contest": Relation.RelationAsserted}[op]

    def event_extra(self, cmd: FactCommand) -> dict[str, Any]:
        assert isinstance(cmd, RelationCommand)
        return {"subject": cmd.subject, "relation_type": cmd.relation_type, "object": cmd.object}

    def decide(self, cmd: FactCommand, recorded_at: datetime) -> Any:
        """The fact policy; a retraction marked ``misreported`` empties the edge as never true (status
        ``misreported``, kind ``corrected``), as a correction does to a fact's old value."""
        if cmd.op == "withdraw":
            raise BadInput("op", "relations have no sources to withdraw", "retract the relation instead")
        d = super().decide(cmd, recorded_at)
        if cmd.op == "retract" and getattr(cmd, "misreported", False):
            for ch in d.changes:
                ch["valid_to"], ch["status"] = ch["valid_from"], "misreported"
            d.kind = "corrected"
        return d
