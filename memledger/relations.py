"""People, places and organisations in a user's life, and how they are tied: ``relate``, ``correct_relation``,
``unrelate``, ``entities`` and ``relations`` (docs/relations.md).

Writes: validate everything (nothing is written on bad input: ``BadInput`` naming the field), take the user's lock
(the one ``remember`` takes, so two writers never create the same person twice), resolve the entities named (an
entity id, or a name or alias matching exactly one entity; an unknown name creates one; a name matching several is
refused with their ids, never guessed), then record in one save the entity events (a new entity, new aliases) and
the relation command, which the fact policy decides (ledger/relations.py).

Reads: the ``relations`` projection (projections/relations.py) at a system time (``as_of``) and a valid time
(``valid_at``), walked 1 to 3 hops. An edge whose type carries a sensitivity label (``doctor_of``: ``health``) is
shown only to a read that allows the label (memledger/sensitivity.py), and each one shown is recorded as a
disclosure; otherwise it keeps its place but its entity's name, aliases and sentence are withheld, and the walk
does not go through it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ledger.errors import BadInput
from ledger.mentions import MAX_NAME, USER_NAME, check_name, fold  # noqa: F401 - names of this module
from ledger.relations import (ENTITY_ID_RE, ENTITY_KINDS, IDENTITY_TYPES, MAX_HOPS, RELATION_TYPES, SELF, Entity,
                              RelationCommand, check_relation_type, entity_stream_id, new_entity_id, relation_key)
from ledger.schemas import Receipt, check_user_id, validate_command
from ledger.timeutil import from_micros, now_utc, parse_instant, to_micros

from .relation_models import EntityView, RelationVersion
from .store import Store

MAX_ALIASES = 50
#: live relations an entity (or the user) keeps before the least recently used are folded into one summary
#: relation, so a walk from a busy node stays small; ``$MEMLEDGER_MAX_LIVE_RELATIONS`` sets another
MAX_LIVE = 50
MAX_LIVE_ENV = "MEMLEDGER_MAX_LIVE_RELATIONS"
#: the type of the summary relation the folded ones are named in
FOLDED = "folded"


# ------------------------------------------------------------------------------------------------------ read models


class Entities(BaseModel):
    """The answer of ``entities``: the user's entities, by name (withheld ones last)."""

    model_config = ConfigDict(defer_build=True)
    user_id: str
    entities: list[EntityView]


class RelationEdge(BaseModel):
    """One relation reached by a walk (``memledger relations USER --json``): ``hops`` from the start, the ``path``
    of names that led to it (``["user", "Anna", "Berlin"]``), its ends (``subject_id`` is ``self`` for the user),
    type, the entity at its far end with kind and aliases, ``reads`` (the edge as a sentence), its valid range
    (``valid_to`` null: open) and status, provenance, and its stream ``key`` and ``version`` (``audit``-able).
    A labelled edge the read did not allow keeps its place with ``withheld`` naming the label; its names, aliases
    and sentence are null."""

    model_config = ConfigDict(defer_build=True)
    hops: int
    path: list[str | None]
    subject_id: str
    subject: str | None
    relation_type: str
    entity_id: str
    entity: str | None
    kind: str | None
    aliases: list[str] | None
    reads: str | None
    valid_from: datetime
    valid_to: datetime | None
    status: str
    source: str
    source_ref: str | None
    confidence: float
    recorded_at: datetime
    sensitivity: str | None
    withheld: str | None = None
    key: str
    version: int


class Relations(BaseModel):
    """The answer of ``relations``: the start (``self`` or an entity id), the hops asked, the two times it was asked
    at (``as_of`` null: as believed now; ``valid_at``: the instant the relations were true at, UTC) and the
    edges, nearest first."""

    model_config = ConfigDict(defer_build=True)
    user_id: str
    start: str
    hops: int
    as_of: datetime | None
    valid_at: datetime
    relations: list[RelationEdge]


class RelationReceipt(Receipt):
    """A relation command's receipt (``key`` is the relation stream's key) plus the edge it recorded: its
    ``subject_id`` (``self`` or an entity id), ``relation_type``, the entity (``entity_id``, ``entity``: its name)
    and ``created``, the ids of entities this command created."""

    subject_id: str
    relation_type: str
    entity_id: str
    entity: str
    created: list[str] = Field(default_factory=list)


