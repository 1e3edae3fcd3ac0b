"""Identity links: two user ids of one person (the phone app's and the web's), linked by a caller, never by the
ledger (docs/relations.md, "Identity links").

A link is a relation in each user's own ledger, recorded in one save: ``same_person`` (confirmed) or
``may_be_same_person`` (awaiting confirmation), from the user to an entity of kind ``other`` named ``user:<the
other id>``. So a link is bitemporal like every relation (``relations --valid-at`` says whether the two were linked
on a date), audited, erased with either user's key, and undone by ``identity unlink``.

Reads: a ``may_be`` link is shown to the agent as such (the context's People section) and merges nothing. A confirmed
link makes ``search`` of either id also search the other's memories, each hit with the ``user_id`` it came from;
through a server only when the API key holds both ids. An erased id is left out of every read: its memories are
gone, and the other's own stay.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ledger.errors import BadInput
from ledger.relations import SELF, new_entity_id
from ledger.schemas import Receipt, check_user_id

from .locks import user_lock
from .relations import chain, entity_events, relation_command
from .store import Store

CONFIRMED, MAY_BE = "same_person", "may_be_same_person"
#: a link's status -> the relation type that records it
STATUS_TYPES = {"confirmed": CONFIRMED, "may_be": MAY_BE}
PREFIX = "user:"


class IdentityLink(BaseModel):
    """One identity link of a user (``memledger identity list USER --json``): the ``other`` user id, ``status``
    (``confirmed`` or ``may_be``), ``since`` (valid time, UTC), and ``erased`` when the other id was erased (its
    memories are no longer read)."""

    model_config = ConfigDict(defer_build=True)
    other: str
    status: Literal["confirmed", "may_be"]
    since: datetime
    erased: bool = False


class IdentityLinks(BaseModel):
    """The answer of ``identity list``: the user's current identity links."""

    model_config = ConfigDict(defer_build=True)
    user_id: str
    links: list[IdentityLink]


class IdentityReceipt(BaseModel):
    """What ``identity link`` / ``identity unlink`` return: the two ids, the link's status after it (``None``:
    unlinked) and the receipts of the relation versions recorded in each user's ledger."""

    model_config = ConfigDict(defer_build=True)
    user_id: str
    other: str
    status: Literal["confirmed", "may_be"] | None
    receipts: list[Receipt]


def check_status(value: Any) -> str:
    """``confirmed`` or ``may_be``. Raises BadInput."""
    if value not in STATUS_TYPES:
        raise BadInput("status", f"{value!r} is not a link status",
                       "say confirmed (the same person) or may_be (to confirm)")
    return str(value)


def _pair(user_id: Any, other: Any) -> tuple[str, str]:
    user_id, other = check_user_id(user_id), check_user_id(other, "other")
    if user_id == other:
        raise BadInput("other", "is the user itself", "link two different user ids")
    return user_id, other


def _heads(ml: Store, user_id: str, other: str) -> tuple[str | None, dict[str, list[dict[str, Any]]]]:
    """The entity standing for ``other`` in ``user_id``'s ledger (or None) and its live links by type."""
    proj = ml.relations_projection
    with ml.db.read() as cur:
        eid = next((r["entity_id"] for r in proj.entities(cur, user_id) if r["name"] == PREFIX + other), None)
        live = {t: [h for h in proj.live_keys(cur, user_id, SELF, t) if h["object"] == eid] for t in STATUS_TYPES.values()}
    return eid, live


def link(ml: Store, user_id: str, other: str, status: str, *, reason: str | None = None,
         **fields: Any) -> IdentityReceipt:
    """Link two user ids as the same person (``confirmed``) or possibly so (``may_be``), in both ledgers, in one
    save. Linking again with the other status replaces the link (a ``may_be`` confirmed, or a confirmation
    withdrawn to ``may_be``); the same status again reaffirms it.

    Raises:
        BadInput: the same id twice, an unknown status, an erased id (nothing written).
    """
    user_id, other = _pair(user_id, other)
    status = check_status(status)
    ml.refuse_erased([user_id])
    try:
        ml.refuse_erased([other])
    except BadInput as exc:
        raise BadInput("other", exc.problem, "link ids that were not erased") from None
    rtype = STATUS_TYPES[status]
    cmds: list[Any] = []
    preludes = []
    first, second = sorted((user_id, other))
    with user_lock(ml, first), user_lock(ml, second):
        ml.before_read()
        for me, them in ((user_id, other), (other, user_id)):
            eid, live = _heads(ml, me, them)
            if eid is None:
                eid = new_entity_id()
                preludes.append(entity_events(me, eid, "other", PREFIX + them, [], True, fields))
            for t, heads in live.items():
                if t != rtype and heads:  # the other status ends where this one begins
                    cmds.append(relation_command("retract", me, SELF, t, eid, reason=reason or f"now {status}",
                                                 **fields))
            cmds.append(relation_command("assert", me, SELF, rtype, eid, text=f"{me} and {them}: {status}",
                                         reason=reason, **fields))
        receipts = ml.execute(cmds, prelude=chain(preludes))
    return IdentityReceipt(user_id=user_id, other=other, status=status,  # type: ignore[arg-type]
                           receipts=[r for r in receipts if r.effect != "retract"])


def unlink(ml: Store, user_id: str, other: str, *, reason: str | None = None, **fields: Any) -> IdentityReceipt:
    """Withdraw the link between two user ids, in both ledgers, in one save. Raises BadInput: no current link."""
    user_id, other = _pair(user_id, other)
    first, second = sorted((user_id, other))
    cmds: list[Any] = []
    with user_lock(ml, first), user_lock(ml, second):
        ml.before_read()
        for me, them in ((user_id, other), (other, user_id)):
            eid, live = _heads(ml, me, them)
            for t, heads in live.items():
                if heads and eid is not None:
                    cmds.append(relation_command("retract", me, SELF, t, eid, reason=reason or "unlinked", **fields))
        if not cmds:
            raise BadInput("other", f"{user_id!r} and {other!r} are not linked", "list the links with identity list")
        receipts = ml.execute(cmds)
    return IdentityReceipt(user_id=user_id, other=other, status=None, receipts=receipts)


def links(ml: Store, user_id: str) -> IdentityLinks:
    """The user's current identity links, confirmed first, then by the other id."""
    from ledger.timeutil import from_micros

    from .reads import identity_rows

    user_id = check_user_id(user_id)
    out = [IdentityLink(other=them, status="confirmed" if t == CONFIRMED else "may_be", since=from_micros(vf),
                        erased=erased) for them, t, vf, erased in identity_rows(ml, user_id)]
    return IdentityLinks(user_id=user_id, links=sorted(out, key=lambda x: (x.status != "confirmed", x.other)))


__all__ = ["CONFIRMED", "MAY_BE", "IdentityLink", "IdentityLinks", "IdentityReceipt", "check_status", "link", "links",
           "unlink"]
