"""CLI verbs on people, places and organisations: relate, correct-relation, unrelate, relations, entities
(docs/relations.md)."""

from __future__ import annotations

from typing import Any, List, Optional

import typer
from rich.table import Table

from .common import (ActorOpt, AfterOpt, AllowSensitiveOpt, ConfidenceOpt, JsonOpt, ObservedOpt, PurposeOpt,
                     ReasonOpt, SessionOpt, SourceOpt, SourceRefOpt, TextOpt, TimeoutOpt, TraceOpt, app, emit_json,
                     grant, open_ledger, out)

OfOpt = typer.Option(None, "--of", help="Whose relation: an entity's name, alias or id (default: the user).")
ValidAtOpt = typer.Option(None, "--valid-at", help="True at this instant (ISO 8601 with offset; default now).")
AsOfOpt = typer.Option(None, "--as-of", help="As the ledger believed at this system time (default now).")


def _emit(r: Any, as_json: bool) -> None:
    if as_json:
        emit_json(r.model_dump(mode="json"))
        return
    made = f" (new entity {', '.join(r.created)})" if r.created else ""
    out.print(f"{r.kind} {r.user_id} {r.relation_type} {r.entity} [{r.effect}] {r.key} v{r.version} "
              f"at position {r.position}{made}")


@app.command("relate")
def relate_cmd(
    ctx: typer.Context, user: str, relation_type: str, entity: str, of: Optional[str] = OfOpt,
    alias: Optional[List[str]] = typer.Option(None, "--alias", help="Another name of the entity (repeatable): "
                                              "\"my sister\", 我姐姐."),
    kind: Optional[str] = typer.Option(None, "--kind", help="person | pet | place | organisation | other "
                                       "(a new entity; default by relation type)."),
    text: Optional[str] = TextOpt, observed_at: Optional[str] = ObservedOpt,
    valid_from: Optional[str] = typer.Option(None, "--valid-from", help="Start of validity (default observed-at)."),
    valid_to: Optional[str] = typer.Option(None, "--valid-to", help="End of validity, exclusive (default open)."),
    source: Optional[str] = SourceOpt, source_ref: Optional[str] = SourceRefOpt, session: Optional[str] = SessionOpt,
    confidence: Optional[float] = ConfidenceOpt, actor: Optional[str] = ActorOpt, trace: Optional[str] = TraceOpt,
    reason: Optional[str] = ReasonOpt,
    sensitivity: Optional[str] = typer.Option(None, "--sensitivity", help="Label such as health (default: the "
                                              "relation type's; doctor_of is health)."),
    as_json: bool = JsonOpt,
) -> None:
    """ENTITY is the RELATION_TYPE of USER (or of --of): `memledger relate u1 sister Anna --alias "my sister"`,
    `memledger relate u1 lives_in Berlin --of Anna`. A single-valued type (manager_of, wife, lives_in) supersedes
    the previous entity at --valid-from."""
    from memledger.relations import check_aliases, check_kind

    check_aliases(alias, "--alias")  # refused before the store is opened
    check_kind(kind, "--kind")
    with open_ledger(ctx) as ml:
        _emit(ml.relate(user, relation_type, entity, of=of, aliases=alias or None, kind=kind, text=text,
                        observed_at=observed_at, valid_from=valid_from, valid_to=valid_to, source=source,
                        source_ref=source_ref, session_id=session, confidence=confidence, actor=actor,
                        trace_id=trace, reason=reason, sensitivity=sensitivity), as_json)


@app.command("correct-relation")
def correct_relation_cmd(
    ctx: typer.Context, user: str, relation_type: str, entity: str, of: Optional[str] = OfOpt,
    was: Optional[str] = typer.Option(None, "--was", help="The entity recorded by mistake (required for a "
                                      "multi-valued type such as sister)."),
    reason: Optional[str] = ReasonOpt, text: Optional[str] = TextOpt, observed_at: Optional[str] = ObservedOpt,
    source: Optional[str] = SourceOpt, source_ref: Optional[str] = SourceRefOpt, session: Optional[str] = SessionOpt,
    confidence: Optional[float] = ConfidenceOpt, actor: Optional[str] = ActorOpt, trace: Optional[str] = TraceOpt,
    as_json: bool = JsonOpt,
) -> None:
    """ENTITY is the RELATION_TYPE, and the one recorded never was (history keeps it as misreported)."""
    with open_ledger(ctx) as ml:
        _emit(ml.correct_relation(user, relation_type, entity, of=of, was=was, reason=reason, text=text,
                                  observed_at=observed_at, source=source, source_ref=source_ref, session_id=session,
                                  confidence=confidence, actor=actor, trace_id=trace), as_json)


@app.command("unrelate")
def unrelate_cmd(
    ctx: typer.Context, user: str, relation_type: str, entity: Optional[str] = typer.Argument(None),
    of: Optional[str] = OfOpt,
    valid_to: Optional[str] = typer.Option(None, "--valid-to", help="True until then (default: withdrawn entirely)."),
    reason: Optional[str] = ReasonOpt, observed_at: Optional[str] = ObservedOpt, source: Optional[str] = SourceOpt,
    source_ref: Optional[str] = SourceRefOpt, session: Optional[str] = SessionOpt, actor: Optional[str] = ActorOpt,
    trace: Optional[str] = TraceOpt, as_json: bool = JsonOpt,
) -> None:
    """Retract USER's RELATION_TYPE relation (to ENTITY): withdrawn, or ended at --valid-to ("Dana left in May")."""
    with open_ledger(ctx) as ml:
        _emit(ml.unrelate(user, relation_type, entity, of=of, valid_to=valid_to, reason=reason,
                          observed_at=observed_at, source=source, source_ref=source_ref, session_id=session,
                          actor=actor, trace_id=trace), as_json)


