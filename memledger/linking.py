"""``remember`` and the relation layer: the people a statement names are linked, and a statement about one of them
lands in their slots (the rules are in ledger/mentions.py; docs/relations.md).

Called inside ``remember``'s user lock, so two statements naming a new person at once never create them twice:
:func:`memledger.reads.people` reads the user's entities and ties, :func:`plan` decides what each mention does (an entity created,
a tie recorded, nothing, or an ambiguity reported), and :func:`commands` turns the plan into the relation commands
and entity events recorded in the statement's own save.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ledger.errors import BadInput
from ledger.mentions import Known, Reading, fold, mentions, new_slug, read, slugs
from ledger.relations import RELATION_TYPES, SELF, new_entity_id
from ledger.schemas import EntityLink, FactCommand, Receipt
from ledger.slots import KeyRegistry

from .relations import chain, entity_events, relation_command


@dataclass
class Link:
    """What one mention does: ``effect`` as in :class:`ledger.schemas.EntityLink`; ``entity_id`` (a new one when
    ``created``), ``write``: a relation is recorded."""

    name: str
    relation_type: str
    effect: str
    entity_id: str | None = None
    write: bool = False
    candidates: list[str] = field(default_factory=list)
    subject: str = SELF


@dataclass
class Plan:
    """The mentions' links, and the slug each person named now is keyed under, by (type, folded name)."""

    links: list[Link] = field(default_factory=list)
    pending: dict[tuple[str, str], str] = field(default_factory=dict)


def about_whom(known: list[Known], ref: str) -> Known:
    """The one linked person ``ref`` names (an entity id, a name or an alias), for ``remember --about``.

    Raises:
        BadInput: ``about`` names no one, several people, or someone with no tie to the user to file it under.
    """
    from ledger.relations import ENTITY_ID_RE

    found = [k for k in known if (k.entity_id == ref if ENTITY_ID_RE.match(ref) else fold(ref) in k.names())]
    if not found:
        raise BadInput("about", f"{ref!r} names no one linked to this user",
                       "relate them first (relate USER sister Anna), or name one listed by entities")
    if len(found) > 1:
        raise BadInput("about", f"{ref!r} names {len(found)} people: " + ", ".join(k.entity_id for k in found),
                       "pass the entity id of the one you mean")
    if not found[0].roles:
        raise BadInput("about", f"{found[0].name!r} has no tie to the user to file the statement under",
                       "relate them to the user first (e.g. relate USER friend NAME)")
    return found[0]


def plan(text: str, known: list[Known], user_id: str | None = None, about: Known | None = None) -> Plan:
    """Decide each mention of ``text``: the one entity of that name tied so already (``known``), the one entity of
    that name, tied to the user by nothing yet (``linked``), none (``created``), several, or one tied by another
    role ("my friend Anna" while Anna is the sister: another Anna, or the same? ``ambiguous``), or a single-valued
    tie someone else holds (``not_linked``: "my wife Lena" while Maria is the wife). What is not certain is for the
    user to settle (``relate``), never guessed."""
    out = Plan()
    taken = set(slugs(known).values())
    if about is not None:
        # said by or for a relative: the people it names are theirs ("my husband Mark": Anna's husband)
        for m in mentions(text):
            named = [k for k in known if fold(m.name) in k.names() and k.entity_id != about.entity_id]
            if len(named) > 1:
                out.links.append(Link(m.name, m.relation_type, "ambiguous", candidates=[k.entity_id for k in named],
                                      subject=about.entity_id))
            elif named:
                out.links.append(Link(m.name, m.relation_type, "linked", named[0].entity_id, write=True,
                                      subject=about.entity_id))
            else:
                out.links.append(Link(m.name, m.relation_type, "created", new_entity_id(), write=True,
                                      subject=about.entity_id))
        return out
    for m in mentions(text, user_id):
        named = [k for k in known if fold(m.name) in k.names()]
        holders = [k for k in named if m.relation_type in k.current]
        single = RELATION_TYPES.get(m.relation_type).cardinality == "single"
        held = [k for k in known if m.relation_type in k.current and k not in named]
        if len(holders) == 1:
            out.links.append(Link(m.name, m.relation_type, "known", holders[0].entity_id))
        elif len(holders) > 1 or len(named) > 1:
            out.links.append(Link(m.name, m.relation_type, "ambiguous",
                                  candidates=[k.entity_id for k in (holders or named)]))
        elif single and held:
            out.links.append(Link(m.name, m.relation_type, "not_linked", candidates=[held[0].entity_id]))
        elif named and named[0].roles:
            # the one Anna known is the sister: "my friend Anna" may be another Anna, or the same one
            out.links.append(Link(m.name, m.relation_type, "ambiguous", candidates=[named[0].entity_id]))
        elif named:
            k = named[0]
            out.links.append(Link(m.name, m.relation_type, "linked", k.entity_id, write=True))
            if not k.roles:  # its first tie to the user: its slots are keyed by this one
                slug = new_slug(m.relation_type, k.name, k.entity_id, taken)
                taken.add(slug)
                out.pending[(m.relation_type, fold(m.name))] = slug
        else:
            eid = new_entity_id()
            out.links.append(Link(m.name, m.relation_type, "created", eid, write=True))
            slug = new_slug(m.relation_type, m.name, eid, taken)
            taken.add(slug)
            out.pending[(m.relation_type, fold(m.name))] = slug
    return out


