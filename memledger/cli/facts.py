"""CLI verbs on facts: assert, correct, retract, profile, history, search, ingest."""

from __future__ import annotations

import json
import sys
from typing import Any, List, Optional

import typer
from rich.table import Table

from ledger.errors import BadInput, MemledgerError

from .common import (AfterOpt, ActorOpt, AgentOpt, AgentReadOpt, AllowSensitiveOpt, ConfidenceOpt, IdemOpt, JsonOpt,
                     ObservedOpt, RunOpt, RunReadOpt, cli_scope, cli_user, scoped, PurposeOpt, half_lives_given, labels_given, ReasonOpt, SessionOpt, SourceOpt, SourceRefOpt, TextOpt, TimeoutOpt, TraceOpt, app,
                     clip, emit_json, emit_receipt, err, grant, open_ledger, out, parse_value, value_cell)


#: the role the agent plays when it writes (kept with the version; search's --role gives it a bonus, --role-filter
#: keeps only its memories). The Python API and JSONL take the full role context ({"role": ..., "task_id": ...}).
RoleOpt = typer.Option(None, "--role", help="The role the agent plays as it records this (e.g. coach); search can "
                       "favour (--role) or keep only (--role-filter) memories recorded under a role.")


def _role(role: Optional[str]) -> Optional[dict]:
    from memledger.search import check_role_name

    return None if role is None else {"role": check_role_name(role, "--role")}


@app.command("assert")
def assert_cmd(
    ctx: typer.Context, user: str, key: str, value: str,
    text: Optional[str] = TextOpt, observed_at: Optional[str] = ObservedOpt,
    valid_from: Optional[str] = typer.Option(None, "--valid-from", help="Start of validity (default observed-at)."),
    valid_to: Optional[str] = typer.Option(None, "--valid-to", help="End of validity, exclusive (default open)."),
    source: Optional[str] = SourceOpt, source_ref: Optional[str] = SourceRefOpt, session: Optional[str] = SessionOpt,
    confidence: Optional[float] = ConfidenceOpt, idempotency_key: Optional[str] = IdemOpt,
    actor: Optional[str] = ActorOpt, trace: Optional[str] = TraceOpt, reason: Optional[str] = ReasonOpt,
    sensitivity: Optional[str] = typer.Option(None, "--sensitivity", help="Label such as health, finance."),
    role: Optional[str] = RoleOpt, as_json: bool = JsonOpt,
    agent: Optional[str] = AgentOpt, run: Optional[str] = RunOpt,
) -> None:
    """Assert USER's KEY = VALUE (JSON if it parses, else a string; text that opens a JSON object or list but does
    not parse is refused): new, supersede, reaffirm, backfill or contest.
    --agent / --run: the fact's scopes (the same fields as --actor / --session)."""
    role_ctx = _role(role)
    actor, session = scoped(actor, agent, session, run)
    user = cli_user(ctx, user, actor)
    with open_ledger(ctx) as ml:
        emit_receipt(ml.assert_fact(
            user, key, parse_value(value), text=text, observed_at=observed_at, valid_from=valid_from,
            valid_to=valid_to, source=source, source_ref=source_ref, session_id=session, confidence=confidence,
            idempotency_key=idempotency_key, actor=actor, trace_id=trace, reason=reason, sensitivity=sensitivity,
            role=role_ctx,
        ), as_json)


