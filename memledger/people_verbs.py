"""The verbs of people and relations, as :class:`memledger.api.MemoryLedger` offers them (a mixin of the ledger:
each verb validates, then calls the capability in memledger/relations.py; docs/relations.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ledger.schemas import Receipt

if TYPE_CHECKING:
    from . import identity, relations


class PeopleVerbs:
    """``relate``, ``correct_relation``, ``unrelate``, ``entities``, ``relations`` and the identity links of a
    ledger (``self`` is the opened :class:`memledger.store.Store`)."""

    def relate(self, user_id: str, relation_type: str, entity: str, *, of: str | None = None,
               aliases: list[str] | str | None = None, kind: str | None = None, text: str | None = None,
               observed_at: Any = None, valid_from: Any = None, valid_to: Any = None, source: str | None = None,
               source_ref: str | None = None, session_id: str | None = None, actor: str | None = None,
               trace_id: str | None = None, confidence: float | None = None, reason: str | None = None,
               sensitivity: str | None = None) -> relations.RelationReceipt:
        """Record that ``entity`` is the ``relation_type`` of ``of`` (an entity's name or id; default: the user):
        ``ml.relate("u1", "sister", "Anna", aliases=["my sister"])``, ``ml.relate("u1", "lives_in", "Berlin",
        of="Anna")``.

        ``entity`` is an entity id, or a name or alias matching one of the user's entities (case-insensitive), or a
        new name, which creates an entity of ``kind`` (person, pet, place, organisation, other; default: the
        type's, ledger.relations.RELATION_TYPES); ``aliases`` are added to it. The relation is decided by the fact
        policy: a single-valued type (manager_of, wife, lives_in, ...) supersedes the previous entity at
        ``valid_from`` (default ``observed_at``, default now; aware instants, stored in UTC); the same entity again
        reaffirms; an ``agent_inference`` against a ``user_statement`` is recorded as contesting it. A type's
        default label (doctor_of: ``health``) applies unless ``sensitivity`` is given.

        Returns a :class:`memledger.relations.RelationReceipt`. Raises BadInput naming the field (nothing written):
        an ambiguous name (the fix lists the ids), an unknown ``of``, a malformed type, kind or instant.
        """
        from . import relations

        return relations.relate(self, user_id, relation_type, entity, of=of, aliases=aliases, kind=kind, text=text,
                                observed_at=observed_at, valid_from=valid_from, valid_to=valid_to, source=source,
                                source_ref=source_ref, session_id=session_id, actor=actor, trace_id=trace_id,
                                confidence=confidence, reason=reason, sensitivity=sensitivity)

    def correct_relation(self, user_id: str, relation_type: str, entity: str, *, of: str | None = None,
                         was: str | None = None, reason: str | None = None, text: str | None = None,
                         observed_at: Any = None, source: str | None = None, source_ref: str | None = None,
                         session_id: str | None = None, actor: str | None = None, trace_id: str | None = None,
                         confidence: float | None = None) -> relations.RelationReceipt:
        """Correct a relation: ``entity`` is the ``relation_type`` and the one recorded never was. For a
        single-valued type the current entity is replaced over its whole valid range (history keeps it as
        *misreported*; ``was``, if given, must name it); for a multi-valued type ``was`` names the wrong one, which
        is emptied as misreported while ``entity`` is related from the same save.

        Raises BadInput (nothing written): nothing current to correct, ``was`` missing or not current.
        """
        from . import relations

        return relations.correct_relation(self, user_id, relation_type, entity, of=of, was=was, reason=reason,
                                          text=text, observed_at=observed_at, source=source, source_ref=source_ref,
                                          session_id=session_id, actor=actor, trace_id=trace_id,
                                          confidence=confidence)

    def unrelate(self, user_id: str, relation_type: str, entity: str | None = None, *, of: str | None = None,
                 valid_to: Any = None, reason: str | None = None, observed_at: Any = None, source: str | None = None,
                 source_ref: str | None = None, session_id: str | None = None, actor: str | None = None,
                 trace_id: str | None = None) -> relations.RelationReceipt:
        """Retract a relation (``retract`` for facts): withdrawn entirely, or — with ``valid_to`` — true only until
        then ("Dana left in May"). ``entity`` may be left out when the type has one current entity.

        Raises BadInput (nothing written): no such current relation, or an ``agent_inference`` retracting what the
        user said.
        """
        from . import relations

        return relations.unrelate(self, user_id, relation_type, entity, of=of, valid_to=valid_to, reason=reason,
                                  observed_at=observed_at, source=source, source_ref=source_ref,
                                  session_id=session_id, actor=actor, trace_id=trace_id)

    def entities(self, user_id: str, *, allow_sensitive: Any = None, purpose: str | None = None,
                 trace_id: str | None = None, after: int | Receipt | Iterable[Receipt] | None = None,
                 timeout: float = 10.0) -> relations.Entities:
        """The user's entities (``memledger entities USER --json``): ``.entities``, by name, each with id, kind,
        name, aliases and when first recorded. An entity tied to the user only by relations labelled outside ``allow_sensitive`` is
        ``withheld`` (name and aliases None); one shown because of its label is recorded as a disclosure."""
        from ledger.schemas import check_user_id

        from . import relations, sensitivity

        user_id = check_user_id(user_id)
        grant = sensitivity.check_grant(allow_sensitive, purpose, trace_id)
        self.before_read(after, timeout)
        return relations.entities(self, user_id, grant)

    def relations(self, user_id: str, entity: str | None = None, hops: int = 1, as_of: Any = None,
                  valid_at: Any = None, *, allow_sensitive: Any = None, purpose: str | None = None,
                  trace_id: str | None = None, after: int | Receipt | Iterable[Receipt] | None = None,
                  timeout: float = 10.0) -> relations.Relations:
        """The relations reached from the user (or ``entity``, a name, alias or id) in 1 to ``hops`` hops (at most
        3), true at ``valid_at`` (default now) as the ledger believed at ``as_of`` (system time; default now): "who
        was my manager on 2024-03-01" is ``relations(u, valid_at="2024-03-01T00:00:00Z")``, and with ``as_of`` it is
        answered as it was known then. Instants are aware ISO 8601 strings or datetimes (UTC in the answer).

        A relation labelled (doctor_of: ``health``) shows its entity only when ``allow_sensitive`` names the label,
        each one shown recorded as a disclosure with ``purpose``; otherwise it is ``withheld``, and the walk does
        not go through it. Raises BadInput: ``hops`` outside 1-3, an unknown or ambiguous ``entity``, a naive instant.
        """
        from ledger.schemas import check_user_id

        from . import relations, sensitivity

        user_id = check_user_id(user_id)
        grant = sensitivity.check_grant(allow_sensitive, purpose, trace_id)
        relations.check_hops(hops)
        self.before_read(after, timeout)
        return relations.relations(self, user_id, entity, hops, as_of, valid_at, grant)

    # -- identity links (memledger/identity.py) ----------------------------------------------------------------
    def identity_link(self, user_id: str, other: str, status: str = "may_be", *, reason: str | None = None,
                      observed_at: Any = None, valid_from: Any = None, source: str | None = None,
                      actor: str | None = None, trace_id: str | None = None) -> identity.IdentityReceipt:
        """Link two user ids of one person: ``status="may_be"`` (shown to the agent, merges nothing) or
        ``"confirmed"`` (a search of either also reads the other's memories, each hit with its ``user_id``). Nothing
        links by itself. Raises BadInput (nothing written): the same id twice, an unknown status, an erased id."""
        from . import identity

        return identity.link(self, user_id, other, status, reason=reason, observed_at=observed_at,  # type: ignore[arg-type]
                             valid_from=valid_from, source=source, actor=actor, trace_id=trace_id)

    def identity_unlink(self, user_id: str, other: str, *, reason: str | None = None, observed_at: Any = None,
                        source: str | None = None, actor: str | None = None,
                        trace_id: str | None = None) -> identity.IdentityReceipt:
        """Withdraw the link between two user ids (both ledgers, one save). Raises BadInput: they are not linked."""
        from . import identity

        return identity.unlink(self, user_id, other, reason=reason, observed_at=observed_at,  # type: ignore[arg-type]
                               source=source, actor=actor, trace_id=trace_id)

    def identity_links(self, user_id: str, *, after: int | Receipt | Iterable[Receipt] | None = None,
                       timeout: float = 10.0) -> identity.IdentityLinks:
        """The user's current identity links (``memledger identity list USER --json``), confirmed first."""
        from . import identity

        self.before_read(after, timeout)  # type: ignore[attr-defined]
        return identity.links(self, user_id)  # type: ignore[arg-type]

