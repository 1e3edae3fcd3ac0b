"""CLI verbs of time travel and audit: ``believed``, ``true-at``, ``diff``, ``audit`` (docs/time-travel.md).

Registered on :data:`memledger.cli.common.app` when ``memledger.cli`` imports this module. ``--json`` prints
``model_dump(mode="json")`` of the :mod:`memledger.timetravel` models (a contract); ``--tz ZONE`` renders every
instant in an IANA zone (the same instants, another offset). Bad input (naive instants, unknown axis or zone,
``--to`` before ``--from``) exits 2 with a message naming the field; these verbs never write.
"""

from __future__ import annotations

from typing import Any, List, Optional

import typer
from rich.table import Table

from memledger.timetravel import render_json, zone

from .common import (AfterOpt, AgentReadOpt, AllowSensitiveOpt, JsonOpt, PurposeOpt, RunReadOpt, TimeoutOpt, app,
                     cli_scope, cli_user, emit_json, grant, open_ledger, out, value_cell)

AxisOpt = typer.Option("system", "--axis",
                       help="system: --as-of is recorded_at (default); observed: it is observed_at (imported history).")
NowAxisOpt = typer.Option("system", "--axis", help="system (default): what the ledger has recorded by now; "
                          "observed: what sources had said by now (observed_at), for imported history.")
TzOpt = typer.Option(None, "--tz", help="Render instants in this IANA zone (default UTC, as stored).")
ValidAtOpt = typer.Option(None, "--valid-at", help="Valid-time instant (ISO 8601 with offset).")


def _when(value: Any, z: Any) -> str:
    if value is None:
        return ""
    return (value if z is None else value.astimezone(z)).isoformat()


def _beliefs_table(title: str, facts: dict[str, Any], z: Any) -> Table:
    table = Table(title=title)
    for col in ("key", "value", "v", "valid from", "valid to", "status", "source", "since"):
        table.add_column(col)
    for key, b in facts.items():
        table.add_row(key, value_cell(b, 60), str(b.version), _when(b.valid_from, z),
                      _when(b.valid_to, z), b.status, b.source, _when(b.believed_since, z))
    return table


def _emit_beliefs(result: Any, as_json: bool, tz: Optional[str], title: str) -> None:
    if as_json:
        emit_json(render_json(result, tz))
        return
    out.print(_beliefs_table(title + f" ({len(result.facts)} facts)", result.facts, zone(tz)))


@app.command("believed")
def believed_cmd(
    ctx: typer.Context, user: str,
    as_of: Optional[str] = typer.Option(None, "--as-of", help="System-time instant, inclusive (ISO 8601 with offset)."),
    valid_at: Optional[str] = ValidAtOpt, axis: str = AxisOpt, tz: Optional[str] = TzOpt, as_json: bool = JsonOpt,
    after: Optional[int] = AfterOpt, timeout: float = TimeoutOpt,
    allow_sensitive: Optional[List[str]] = AllowSensitiveOpt, purpose: Optional[str] = PurposeOpt,
    agent: Optional[str] = AgentReadOpt, run: Optional[str] = RunReadOpt,
) -> None:
    """What we believed about USER at --as-of (events recorded at or before it), sliced at --valid-at (default the
    same instant); --agent / --run: only beliefs written by that agent / in that run."""
    zone(tz)  # refuse a bad zone before doing any work
    g, scope = grant(allow_sensitive, purpose), cli_scope(agent, run)
    user = cli_user(ctx, user, scope.agent_id)
    with open_ledger(ctx) as ml:
        result = ml.believed(user, as_of, valid_at, axis=axis, after=after, timeout=timeout, allow_sensitive=g,
                             agent_id=scope.agent_id, run_id=scope.run_id)
    _emit_beliefs(result, as_json, tz, f"believed about {result.user_id} as of {_when(result.as_of, zone(tz))}")


@app.command("true-at")
def true_at_cmd(
    ctx: typer.Context, user: str, valid_at: Optional[str] = ValidAtOpt, axis: str = NowAxisOpt,
    tz: Optional[str] = TzOpt, as_json: bool = JsonOpt, after: Optional[int] = AfterOpt, timeout: float = TimeoutOpt,
    allow_sensitive: Optional[List[str]] = AllowSensitiveOpt, purpose: Optional[str] = PurposeOpt,
    agent: Optional[str] = AgentReadOpt, run: Optional[str] = RunReadOpt,
) -> None:
    """What was true of USER at --valid-at, as known now; --agent / --run: only beliefs written by that agent / in
    that run."""
    zone(tz)
    g, scope = grant(allow_sensitive, purpose), cli_scope(agent, run)
    user = cli_user(ctx, user, scope.agent_id)
    with open_ledger(ctx) as ml:
        result = ml.true_at(user, valid_at, axis=axis, after=after, timeout=timeout, allow_sensitive=g,
                            agent_id=scope.agent_id, run_id=scope.run_id)
    _emit_beliefs(result, as_json, tz, f"true of {result.user_id} at {_when(result.valid_at, zone(tz))}")


