"""``memledger shards status|rebalance``: a ledger partitioned across PostgreSQL servers (docs/scale.md).

Both need a shard map (``--shards FILE`` before the verb, or ``$MEMLEDGER_SHARDS``).
"""

from __future__ import annotations

import typer
from rich.table import Table

from ledger.errors import BadInput

from .common import JsonOpt, app, emit_json, err, open_ledger, out, shard_map_given

shards_app = typer.Typer(no_args_is_help=True, help="A ledger partitioned by user across PostgreSQL servers.")
app.add_typer(shards_app, name="shards")


def _require_map(ctx: typer.Context) -> None:
    """Refuse the verb before any store is opened (or created) when no shard map was given."""
    if not shard_map_given(ctx.find_root().obj or {}):
        raise BadInput("--shards", "no shard map was given",
                       "pass --shards FILE before the verb (memledger --shards shards.toml shards status), or set "
                       "$MEMLEDGER_SHARDS")


@shards_app.command("status")
def status_cmd(ctx: typer.Context, as_json: bool = JsonOpt) -> None:
    """Users, log head and projection lag per shard, and the directory's overrides."""
    _require_map(ctx)
    with open_ledger(ctx) as ml:
        report = ml.status()
    if as_json:
        emit_json(report.model_dump(mode="json"))
        return
    table = Table("shard", "server", "schema", "users", "erased", "head", "projections at", "lag")
    for r in report.shards:
        table.add_row(r.name, r.server, r.schema_, str(r.users), str(r.erased), str(r.head), str(r.projections_at),
                      str(r.lag))
    out.print(table)
    d = report.directory
    ring = ", ".join(d.serving) + (f" (rebalancing to {', '.join(d.target)})" if d.target else "")
    out.print(f"directory ({d.schema_}): users hashed over {ring}; {d.moving} moving, {d.placed} placed, "
              f"{d.pinned} pinned")
    if d.moving or d.target:
        # a killed rebalance leaves users marked moving (their writes wait, then fail): only a rerun finishes it
        out.print("a rebalance is unfinished: run `memledger --shards FILE shards rebalance` again to finish it")


@shards_app.command("rebalance")
def rebalance_cmd(ctx: typer.Context,
                  dry_run: bool = typer.Option(False, "--dry-run", help="List the moves; change nothing."),
                  grace: float = typer.Option(0.5, "--grace", help="Seconds between a user's switch and the "
                                              "erasure of its old copy (reads in flight finish)."),
                  as_json: bool = JsonOpt) -> None:
    """Move every user the map places on another shard: copy, verify, switch, erase the old copy. Safe to kill;
    run it again to finish."""
    if not grace >= 0 or grace > 3600:
        raise BadInput("--grace", f"{grace} is not between 0 and 3600 seconds", "e.g. --grace 0.5")
    from memledger.sharding.rebalance import rebalance

    _require_map(ctx)
    with open_ledger(ctx) as ml:
        report = rebalance(ml, dry_run=dry_run, grace=grace)
    if as_json:
        emit_json(report.model_dump(mode="json"))
    else:
        verb = "would move" if report.dry_run else "moved"
        for m in report.moves:
            out.print(f"{m.user_id}: {m.source} -> {m.target}  {m.status}" + (f" ({m.events} events)" if m.events
                                                                              else ""))
        done = sum(1 for m in report.moves if not m.status.startswith("failed"))
        out.print(f"{verb} {done} of {len(report.moves)} users ({report.users} looked at) in {report.seconds:.1f} s")
    failed = [m for m in report.moves if m.status.startswith("failed")]
    if failed:
        err.print(f"{len(failed)} moves failed; their users stay on their old shard (see above)")
        raise typer.Exit(1)
