"""``memledger import mem0 EXPORT.json [--history history.db]`` and ``memledger import langgraph ITEMS.jsonl``:
memories kept by mem0 or a LangGraph store, carried into the ledger (memledger/importers/). Running an import again
records nothing new; ``--json`` prints the report (``source``, ``items``, ``commands``, ``recorded``, ``replayed``,
``users``, ``agents``, ``skipped``)."""

from __future__ import annotations

from typing import Optional

import typer

from .common import JsonOpt, app, emit_json, open_ledger, out

import_app = typer.Typer(no_args_is_help=True, help="Import memories from mem0 or a LangGraph store.")
app.add_typer(import_app, name="import")

SourceOpt = typer.Option("agent_inference", "--source", help="agent_inference (written by an LLM or an agent) | "
                         "user_statement (the user's own words, e.g. mem0's add with infer=False).")


def _print(report: dict) -> None:
    users = ", ".join(f"{u}: {n}" for u, n in report["users"].items()) or "no user"
    if report.get("agents"):
        users += "; agents' own memories: " + ", ".join(f"{a}: {n}" for a, n in report["agents"].items())
    out.print(f"{report['source']}: {report['items']} items read, {report['commands']} commands: "
              f"{report['recorded']} recorded, {report['replayed']} already recorded ({users})")
    for s in report["skipped"]:
        out.print(f"  not carried over: {s['item']}: {s['reason']}", markup=False, highlight=False)


@import_app.command("mem0")
def mem0_cmd(ctx: typer.Context, path: str = typer.Argument(..., help="The JSON of mem0's Memory.get_all."),
             history: Optional[str] = typer.Option(None, "--history", help="mem0's SQLite history "
                                                   "(~/.mem0/history.db): every ADD, UPDATE and DELETE step."),
             source: str = SourceOpt, as_json: bool = JsonOpt) -> None:
    """Import a mem0 store: each memory one fact of its user, its steps from mem0's history kept as versions."""
    from memledger.importers.mem0 import import_mem0

    with open_ledger(ctx) as ml:
        report = import_mem0(ml, path, history=history, source=source).as_json()
    emit_json(report) if as_json else _print(report)


@import_app.command("langgraph")
def langgraph_cmd(ctx: typer.Context, path: str = typer.Argument(..., help="JSON Lines of the store's items."),
                  source: str = SourceOpt, as_json: bool = JsonOpt) -> None:
    """Import a LangGraph store's items (namespace, key, value, created_at, updated_at; the namespace's first
    label is the user), served afterwards by memledger's own LangGraph store under the same namespace and key."""
    from memledger.importers.langgraph import import_langgraph

    with open_ledger(ctx) as ml:
        report = import_langgraph(ml, path, source=source).as_json()
    emit_json(report) if as_json else _print(report)
