"""``memledger keys create|list|revoke``: API keys of the HTTP API and MCP over HTTP (memledger/servers/keys.py).

A key's secret is printed once (``--json``: the field ``secret``); the store keeps only its SHA-256.
"""

from __future__ import annotations

from typing import List, Optional

import typer
from rich.table import Table

from .common import JsonOpt, app, emit_json, err, open_ledger, out

keys_app = typer.Typer(no_args_is_help=True, help="API keys for `memledger serve http` and MCP over HTTP.")
app.add_typer(keys_app, name="keys")


@keys_app.command("create")
def create_cmd(ctx: typer.Context,
               user: List[str] = typer.Option([], "--user", help="A user the key may read and write; repeatable."),
               admin: bool = typer.Option(False, "--admin", help="May erase its users (every user if no --user)."),
               expires: Optional[str] = typer.Option(None, "--expires", help="ISO 8601 instant with offset."),
               allow_sensitive: List[str] = typer.Option([], "--allow-sensitive", help="A sensitivity label the "
                                                         "key may let into recall/context; repeatable."),
               note: Optional[str] = typer.Option(None, "--note", help="What the key is for."),
               as_json: bool = JsonOpt,
               agent: Optional[str] = typer.Option(None, "--agent", help="Limit the key to this agent: it writes as "
                                                   "the agent and reads only what the agent wrote, and reaches the "
                                                   "agent's own memories (without --user: those alone).")) -> None:
    """Create a key; its secret is printed once and only its hash is stored."""
    from memledger.servers.keys import APIKeyStore

    with open_ledger(ctx, embedder="none") as ml:
        created = APIKeyStore(ml).create(user, admin=admin, expires=expires, allow_sensitive=allow_sensitive,
                                      note=note, agent=agent)
    if as_json:
        emit_json(created.model_dump(mode="json"))
        return
    out.print(created.secret)
    err.print(f"key {created.key_id} for {', '.join(created.users) or ('every user' if created.admin else 'no user')}"
              + (" (admin)" if created.admin else "") + (f" as agent {created.agent}" if created.agent else "")
              + ": the secret above is shown only once")


@keys_app.command("list")
def list_cmd(ctx: typer.Context, as_json: bool = JsonOpt) -> None:
    """Every key of this store (never the secrets)."""
    from memledger.servers.keys import APIKeyStore

    with open_ledger(ctx, embedder="none") as ml:
        keys = APIKeyStore(ml).list()
    if as_json:
        emit_json([k.model_dump(mode="json") for k in keys])
        return
    table = Table(title=f"{len(keys)} API keys")
    for col in ("key_id", "users", "admin", "sensitive", "expires", "state", "note", "agent"):
        table.add_column(col)
    for k in keys:
        state = "active" if k.active else ("revoked" if k.revoked_at else "expired")
        table.add_row(k.key_id, ", ".join(k.users) or ("*" if k.admin else ""), "yes" if k.admin else "",
                      ",".join(k.allow_sensitive), k.expires_at.isoformat() if k.expires_at else "", state,
                      k.note or "", k.agent or "")
    out.print(table)


@keys_app.command("revoke")
def revoke_cmd(ctx: typer.Context, key_id: str, as_json: bool = JsonOpt) -> None:
    """Revoke KEY_ID: every later request with it gets 401."""
    from memledger.servers.keys import APIKeyStore

    with open_ledger(ctx, embedder="none") as ml:
        info = APIKeyStore(ml).revoke(key_id)
    if as_json:
        emit_json(info.model_dump(mode="json"))
        return
    out.print(f"revoked {info.key_id}")
