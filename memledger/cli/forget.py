"""CLI verb ``forget``: shred one fact's text and value (memledger/forget.py, docs/erasure.md "Forget one fact")."""

from __future__ import annotations

from typing import Any, Optional

import typer

from ledger.errors import BadInput

from .common import JsonOpt, app, cli_scope, cli_user, emit_json, open_ledger, out


@app.command("forget")
def forget_cmd(ctx: typer.Context, user: str, key: Optional[str] = typer.Argument(None),
               version: Optional[int] = typer.Option(None, "--version", help="Forget only this version (as "
                                                     "`history` numbers them); default: every version of KEY."),
               yes: bool = typer.Option(False, "--yes", help="Required: forgetting is irreversible."),
               actor: Optional[str] = typer.Option(None, "--actor", help="Who asked for it (kept in history; default "
                                                   "forget)."),
               as_json: bool = JsonOpt,
               agent: Optional[str] = typer.Option(None, "--agent", help="Forget every version this agent wrote (of "
                                                   "KEY, if given)."),
               run: Optional[str] = typer.Option(None, "--run", help="Forget every version written in this run (of "
                                                 "KEY, if given).")) -> None:
    """Shred the text and value of USER's fact KEY for good (its per-fact keys are destroyed; projections, search
    index and embedding cache purged); history keeps a "forgotten" placeholder with when and by whom. The user's other
    facts stay. Facts written before per-fact keys existed are refused: erase the user instead (docs/erasure.md).
    --agent / --run: every version written by that agent / in that run instead (of KEY only, when given)."""
    from ledger.schemas import check_key, check_user_id
    from memledger.forget import check_forget_version

    scope = cli_scope(agent, run)
    user = check_user_id(cli_user(ctx, user, scope.agent_id), "USER")
    if key is None and not scope:
        raise BadInput("KEY", "is missing", f"name the fact to forget (memledger forget {user} KEY --yes), or a "
                       "scope with --agent / --run")
    key = None if key is None else check_key(key, "KEY")
    check_forget_version(version)
    if version is not None and scope:
        raise BadInput("--version", "cannot be given with --agent / --run (a scope names its versions itself)",
                       "give --version N with KEY alone, or the scope alone")
    if not yes:
        # no prompt even on a terminal: a script that forgot --yes must not hang, and nothing is written
        what = " ".join(w for w in (key, agent and f"--agent {agent}", run and f"--run {run}") if w)
        raise BadInput("--yes", f"forgetting {user} {what} is irreversible (its text and value cannot be brought back)",
                       f"add --yes: memledger forget {user} {what}{'' if version is None else f' --version {version}'}"
                       " --yes")
    if scope:
        _forget_scope(ctx, user, key, scope, actor, as_json)
        return
    with open_ledger(ctx) as ml:
        receipt = ml.forget(user, key, version=version, actor=actor)
    if as_json:
        emit_json(receipt.model_dump(mode="json"))
        return
    vs = ", ".join(f"v{v}" for v in receipt.versions)
    what = "finished an earlier forget of" if receipt.resumed else "forgot"
    out.print(f"{what} {user} {key} {vs} at position {receipt.position} (placeholder v{receipt.version}, by "
              f"{receipt.actor}): {receipt.keys_destroyed} per-fact keys destroyed"
              + ("; no current value now" if receipt.current_value_forgotten else ""))


def _forget_scope(ctx: typer.Context, user: str, key: Optional[str], scope: Any, actor: Optional[str],
                  as_json: bool) -> None:
    """``forget USER [KEY] --agent A --run R``: every version written in the scope, one line per fact."""
    with open_ledger(ctx) as ml:
        r = ml.forget_scope(user, agent_id=scope.agent_id, run_id=scope.run_id, key=key, actor=actor)
    if as_json:
        emit_json(r.model_dump(mode="json"))
        return
    for f in r.forgotten:
        what = "finished an earlier forget of" if f.resumed else "forgot"
        out.print(f"{what} {user} {f.key} {', '.join(f'v{v}' for v in f.versions)} at position {f.position}"
                  + ("; no current value now" if f.current_value_forgotten else ""))
    out.print(f"{len(r.forgotten)} facts, {r.keys_destroyed} per-fact keys destroyed")