# ------------------------------------------------------------------------------------------------------- validation


def check_aliases(value: Any, field: str = "aliases") -> list[str]:
    """A list of aliases (a single string is one alias). Raises BadInput."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise BadInput(field, f"is a {type(value).__name__}", "give a list of names, e.g. [\"my sister\", \"我姐姐\"]")
    if len(value) > MAX_ALIASES:
        raise BadInput(field, f"has {len(value)} aliases", f"give at most {MAX_ALIASES}")
    out: list[str] = []
    for x in value:
        name = check_name(x, field)
        if fold(name) not in {fold(a) for a in out}:
            out.append(name)
    return out


def check_kind(value: Any, field: str = "kind") -> str | None:
    """An entity kind (:data:`ledger.relations.ENTITY_KINDS`) or None. Raises BadInput."""
    if value is None:
        return None
    if value == "organization":
        return "organisation"
    if value not in ENTITY_KINDS:
        raise BadInput(field, f"{value!r} is not an entity kind", "use one of " + ", ".join(ENTITY_KINDS))
    return str(value)


def check_hops(value: Any, field: str = "hops") -> int:
    """1, 2 or 3. Raises BadInput."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_HOPS:
        raise BadInput(field, f"{value!r} is not 1, 2 or 3",
                       f"give a number of hops from 1 to {MAX_HOPS} (walks stop at {MAX_HOPS})")
    return value


def _matches(rows: list[dict[str, Any]], ref: str) -> list[dict[str, Any]]:
    if ENTITY_ID_RE.match(ref):
        return [r for r in rows if r["entity_id"] == ref]
    f = fold(ref)
    return [r for r in rows if fold(r["name"]) == f or f in {fold(a) for a in r["aliases"]}]


def _describe(r: dict[str, Any]) -> str:
    also = f" ({', '.join(r['aliases'])})" if r["aliases"] else ""
    return f"{r['entity_id']} {r['name']}{also}"


def resolve(rows: list[dict[str, Any]], ref: str, field: str) -> dict[str, Any] | None:
    """The one entity of ``rows`` that ``ref`` names (its id, name or an alias, case-insensitive), or None.

    Raises:
        BadInput: ``ref`` names several entities (never guessed: the fix lists their ids).
    """
    found = _matches(rows, ref)
    if len(found) > 1:
        raise BadInput(field, f"{ref!r} names {len(found)} entities: " + "; ".join(_describe(r) for r in found),
                       "pass the entity id of the one you mean")
    return found[0] if found else None


# ----------------------------------------------------------------------------------------------------------- writes