def reading(text: str, known: list[Known], the_plan: Plan, registry: KeyRegistry, user_id: str,
            about: Known | None = None) -> Reading:
    """:func:`ledger.mentions.read` with the plan's slugs for the people named now."""
    return read(text, known, registry, user_name=user_id, pending=the_plan.pending, about=about)


def type_candidates(candidates: list[Any], known: list[Known], registry: KeyRegistry, user_id: str) -> None:
    """Type each candidate memory as the statement is typed (a memory that opens with a linked person's name is
    theirs), so that the two meet in the same person's slots."""
    if not known:
        return
    owner = {slug: next(k for k in known if k.entity_id == eid) for eid, slug in slugs(known).items()}
    for c in candidates:
        if getattr(c, "typing", None) is None:
            # a memory kept under a person (family.sister-beth.*, "I like black coffee" said by Beth) is theirs
            parts = c.key.split(".")
            mine = owner.get(parts[1]) if len(parts) > 2 and parts[0] == "family" else None
            c.typing = read(c.text, known, registry, user_name=user_id, about=mine).typing


def commands(the_plan: Plan, template: FactCommand, key: str) -> tuple[list[Any], Callable[..., list[Any]] | None]:
    """The relation commands of the plan's writes and the prelude recording its new entities, for the save that
    records the statement on ``key``."""
    cmds: list[Any] = []
    preludes = []
    t = template.model_dump(exclude_none=True)
    fields = {k: t[k] for k in ("observed_at", "valid_from", "source", "source_ref", "session_id", "actor",
                                "trace_id", "confidence") if k in t}
    for link in the_plan.links:
        if not link.write or link.entity_id is None:
            continue
        if link.effect == "created":
            preludes.append(entity_events(template.user_id, link.entity_id, "person", link.name, [], True, fields))
        cmds.append(relation_command("assert", template.user_id, link.subject, link.relation_type, link.entity_id,
                                     text=template.text, reason=f"remember: named in the statement recorded at {key}",
                                     **fields))
    return cmds, chain(preludes)


def receipt_links(the_plan: Plan, rd: Reading, receipts: list[Receipt]) -> list[EntityLink]:
    """The receipt's ``entities``: each mention with the relation version recorded for it, then the person the
    statement is about or the shared name it opens with."""
    out: list[EntityLink] = []
    recorded = iter(receipts)
    for link in the_plan.links:
        r = next(recorded, None) if link.write and link.entity_id is not None else None
        out.append(EntityLink(name=link.name, relation_type=link.relation_type, effect=link.effect,  # type: ignore[arg-type]
                              entity_id=link.entity_id, key=r.key if r else None, version=r.version if r else None,
                              candidates=link.candidates))
    if rd.about is not None and not any(e.entity_id == rd.about.entity_id for e in out):
        out.append(EntityLink(name=rd.about.name, relation_type=(rd.about.roles or (None,))[0], effect="about",
                              entity_id=rd.about.entity_id))
    for e in out:
        if e.effect in ("known", "about") and e.relation_type and RELATION_TYPES.get(e.relation_type).sensitivity:
            e.relation_type = None  # a labelled tie (doctor_of) the statement did not state is not told back
    for name, people_ in rd.ambiguous:
        out.append(EntityLink(name=name, relation_type=None, effect="ambiguous",
                              candidates=[k.entity_id for k in people_]))
    return out


def describe(links: list[EntityLink]) -> str:
    """The links in a line of the statement's evidence (its event's reason)."""
    return "entities: " + "; ".join(
        f"{e.name} {e.effect}" + (f" {e.entity_id}" if e.entity_id else "")
        + (f" as {e.relation_type}" if e.relation_type else "")
        + (f" (one of {', '.join(e.candidates)})" if e.candidates else "") for e in links)


__all__ = ["Link", "Plan", "about_whom", "commands", "describe", "plan", "reading", "receipt_links", "type_candidates"]