@app.command("correct")
def correct_cmd(
    ctx: typer.Context, user: str, key: str, value: str, reason: Optional[str] = ReasonOpt,
    text: Optional[str] = TextOpt, observed_at: Optional[str] = ObservedOpt, source: Optional[str] = SourceOpt,
    source_ref: Optional[str] = SourceRefOpt, session: Optional[str] = SessionOpt,
    confidence: Optional[float] = ConfidenceOpt, idempotency_key: Optional[str] = IdemOpt,
    actor: Optional[str] = ActorOpt, trace: Optional[str] = TraceOpt, as_json: bool = JsonOpt,
    sensitivity: Optional[str] = typer.Option(None, "--sensitivity", help="Label such as health, finance "
                                              "(default: the fact's current label, which sticks)."),
    role: Optional[str] = RoleOpt, agent: Optional[str] = AgentOpt, run: Optional[str] = RunOpt,
) -> None:
    """Correct KEY: VALUE replaces the current value over its whole valid time (it was never true)."""
    role_ctx = _role(role)
    actor, session = scoped(actor, agent, session, run)
    user = cli_user(ctx, user, actor)
    with open_ledger(ctx) as ml:
        emit_receipt(ml.correct_fact(
            user, key, parse_value(value), reason=reason, text=text, observed_at=observed_at, source=source,
            source_ref=source_ref, session_id=session, confidence=confidence, idempotency_key=idempotency_key,
            actor=actor, trace_id=trace, sensitivity=sensitivity, role=role_ctx,
        ), as_json)


@app.command("retract")
def retract_cmd(
    ctx: typer.Context, user: str, key: str, reason: Optional[str] = ReasonOpt,
    valid_to: Optional[str] = typer.Option(None, "--valid-to", help="True until then (default: withdrawn entirely)."),
    observed_at: Optional[str] = ObservedOpt, source: Optional[str] = SourceOpt,
    source_ref: Optional[str] = SourceRefOpt, session: Optional[str] = SessionOpt,
    idempotency_key: Optional[str] = IdemOpt, actor: Optional[str] = ActorOpt, trace: Optional[str] = TraceOpt,
    as_json: bool = JsonOpt, agent: Optional[str] = AgentOpt, run: Optional[str] = RunOpt,
) -> None:
    """Retract KEY: no current value afterwards; history keeps why."""
    actor, session = scoped(actor, agent, session, run)
    user = cli_user(ctx, user, actor)
    with open_ledger(ctx) as ml:
        emit_receipt(ml.retract_fact(
            user, key, reason=reason, valid_to=valid_to, observed_at=observed_at, source=source,
            source_ref=source_ref, session_id=session, idempotency_key=idempotency_key, actor=actor, trace_id=trace,
        ), as_json)




@app.command("remember")
def remember_cmd(
    ctx: typer.Context, user: str, text: str, observed_at: Optional[str] = ObservedOpt,
    valid_from: Optional[str] = typer.Option(None, "--valid-from", help="Start of validity (default observed-at)."),
    source: Optional[str] = SourceOpt, source_ref: Optional[str] = SourceRefOpt, session: Optional[str] = SessionOpt,
    confidence: Optional[float] = ConfidenceOpt,
    key: Optional[str] = typer.Option(None, "--key", help="Land in this key (no slot resolution)."),
    idempotency_key: Optional[str] = IdemOpt, actor: Optional[str] = ActorOpt, trace: Optional[str] = TraceOpt,
    role: Optional[str] = RoleOpt, as_json: bool = JsonOpt,
    about: Optional[str] = typer.Option(None, "--about", help="A person linked to USER (name, alias or entity id) "
                                        "who said it, or for whom it was said: it lands in their slots."),
    sensitivity: Optional[str] = typer.Option(None, "--sensitivity", help="Label such as health, finance: kept out "
                                              "of recall and context unless a caller allows it."),
    agent: Optional[str] = AgentOpt, run: Optional[str] = RunOpt,
) -> None:
    """Remember free TEXT about USER: slot resolution decides new, add, reaffirm, supersede, correct, retire or
    conflict, and records why (docs/resolution.md). TEXT "-" reads it from standard input (a text longer than the
    command line allows). --agent / --run: the memory's scopes (the same fields as --actor / --session)."""
    from memledger.requests import RememberRequest

    if text == "-":
        raw = getattr(sys.stdin, "buffer", None)
        if raw is not None:
            try:
                text = raw.read().decode("utf-8")
            except UnicodeDecodeError:
                raise BadInput("TEXT", "standard input is not UTF-8 text", "send the text encoded as UTF-8") from None
        else:  # a text stream handed in by the caller (tests, embedding hosts)
            text = sys.stdin.read()
        text = text.removeprefix("\ufeff")  # a byte-order mark an editor wrote is no part of what the user said

    # the request is built (and checked) before the store is opened: bad input never opens it
    user = cli_user(ctx, user, agent if agent is not None else actor)
    request = RememberRequest(
        user_id=user, text=text, observed_at=observed_at, valid_from=valid_from, source=source, source_ref=source_ref,
        session_id=session, actor=actor, trace_id=trace, confidence=confidence, role=role, sensitivity=sensitivity,
        idempotency_key=idempotency_key, key=key, about=about, agent_id=agent, run_id=run)
    with open_ledger(ctx) as ml:
        r = ml.remember_request(request)
    if as_json:
        emit_json(r.model_dump(mode="json"))
        return
    note = " (idempotent retry: nothing new recorded)" if r.replayed else ""
    out.print(f"{r.decision} {r.user_id} {r.key} v{r.version} [{r.effect}] at position {r.position}{note}")
    out.print(f"  {r.explanation}")
    for m in r.related:
        out.print(f"  {m.relation:<13} {m.key} v{m.version} score {m.score:.3f}: {clip(m.text, 80)}")
    for e in r.entities:
        tie = f" as {e.relation_type}" if e.relation_type else ""
        out.print(f"  {'person':<13} {e.name}{tie}: {e.effect}" + (f" ({e.entity_id})" if e.entity_id else "")
                  + (f", one of {', '.join(e.candidates)}" if e.candidates else ""))