def _common(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def relate(ml: Store, user_id: str, relation_type: str, entity: str, *, of: str | None = None,
           aliases: Any = None, kind: str | None = None, **fields: Any) -> RelationReceipt:
    """Record that ``entity`` is ``of``'s (default: the user's) ``relation_type`` (see ``MemoryLedger.relate``)."""
    user_id = check_user_id(user_id)
    relation_type = check_own_type(relation_type)
    entity = check_name(entity, "entity")
    alias_list = check_aliases(aliases)
    kind = check_kind(kind)
    of = None if of is None else check_name(of, "of")
    cap = max_live()
    from .locks import user_lock

    with user_lock(ml, user_id):
        ml.before_read()
        with ml.db.read() as cur:
            rows = ml.relations_projection.entities(cur, user_id)
        subject = _subject(rows, of)
        found = resolve(rows, entity, "entity")
        if found is None and ENTITY_ID_RE.match(entity):
            raise BadInput("entity", f"{entity!r} is no entity of {user_id!r}",
                           "give a name to create one, or an id listed by entities")
        rtype = RELATION_TYPES.get(relation_type)
        created: list[str] = []
        if found is None:
            obj_id, name, all_aliases = new_entity_id(), entity, alias_list
            obj_kind = kind or rtype.kind
            created.append(obj_id)
        else:
            obj_id, name, obj_kind = found["entity_id"], found["name"], kind or found["kind"]
            known = {fold(a) for a in found["aliases"]} | {fold(found["name"])}
            new = [a for a in alias_list if fold(a) not in known]
            all_aliases = found["aliases"] + new if (new or obj_kind != found["kind"]) else None
        if obj_id == subject["entity_id"]:
            raise BadInput("entity", f"{entity!r} is the subject itself", "relate two different entities")
        prelude = entity_events(user_id, obj_id, obj_kind, name, all_aliases, found is None, fields)
        text = fields.pop("text", None) or rtype.reads(subject["name"], name)
        cmd = relation_command("assert", user_id, subject["entity_id"], relation_type, obj_id, text=text, **fields)
        receipt = ml.execute([cmd], prelude=prelude)[0]
        fold_over_cap(ml, user_id, [subject["entity_id"]], cap, **_provenance(fields))
    return _receipt(receipt, subject["entity_id"], relation_type, obj_id, name, created)


def correct_relation(ml: Store, user_id: str, relation_type: str, entity: str, *, of: str | None = None,
                     was: str | None = None, **fields: Any) -> RelationReceipt:
    """Correct a relation: ``entity`` is ``of``'s ``relation_type``, and ``was`` never was (see
    ``MemoryLedger.correct_relation``)."""
    user_id = check_user_id(user_id)
    relation_type = check_own_type(relation_type)
    entity = check_name(entity, "entity")
    of = None if of is None else check_name(of, "of")
    was = None if was is None else check_name(was, "was")
    rtype = RELATION_TYPES.get(relation_type)
    from .locks import user_lock

    with user_lock(ml, user_id):
        ml.before_read()
        with ml.db.read() as cur:
            rows = ml.relations_projection.entities(cur, user_id)
            subject = _subject(rows, of)
            wrong = None if was is None else _existing(rows, was, "was")
            heads = ml.relations_projection.live_keys(cur, user_id, subject["entity_id"], relation_type)
        found = resolve(rows, entity, "entity")
        obj_id = found["entity_id"] if found is not None else new_entity_id()
        name = found["name"] if found is not None else entity
        prelude = None if found is not None else entity_events(user_id, obj_id, rtype.kind, name, [], True, fields)
        text = fields.pop("text", None) or rtype.reads(subject["name"], name)
        if rtype.cardinality == "single":
            if not heads:
                raise BadInput("relation_type", f"{subject['name']} has no current {relation_type} to correct",
                               "use relate to record one")
            if wrong is not None and heads[-1]["object"] != wrong["entity_id"]:
                raise BadInput("was", f"{was!r} is not {subject['name']}'s current {relation_type}",
                               "leave was out, or name the current one (listed by relations)")
            cmds = [relation_command("correct", user_id, subject["entity_id"], relation_type, obj_id, text=text, **fields)]
        else:
            if wrong is None:
                raise BadInput("was", f"is missing: {relation_type} is multi-valued, so the wrong one must be named",
                               f"name in was the {relation_type} that never was")
            if not any(h["object"] == wrong["entity_id"] for h in heads):
                raise BadInput("was", f"{was!r} is not a current {relation_type} of {subject['name']}",
                               "name one listed by relations")
            reason = fields.get("reason")
            retract = {k: v for k, v in fields.items() if k not in ("valid_from", "valid_to", "confidence",
                                                                   "sensitivity")}
            # the right one takes the wrong one's valid range: it was Rob all along, not Rob from now on
            head = next(h for h in heads if h["object"] == wrong["entity_id"])
            if fields.get("valid_from") is None and head["valid_from"] is not None:
                fields["valid_from"] = from_micros(head["valid_from"])
            end = None if head["valid_to"] is None else _open_end(head["valid_to"])
            if fields.get("valid_to") is None and end is not None:
                fields["valid_to"] = end
            cmds = [relation_command("retract", user_id, subject["entity_id"], relation_type, wrong["entity_id"],
                             misreported=True, **{**retract, "reason": reason or f"corrected: it is {name}"}),
                    relation_command("assert", user_id, subject["entity_id"], relation_type, obj_id, text=text, **fields)]
        receipts = ml.execute(cmds, prelude=prelude)
    return _receipt(receipts[-1], subject["entity_id"], relation_type, obj_id, name,
                    [obj_id] if found is None else [])


def unrelate(ml: Store, user_id: str, relation_type: str, entity: str | None = None, *, of: str | None = None,
             **fields: Any) -> RelationReceipt:
    """Retract a relation: withdrawn entirely, or true only until ``valid_to`` (see ``MemoryLedger.unrelate``)."""
    user_id = check_user_id(user_id)
    relation_type = check_own_type(relation_type)
    entity = None if entity is None else check_name(entity, "entity")
    of = None if of is None else check_name(of, "of")
    rtype = RELATION_TYPES.get(relation_type)
    from .locks import user_lock

    with user_lock(ml, user_id):
        ml.before_read()
        with ml.db.read() as cur:
            rows = ml.relations_projection.entities(cur, user_id)
            subject = _subject(rows, of)
            heads = ml.relations_projection.live_keys(cur, user_id, subject["entity_id"], relation_type)
        target = None if entity is None else _existing(rows, entity, "entity")
        if target is None and (rtype.cardinality == "multi" and len(heads) != 1):
            raise BadInput("entity", f"is missing: {subject['name']} has {len(heads)} current {relation_type}",
                           "name the entity whose relation ends")
        live = [h for h in heads if target is None or h["object"] == target["entity_id"]]
        if not live:
            who = f"{entity!r} is not a" if entity else "there is no"
            raise BadInput("entity", f"{who} current {relation_type} of {subject['name']}",
                           "name one listed by relations")
        obj_id = live[-1]["object"]
        cmd = relation_command("retract", user_id, subject["entity_id"], relation_type, obj_id, **fields)
        receipt = ml.execute([cmd])[0]
    # the entity as the caller named it; left out, its id: a receipt never shows a name the caller did not send
    # (the name of a doctor_of entity is labelled health)
    return _receipt(receipt, subject["entity_id"], relation_type, obj_id, entity if entity is not None else obj_id, [])


def max_live() -> int:
    """The cap on an entity's live relations: ``$MEMLEDGER_MAX_LIVE_RELATIONS`` (an integer >= 2), else
    :data:`MAX_LIVE`. Raises BadInput naming the variable."""
    import os

    raw = os.environ.get(MAX_LIVE_ENV)
    if raw is None or not raw.strip():
        return MAX_LIVE
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 2:
        raise BadInput(MAX_LIVE_ENV, f"{raw!r} is not an integer of at least 2",
                       f"set it to how many live relations an entity keeps (default {MAX_LIVE})")
    return value


def fold_over_cap(ml: Store, user_id: str, subjects: Any, cap: int, **fields: Any) -> list[Receipt]:
    """Keep each of ``subjects`` (``self`` or entity ids) within ``cap`` (:func:`max_live`) live relations: beyond it, the
    least recently used are retracted (``valid_to`` now: true until then) and one dated summary relation
    (``folded``) to a new entity of kind ``other`` names them ("12 earlier ties, 2019-03-01 to 2023-06-30: friend
    Tom; ..."), in one save. The events keep every relation: ``history`` and ``relations --as-of`` still show them.
    Called under the user's lock, after a save that added relations; returns the receipts (none under the cap)."""
    proj = ml.relations_projection
    with ml.db.read() as cur:
        names = {r["entity_id"]: r["name"] for r in proj.entities(cur, user_id)}
        live = {s: proj.live_of(cur, user_id, s) for s in set(subjects)}
    cmds: list[Any] = []
    preludes = []
    at = parse_instant(fields["observed_at"], "observed_at") if fields.get("observed_at") else now_utc()
    for subject, edges in sorted(live.items()):
        # identity links are not ties of the user's life; an earlier summary folds only when nothing else is left
        edges = sorted((e for e in edges if e["relation_type"] not in IDENTITY_TYPES),
                       key=lambda e: e["relation_type"] == FOLDED)
        if len(edges) <= cap:
            continue
        old = edges[:len(edges) - cap + 1]  # the summary takes one place
        dates = sorted(from_micros(e["valid_from"]).date().isoformat() for e in old)
        listed = "; ".join(f"{e['relation_type']} {names.get(e['object'], e['object'])}" for e in old)
        name = f"{len(old)} earlier ties, {dates[0]} to {dates[-1]}"
        eid = new_entity_id()
        preludes.append(entity_events(user_id, eid, "other", name, [], True, fields))
        for e in old:
            until = {"valid_to": at} if from_micros(e["valid_from"]) < at else {}  # else withdrawn
            cmds.append(relation_command("retract", user_id, subject, e["relation_type"], e["object"],
                                         reason=f"folded: over the cap of {cap} live relations", **until, **fields))
        cmds.append(relation_command("assert", user_id, subject, FOLDED, eid, text=f"{name}: {listed}",
                                     valid_from=at, reason=f"folded: over the cap of {cap} live relations",
                                     **fields))
    if not cmds:
        return []
    return ml.execute(cmds, prelude=chain(preludes))


def check_own_type(relation_type: Any) -> str:
    """A relation type a caller may relate, correct or unrelate: not one kept for identity links (``same_person``,
    ``may_be_same_person``: only ``identity link``/``unlink`` write them, in both ledgers at once). Raises
    BadInput."""
    relation_type = check_relation_type(relation_type)
    if relation_type in IDENTITY_TYPES:
        raise BadInput("relation_type", f"{relation_type!r} is kept for identity links",
                       "link two user ids with identity link (and end it with identity unlink)")
    return relation_type


def _provenance(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if k in ("observed_at", "source", "source_ref", "actor", "trace_id")}


def _subject(rows: list[dict[str, Any]], of: str | None) -> dict[str, Any]:
    if of is None:
        return {"entity_id": SELF, "name": USER_NAME}
    return _existing(rows, of, "of")


def _existing(rows: list[dict[str, Any]], ref: str, field: str) -> dict[str, Any]:
    found = resolve(rows, ref, field)
    if found is None:
        raise BadInput(field, f"{ref!r} names no entity of this user",
                       "relate it first, or name one listed by entities")
    return found


def entity_events(user_id: str, entity_id: str, kind: str, name: str, aliases: list[str] | None, new: bool,
                   fields: dict[str, Any]) -> Any:
    """The prelude of a save (``LedgerApplication.execute``): the entity's ``EntityRecorded`` when new, an
    ``EntityRevised`` when it gains aliases or a kind, else nothing (None)."""
    if not new and aliases is None:
        return None
    provenance = {k: fields.get(k) for k in ("source_ref", "actor", "trace_id")}
    source = fields.get("source") or "user_statement"

    def prelude(app: Any, recorded_at: datetime) -> list[Any]:
        sid = entity_stream_id(user_id, entity_id)
        agg = Entity.shell(sid, recorded_at) if new else app.repository.get(sid)
        return [agg.record(user_id=user_id, entity_id=entity_id, kind=kind, name=name, aliases=aliases or [],
                           source=source, recorded_at=recorded_at, **provenance)]

    return prelude


def chain(preludes: list[Any]) -> Any:
    """One prelude (:func:`entity_events`) saving the events of each of ``preludes`` in turn; None for none."""
    if not preludes:
        return None
    return lambda app, recorded_at: [e for p in preludes for e in p(app, recorded_at)]


def relation_command(op: str, user_id: str, subject: str, relation_type: str, obj: str, *,
                     misreported: bool = False, **fields: Any) -> RelationCommand:
    """A validated relation command: ``obj`` is ``subject``'s ``relation_type`` (``subject``: ``self`` or an
    entity id); a type's label is its sensitivity unless ``fields`` give one. Raises BadInput."""
    data = _common(fields)
    if op != "retract":
        data["value"] = obj
        if RELATION_TYPES.get(relation_type).sensitivity and "sensitivity" not in data:
            data["sensitivity"] = RELATION_TYPES.get(relation_type).sensitivity
    else:
        data = {k: v for k, v in data.items() if k not in ("text", "valid_from", "confidence", "sensitivity")}
    plain = validate_command({**data, "op": op, "user_id": user_id, "key": relation_key(subject, relation_type, obj)})
    return RelationCommand(**plain.model_dump(exclude_none=True), subject=subject, relation_type=relation_type,
                           object=obj, misreported=misreported)


def _receipt(r: Receipt, subject: str, relation_type: str, obj: str, name: str, created: list[str]) -> RelationReceipt:
    return RelationReceipt(**r.model_dump(exclude={"shard"}), subject_id=subject, relation_type=relation_type,
                           entity_id=obj, entity=name, created=created)


# ------------------------------------------------------------------------------------------------------------ reads


def entities(ml: Store, user_id: str, grant: Any) -> Entities:
    """The user's entities by name. One the user reaches only through a labelled relation the ``grant`` does not
    allow (Dr. Lee behind ``doctor_of``, and the clinic Dr. Lee works at) is withheld: name and aliases null,
    ``withheld`` the label. One shown because the grant allows such a relation is recorded as a disclosure of the
    labelled relations that tie it (any version, any time: an entity has no valid time of its own)."""
    from .sensitivity import record_disclosures

    with ml.db.read() as cur:
        rows = ml.relations_projection.entities(cur, user_id)
    hidden, shown = hidden_entities(ml, user_id, grant)
    out = []
    for r in rows:
        label = hidden.get(r["entity_id"])
        out.append(EntityView(entity_id=r["entity_id"], kind=r["kind"], name=None if label else r["name"],
                              aliases=None if label else r["aliases"], recorded_at=from_micros(r["recorded_at"]),
                              withheld=label))
    record_disclosures(ml, user_id, sorted(shown), purpose=grant.purpose, trace_id=grant.trace_id)
    out.sort(key=lambda v: (v.name is None, v.name or "", v.entity_id))  # a withheld name's place tells nothing
    return Entities(user_id=user_id, entities=out)


def hidden_entities(ml: Store, user_id: str, grant: Any) -> tuple[dict[str, str], set[tuple[str, int, str]]]:
    """The entities the user reaches only through a labelled relation ``grant`` does not allow (entity id -> the
    label), whose names no read shows, whatever relation it reaches them by; and the ``(key, version, label)`` of
    the labelled relations tying the entities shown because the grant allows them (to record as disclosures)."""
    with ml.db.read() as cur:
        cur.execute(f"SELECT key, version, subject, object, sensitivity FROM {ml.relations_projection.table('versions')} "
                    "WHERE user_id = ? AND effect IN ('new', 'supersede', 'backfill', 'correct')", (user_id,))
        edges = [(k, int(v), s, o, lab) for k, v, s, o, lab in cur.fetchall()]
    if not any(lab is not None for *_, lab in edges):
        return {}, set()
    free = _reach(edges, lambda lab: lab is None)
    allowed = _reach(edges, lambda lab: lab is None or lab in grant.labels)
    behind = _reach(edges, lambda lab: True)
    hidden: dict[str, str] = {}
    shown: set[tuple[str, int, str]] = set()
    for eid in behind - {SELF}:
        if eid not in allowed:
            hidden[eid] = next((lab for _, _, s, o, lab in edges if lab is not None and lab not in grant.labels
                                and (s == eid or o == eid or s in behind - allowed or o in behind - allowed)),
                               "withheld")
        elif eid not in free:
            shown.update((k, v, lab) for k, v, s, o, lab in edges if lab is not None and eid in (s, o))
    return hidden, shown


def _reach(edges: list[tuple[str, int, str, str, str | None]], passes: Any) -> set[str]:
    """The nodes reached from the user along ``edges`` (either direction) whose label ``passes``."""
    seen, todo = {SELF}, [SELF]
    while todo:
        node = todo.pop()
        for _, _, s, o, lab in edges:
            if node in (s, o) and passes(lab):
                other = o if s == node else s
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
    return seen


def relations(ml: Store, user_id: str, entity: str | None, hops: int, as_of: Any, valid_at: Any,
              grant: Any) -> Relations:
    """The relations reached from the user (or ``entity``) in 1 to ``hops`` hops, true at ``valid_at`` (default:
    now) as believed at ``as_of`` (default: now); labelled edges gated by ``grant`` (see the module docstring)."""
    from .sensitivity import record_disclosures

    hops = check_hops(hops)
    as_of_dt = None if as_of is None else parse_instant(as_of, "as_of")
    valid_dt = now_utc() if valid_at is None else parse_instant(valid_at, "valid_at")
    proj = ml.relations_projection
    with ml.db.read() as cur:
        rows = proj.entities(cur, user_id)
        edges = proj.edges(cur, user_id, to_micros(valid_dt), to_micros(as_of_dt))
    start = SELF if entity is None else _existing(rows, check_name(entity, "entity"), "entity")["entity_id"]
    by_id = {r["entity_id"]: r for r in rows}
    secret, _ = hidden_entities(ml, user_id, grant)  # behind a labelled tie: never named, by any relation
    for e in edges:
        label = e["sensitivity"]
        e["withheld"] = (label if label is not None and label not in grant.labels
                         else secret.get(e["subject"]) or secret.get(e["object"]))
    from projections.relations import walk

    out: list[RelationEdge] = []
    shown: set[tuple[str, int, str]] = set()
    for hop, path, e in walk(edges, start, hops):
        hidden = e["withheld"]
        if e["sensitivity"] is not None and not hidden:
            shown.add((e["key"], int(e["version"]), e["sensitivity"]))
        subj = by_id.get(e["subject"])
        obj = by_id.get(e["object"])
        subject_name = USER_NAME if e["subject"] == SELF else (subj["name"] if subj and not hidden else None)
        obj_name = obj["name"] if obj else None
        names = [USER_NAME if n == SELF else (by_id[n]["name"] if n in by_id and n not in secret else None)
                 for n in path]
        if hidden:
            names = names[:-1] + [None] if path[-1] in (e["object"], e["subject"]) else names
        out.append(RelationEdge(
            hops=hop, path=names, subject_id=e["subject"], subject=subject_name, relation_type=e["relation_type"],
            entity_id=e["object"], entity=None if hidden else obj_name, kind=obj["kind"] if obj else None,
            aliases=None if hidden or obj is None else obj["aliases"],
            reads=None if hidden else RELATION_TYPES.get(e["relation_type"]).reads(subject_name or "?", obj_name or "?"),
            valid_from=from_micros(e["valid_from"]), valid_to=_open_end(e["valid_to"]), status=e["status"],
            source=e["source"], source_ref=e["source_ref"], confidence=e["confidence"],
            recorded_at=from_micros(e["recorded_at"]), sensitivity=e["sensitivity"], withheld=hidden,
            key=e["key"], version=int(e["version"])))
    record_disclosures(ml, user_id, sorted(shown), purpose=grant.purpose, trace_id=grant.trace_id)
    return Relations(user_id=user_id, start=start, hops=hops, as_of=as_of_dt, valid_at=valid_dt, relations=out)


def _open_end(us: int) -> datetime | None:
    from ledger.timeutil import OPEN

    return None if us == OPEN else from_micros(us)


def versions(ml: Store, user_id: str, grant: Any, *, record: bool = True) -> list[RelationVersion]:
    """Every relation version of the user in log order (``export``): a labelled one whose label ``grant`` does not
    let out keeps its place, its ``text`` and ``reason`` null and ``withheld`` the label; each labelled one shown is
    recorded as a disclosure with the grant's purpose (``record=False``: the caller has recorded them, as
    :func:`entities` does for the relations that tie the entities it shows)."""
    from .sensitivity import record_disclosures

    with ml.db.read() as cur:
        rows = ml.relations_projection.versions(cur, user_id)
    secret, _ = hidden_entities(ml, user_id, grant)
    out, shown = [], set()
    for r in rows:
        label = r["sensitivity"]
        hidden = (label if label is not None and label not in grant.labels
                  else secret.get(r["subject"]) or secret.get(r["object"]))
        if label is not None and not hidden:
            shown.add((r["key"], int(r["version"]), label))
        out.append(RelationVersion(
            key=r["key"], version=int(r["version"]), kind=r["kind"], effect=r["effect"], subject_id=r["subject"],
            relation_type=r["relation_type"], entity_id=r["object"], text=None if hidden else r["text"],
            reason=None if hidden else r["reason"], observed_at=_instant(r["observed_at"]),
            valid_from=_instant(r["valid_from"]), valid_to=_instant(r["valid_to"]), status=r["status"],
            source=r["source"], source_ref=r["source_ref"], confidence=r["confidence"], sensitivity=label,
            recorded_at=from_micros(r["recorded_at"]), position=int(r["position"]), withheld=hidden))
    if record:
        record_disclosures(ml, user_id, sorted(shown), purpose=grant.purpose, trace_id=grant.trace_id)
    return out


def labels(ml: Store, user_id: str) -> frozenset[str]:
    """Every label among the user's relation versions: with the facts', the grant of a complete export."""
    with ml.db.read() as cur:
        return frozenset(r["sensitivity"] for r in ml.relations_projection.versions(cur, user_id)
                         if r["sensitivity"] is not None)


def _instant(us: Any) -> datetime | None:
    return None if us is None else from_micros(us)