@app.command("relations")
def relations_cmd(
    ctx: typer.Context, user: str,
    entity: Optional[str] = typer.Option(None, "--entity", help="Start from this entity (name, alias or id) "
                                         "instead of the user."),
    hops: int = typer.Option(1, "--hops", help="How far to walk: 1, 2 or 3."),
    as_of: Optional[str] = AsOfOpt, valid_at: Optional[str] = ValidAtOpt,
    allow_sensitive: Optional[List[str]] = AllowSensitiveOpt, purpose: Optional[str] = PurposeOpt,
    trace: Optional[str] = TraceOpt, after: Optional[int] = AfterOpt, timeout: float = TimeoutOpt,
    as_json: bool = JsonOpt,
) -> None:
    """USER's relations, walked 1 to 3 hops from the user (or --entity), true at --valid-at as believed at
    --as-of: `memledger relations u1 --valid-at 2024-03-01T00:00:00Z` says who the manager was then."""
    from memledger.relations import check_hops

    check_hops(hops, "--hops")
    g = grant(allow_sensitive, purpose)
    with open_ledger(ctx) as ml:
        r = ml.relations(user, entity, hops, as_of, valid_at, allow_sensitive=g, trace_id=trace, after=after,
                         timeout=timeout)
    if as_json:
        emit_json(r.model_dump(mode="json"))
        return
    if not r.relations:
        out.print(f"no relations of {r.user_id} from {r.start} at {r.valid_at.isoformat()}")
        return
    table = Table("hops", "path", "relation", "entity", "kind", "valid", "status")
    for e in r.relations:
        path = " → ".join(n if n is not None else f"withheld ({e.withheld})" for n in e.path)
        valid = f"{e.valid_from.date().isoformat()} .. {e.valid_to.date().isoformat() if e.valid_to else ''}"
        who = e.entity if e.entity is not None else f"withheld ({e.withheld})"
        table.add_row(str(e.hops), path, e.relation_type, who, e.kind or "", valid, e.status)
    out.print(table)


@app.command("entities")
def entities_cmd(
    ctx: typer.Context, user: str, allow_sensitive: Optional[List[str]] = AllowSensitiveOpt,
    purpose: Optional[str] = PurposeOpt, trace: Optional[str] = TraceOpt, after: Optional[int] = AfterOpt,
    timeout: float = TimeoutOpt, as_json: bool = JsonOpt,
) -> None:
    """USER's entities: id, kind, name and aliases."""
    g = grant(allow_sensitive, purpose)
    with open_ledger(ctx) as ml:
        r = ml.entities(user, allow_sensitive=g, trace_id=trace, after=after, timeout=timeout)
    if as_json:
        emit_json(r.model_dump(mode="json"))
        return
    table = Table("id", "kind", "name", "aliases")
    for e in r.entities:
        name = e.name if e.name is not None else f"withheld ({e.withheld})"
        table.add_row(e.entity_id, e.kind, name, ", ".join(e.aliases or []))
    out.print(table)


identity_app = typer.Typer(no_args_is_help=True, help="Identity links: two user ids of one person (docs/relations.md).")
app.add_typer(identity_app, name="identity")


@identity_app.command("link")
def identity_link_cmd(ctx: typer.Context, user: str, other: str,
                      may_be: bool = typer.Option(False, "--may-be", help="Possibly the same person: shown to the "
                                                  "agent as such, merges nothing."),
                      confirmed: bool = typer.Option(False, "--confirmed", help="The same person: a search of "
                                                     "either id also reads the other's memories."),
                      reason: Optional[str] = ReasonOpt, actor: Optional[str] = ActorOpt,
                      trace: Optional[str] = TraceOpt, as_json: bool = JsonOpt) -> None:
    """Link USER and OTHER as one person, --may-be or --confirmed (one of them), in both ledgers."""
    from ledger.errors import BadInput

    if may_be == confirmed:
        raise BadInput("--may-be/--confirmed", "give exactly one", "say --may-be (to confirm) or --confirmed")
    with open_ledger(ctx) as ml:
        r = ml.identity_link(user, other, "confirmed" if confirmed else "may_be", reason=reason, actor=actor,
                             trace_id=trace)
    if as_json:
        emit_json(r.model_dump(mode="json"))
        return
    out.print(f"linked {r.user_id} and {r.other}: {r.status} (positions "
              f"{', '.join(str(x.position) for x in r.receipts)})")


@identity_app.command("unlink")
def identity_unlink_cmd(ctx: typer.Context, user: str, other: str, reason: Optional[str] = ReasonOpt,
                        actor: Optional[str] = ActorOpt, trace: Optional[str] = TraceOpt,
                        as_json: bool = JsonOpt) -> None:
    """Withdraw the identity link between USER and OTHER (the existing `unlink USER KEY VERSION` undoes a
    remember decision)."""
    with open_ledger(ctx) as ml:
        r = ml.identity_unlink(user, other, reason=reason, actor=actor, trace_id=trace)
    if as_json:
        emit_json(r.model_dump(mode="json"))
        return
    out.print(f"unlinked {r.user_id} and {r.other} (positions {', '.join(str(x.position) for x in r.receipts)})")


@identity_app.command("list")
def identity_list_cmd(ctx: typer.Context, user: str, as_json: bool = JsonOpt, after: Optional[int] = AfterOpt,
                      timeout: float = TimeoutOpt) -> None:
    """USER's current identity links, confirmed first."""
    with open_ledger(ctx) as ml:
        r = ml.identity_links(user, after=after, timeout=timeout)
    if as_json:
        emit_json(r.model_dump(mode="json"))
        return
    for x in r.links:
        out.print(f"{x.other}: {x.status} since {x.since.isoformat()}" + (" (erased)" if x.erased else ""))