# A negative VERSION ("-1") reached the parser as an unknown option ("No such option: -1"); read it as the argument,
# so the version check names the field and the fix.
@app.command("unlink", context_settings={"ignore_unknown_options": True})
def unlink_cmd(ctx: typer.Context, user: str, key: str, version: int, as_json: bool = JsonOpt) -> None:
    """Undo a wrong remember decision: VERSION of KEY does not belong to KEY (recorded as events, see
    docs/resolution.md)."""
    with open_ledger(ctx) as ml:
        r = ml.unlink(user, key, version)
    if as_json:
        emit_json(r.model_dump(mode="json"))
        return
    out.print(f"{r.decision} {r.user_id} {r.key} v{r.version} [{r.effect}] at position {r.position}: {r.explanation}")


@app.command("profile")
def profile_cmd(ctx: typer.Context, user: str, as_json: bool = JsonOpt, after: Optional[int] = AfterOpt,
                timeout: float = TimeoutOpt, allow_sensitive: Optional[List[str]] = AllowSensitiveOpt,
                purpose: Optional[str] = PurposeOpt, agent: Optional[str] = AgentReadOpt,
                run: Optional[str] = RunReadOpt) -> None:
    """USER's current facts, by key (labelled ones withheld unless --allow-sensitive names their label); --agent /
    --run: only those written by that agent / in that run."""
    g = grant(allow_sensitive, purpose)
    scope = cli_scope(agent, run)
    user = cli_user(ctx, user, scope.agent_id)
    with open_ledger(ctx) as ml:
        prof = ml.profile(user, after=after, timeout=timeout, allow_sensitive=g, agent_id=scope.agent_id,
                          run_id=scope.run_id)
    if as_json:
        emit_json(prof.model_dump(mode="json"))
        return
    table = Table(title=f"profile of {prof.user_id} ({len(prof.facts)} facts)")
    for col in ("key", "value", "v", "valid from", "source", "status"):
        table.add_column(col)
    for key, f in prof.facts.items():
        table.add_row(key, value_cell(f, 80), str(f.version),
                      f.valid_from.isoformat(), f.source, f.status)
    out.print(table)