@app.command("diff")
def diff_cmd(
    ctx: typer.Context, user: str,
    from_: Optional[str] = typer.Option(None, "--from", help="Earlier as-of instant (ISO 8601 with offset)."),
    to: Optional[str] = typer.Option(None, "--to", help="Later as-of instant (ISO 8601 with offset)."),
    valid_at: Optional[str] = typer.Option(None, "--valid-at", help="Valid-time slice of both sides (default --to)."),
    axis: str = AxisOpt, tz: Optional[str] = TzOpt, as_json: bool = JsonOpt,
    after: Optional[int] = AfterOpt, timeout: float = TimeoutOpt,
    allow_sensitive: Optional[List[str]] = AllowSensitiveOpt, purpose: Optional[str] = PurposeOpt,
    agent: Optional[str] = AgentReadOpt, run: Optional[str] = RunReadOpt,
) -> None:
    """Beliefs added, changed and dropped between --from and --to, each with the event that did it; --agent / --run:
    the change between the beliefs written by that agent / in that run at --from and at --to."""
    z = zone(tz)
    g, scope = grant(allow_sensitive, purpose), cli_scope(agent, run)
    user = cli_user(ctx, user, scope.agent_id)
    with open_ledger(ctx) as ml:
        result = ml.diff(user, from_, to, valid_at=valid_at, axis=axis, after=after, timeout=timeout,
                         allow_sensitive=g, agent_id=scope.agent_id, run_id=scope.run_id)
    if as_json:
        emit_json(render_json(result, tz))
        return
    table = Table(title=f"diff of {result.user_id} from {_when(result.from_, z)} to {_when(result.to, z)}")
    for col in ("change", "key", "before", "after", "event", "pos", "recorded", "reason"):
        table.add_column(col)
    for change, entries in (("added", result.added), ("changed", result.changed), ("dropped", result.dropped)):
        for key, d in entries.items():
            table.add_row(
                change, key, _belief_cell(d.before), _belief_cell(d.after),
                f"{d.event.kind}/{d.event.effect}", str(d.event.position), _when(d.event.recorded_at, z),
                d.event.reason or "")
    out.print(table)


def _belief_cell(b: Any) -> str:
    """A diff side: the value, and its status when not plainly believed (a status change keeps the value, and a
    table of "tea" -> "tea" hid that it became contested)."""
    if b is None:
        return ""
    cell = value_cell(b, 40)
    return cell if b.status == "believed" else f"{cell} ({b.status})"


@app.command("audit")
def audit_cmd(
    ctx: typer.Context, user: str, key: Optional[str] = typer.Argument(None),
    trace: Optional[str] = typer.Option(None, "--trace", help="Only facts with an event of this trace id."),
    source_ref: Optional[str] = typer.Option(None, "--source-ref", help="Only facts with an event from this source_ref."),
    as_of: Optional[str] = typer.Option(None, "--as-of", help="Audit the beliefs as of this instant (default now)."),
    valid_at: Optional[str] = ValidAtOpt, axis: str = AxisOpt, tz: Optional[str] = TzOpt, as_json: bool = JsonOpt,
    after: Optional[int] = AfterOpt, timeout: float = TimeoutOpt,
    allow_sensitive: Optional[List[str]] = AllowSensitiveOpt, purpose: Optional[str] = PurposeOpt,
    agent: Optional[str] = AgentReadOpt, run: Optional[str] = RunReadOpt,
) -> None:
    """For each current (or --as-of) belief of USER (or KEY), the chain of events behind it: who, when, from what,
    and what it replaced and why; --agent / --run: only beliefs written by that agent / in that run, each chain
    holding that scope's events."""
    z = zone(tz)
    g, scope = grant(allow_sensitive, purpose), cli_scope(agent, run)
    user = cli_user(ctx, user, scope.agent_id)
    with open_ledger(ctx) as ml:
        result = ml.audit(user, key, trace_id=trace, source_ref=source_ref, as_of=as_of, valid_at=valid_at, axis=axis,
                          after=after, timeout=timeout, allow_sensitive=g, agent_id=scope.agent_id,
                          run_id=scope.run_id)
    if as_json:
        emit_json(render_json(result, tz))
        return
    for k, entry in result.facts.items():
        b = entry.belief
        head = "nothing believed" if b is None else f"believed {value_cell(b, 200)} (v{b.version})"
        table = Table(title=f"{k}: {head}" + (f", replaced v{', v'.join(map(str, entry.replaced))}"
                                                if entry.replaced else ""))
        for col in ("pos", "v", "kind", "effect", "value", "recorded", "observed", "source", "actor", "source_ref",
                    "replaces", "reason"):
            table.add_column(col)
        for r in entry.chain:
            table.add_row(str(r.position), str(r.version), r.kind, r.effect,
                          value_cell(r, 40), _when(r.recorded_at, z),
                          _when(r.observed_at, z), r.source, r.actor or "", r.source_ref or "",
                          "" if r.replaces is None else str(r.replaces), r.reason or "")
        out.print(table)
    if not result.facts:
        out.print(f"no beliefs of {result.user_id} to audit")
