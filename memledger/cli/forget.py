"""CLI verb ``forget``: shred one fact's text and value (memledger/forget.py, docs/erasure.md "Forget one fact")."""

from __future__ import annotations

from typing import Optional

import typer

from ledger.errors import BadInput

from .common import JsonOpt, app, emit_json, open_ledger, out


@app.command("forget")
def forget_cmd(ctx: typer.Context, user: str, key: str,
               version: Optional[int] = typer.Option(None, "--version", help="Forget only this version (as "
                                                     "`history` numbers them); default: every version of KEY."),
               yes: bool = typer.Option(False, "--yes", help="Required: forgetting is irreversible."),
               actor: Optional[str] = typer.Option(None, "--actor", help="Who asked for it (kept in history; default "
                                                   "forget)."),
               as_json: bool = JsonOpt) -> None:
    """Shred the text and value of USER's fact KEY for good (its per-fact keys are destroyed; projections, search
    index and embedding cache purged); history keeps a "forgotten" placeholder with when and by whom. The user's other
    facts stay. Facts written before per-fact keys existed are refused: erase the user instead (docs/erasure.md)."""
    from ledger.schemas import check_key, check_user_id
    from memledger.forget import check_forget_version

    user = check_user_id(user, "USER")
    key = check_key(key, "KEY")
    check_forget_version(version)
    if not yes:
        # no prompt even on a terminal: a script that forgot --yes must not hang, and nothing is written
        raise BadInput("--yes", f"forgetting {user} {key} is irreversible (its text and value cannot be brought back)",
                       f"add --yes: memledger forget {user} {key}{'' if version is None else f' --version {version}'}"
                       " --yes")
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