@app.command("history")
def history_cmd(ctx: typer.Context, user: str, key: Optional[str] = typer.Argument(None),
                as_json: bool = JsonOpt, after: Optional[int] = AfterOpt, timeout: float = TimeoutOpt,
                allow_sensitive: Optional[List[str]] = AllowSensitiveOpt, purpose: Optional[str] = PurposeOpt,
                agent: Optional[str] = AgentReadOpt, run: Optional[str] = RunReadOpt) -> None:
    """Every event of USER's facts (or of KEY), in log order, with valid ranges as known now (labelled versions
    withheld unless --allow-sensitive names their label); --agent / --run: only the events recorded by that agent /
    in that run."""
    g = grant(allow_sensitive, purpose)
    scope = cli_scope(agent, run)
    user = cli_user(ctx, user, scope.agent_id)
    with open_ledger(ctx) as ml:
        rows = ml.history(user, key, after=after, timeout=timeout, allow_sensitive=g, agent_id=scope.agent_id,
                          run_id=scope.run_id)
    if as_json:
        emit_json([r.model_dump(mode="json") for r in rows])
        return
    table = Table(title=f"history of {user}" + (f" {key}" if key else ""))
    for col in ("pos", "key", "v", "kind", "value", "valid from", "valid to", "status", "reason"):
        table.add_column(col)
    for r in rows:
        table.add_row(str(r.position), r.key, str(r.version), r.kind, value_cell(r, 60),
                      r.valid_from.isoformat() if r.valid_from else "", r.valid_to.isoformat() if r.valid_to else "",
                      r.status, r.reason or "")
    out.print(table)


@app.command("search")
def search_cmd(ctx: typer.Context, user: str, query: str,
               k: int = typer.Option(10, "-k", "--k", help="How many hits (1..1000)."),
               as_of: Optional[str] = typer.Option(None, "--as-of", help="Search what was believed at this instant "
                                                  "(ISO 8601 with an offset)."),
               source: Optional[str] = typer.Option(None, "--source", help="Only memories from this source "
                                                   "(user_statement | agent_inference | external_import | "
                                                   "system_feedback); applied before the top k is cut."),
               role: Optional[str] = typer.Option(None, "--role", help="The agent's current role: memories "
                                                 "recorded under it get a score bonus."),
               allow_sensitive: Optional[List[str]] = typer.Option(
                   None, "--allow-sensitive", help="Labels (comma-separated or repeated, e.g. health) whose facts may be "
                   "returned; each one returned is recorded as a disclosure. Default: none."),
               purpose: Optional[str] = typer.Option(None, "--purpose", help="Why (kept with each disclosure)."),
               also: Optional[list[str]] = typer.Option(None, "--also", help="Search this user's memories too "
                                                        "(repeatable); hits are merged by score and name their user."),
               min_score: Optional[float] = typer.Option(None, "--min-score", help="Drop hits scoring below this "
                                                         "(scores are absolute; 0.3 is a weak match). Default: none."),
               role_filter: Optional[str] = typer.Option(None, "--role-filter", help="Only memories recorded "
                                                         "under this role (--role is a bonus, this a filter)."),
               exclude_source: Optional[list[str]] = typer.Option(None, "--exclude-source", help="Leave out "
                                                                  "memories from this source (repeatable)."),
               within: str = typer.Option("facts", "--in", help="facts | messages | all: what to search."),
               min_confidence: Optional[float] = typer.Option(
                   None, "--min-confidence", help="Leave out memories recorded with a lower confidence (0..1; "
                   "hedged statements are recorded at 0.6 at most)."),
               role_bonus: Optional[float] = typer.Option(
                   None, "--role-bonus", help="Score added to memories recorded under --role (0..1; default 0.1)."),
               expand: int = typer.Option(0, "--expand", help="Also the memories of the people the query names and of "
                                          "those their relations lead to, in N hops (0-3; 0: none)."),
               linked: bool = typer.Option(True, "--linked/--not-linked", help="Also the memories of the user ids "
                                           "confirmed as the same person (identity link; default: yes)."),
               half_life: Optional[list[str]] = typer.Option(
                   None, "--half-life", help="PREFIX=SECONDS: freshness half-life of keys under PREFIX (repeatable, "
                   "e.g. --half-life session.=86400). Default: the ledger's."),
               trace: Optional[str] = TraceOpt,
               as_json: bool = JsonOpt, after: Optional[int] = AfterOpt, timeout: float = TimeoutOpt,
               agent: Optional[str] = AgentReadOpt, run: Optional[str] = RunReadOpt) -> None:
    """USER's memories most relevant to QUERY, with absolute scores, score parts and provenance (only current
    versions; facts labelled sensitive only with --allow-sensitive; --agent / --run: only memories written by that
    agent / in that run)."""
    from memledger.requests import SearchRequest

    # the request is built (and checked) before the store is opened: bad input never opens it
    user = cli_user(ctx, user, agent)
    request = SearchRequest(
        user_id=user, query=query, k=k, as_of=as_of, source=source, role=role, after=after, timeout=timeout,
        half_lives=half_lives_given(half_life) if half_life else None, role_bonus=role_bonus,
        allow_sensitive=labels_given(allow_sensitive), purpose=purpose, trace_id=trace, also=also,
        min_score=min_score, role_filter=role_filter, exclude_source=exclude_source, within=within,
        min_confidence=min_confidence, expand=expand, linked=linked, agent_id=agent, run_id=run)
    with open_ledger(ctx) as ml:
        hits = ml.search_request(request)
    if as_json:
        emit_json([h.model_dump(mode="json") for h in hits])
        return
    table = Table(title=f"search {user}: {query}")
    many, via = bool(also) or any(h.user_id not in (None, user) for h in hits), any(h.path for h in hits)
    for col in ("#", "score", *(("user",) if many else ()), "key", "text", "ref", *(("via",) if via else ())):
        table.add_column(col, min_width=30 if col == "text" else None)  # parts, provenance: --json
    for h in hits:
        key = h.key if h.kind == "fact" else f"message {h.session_id}/{h.message_id}"
        table.add_row(str(h.rank), f"{h.score:.3f}", *((h.user_id or "",) if many else ()), key, h.text,
                      h.source_ref or "", *((h.path or "",) if via else ()))
    out.print(table)


@app.command("ingest")
def ingest_cmd(ctx: typer.Context, file: str,
               format: str = typer.Option("locomo", "--format", help="locomo | jsonl | memorybank"),
               resolve: bool = typer.Option(False, "--resolve", help="LoCoMo: observations go through remember "
                                            "(slot resolution) instead of content-derived keys."),
               as_json: bool = JsonOpt) -> None:
    """Ingest a LoCoMo file or a JSONL file of commands, with a progress bar. A JSONL line with text and no key is
    a remember. Re-ingesting records nothing new for LoCoMo, MemoryBank and JSONL remember lines (a line without
    idempotency_key gets one derived from user_id, text, observed_at and source_ref); a JSONL command with a key
    records nothing new only when it carries an idempotency_key."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with open_ledger(ctx) as ml, Progress(TextColumn("ingest"), BarColumn(), MofNCompleteColumn(),
                                          TimeRemainingColumn(), console=err.current(), transient=True,
                                          disable=not err.is_terminal) as bar:
        # disabled when stderr is not a terminal: rich then still wrote an empty line before any error message
        task = bar.add_task("ingest", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        report = ml.ingest(file, format, on_progress=progress, resolve=resolve)
    if as_json:
        emit_json(report)
    else:
        users = ", ".join(f"{u}: {n}" for u, n in report["users"].items())
        held = f", {report['quarantined']} of them quarantined" if report.get("quarantined") else ""
        out.print(f"ingested {report['commands']} commands: {report['recorded']} recorded{held}, "
                  f"{report['replayed']} already recorded ({users})")
        m = report.get("messages") or {}
        if m.get("commands"):
            out.print(f"messages: {m['logged']} logged, {m['replayed']} already logged")
