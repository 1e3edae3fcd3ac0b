"""CLI verbs of memory hygiene (docs/hygiene.md): quarantine, due, stats, retract-source.

Each prints a table, or with ``--json`` the ``model_dump(mode="json")`` of the memledger/hygiene.py model. Bad input
(a malformed user id or ``--now``) exits 2 before the store is opened.
"""

from __future__ import annotations

import json
from typing import List, Optional

import typer
from rich.table import Table

from .common import (AllowSensitiveOpt, JsonOpt, PurposeOpt, app, clip, emit_json, grant, open_ledger, out,
                     value_cell)

NowOpt = typer.Option(None, "--now", help="The instant to judge expiry and due dates at (ISO 8601 with an offset; "
                                          "default: now).")


def _check(user: Optional[str], now: Optional[str]) -> None:
    from ledger.schemas import check_user_id
    from ledger.timeutil import parse_instant

    if user is not None:
        check_user_id(user, "USER")
    if now is not None:
        parse_instant(now, "--now")


def _short(value: object) -> str:
    return clip(json.dumps(value, ensure_ascii=False), 60)


@app.command("quarantine")
def quarantine_cmd(ctx: typer.Context, user: str, now: Optional[str] = NowOpt, as_json: bool = JsonOpt,
                   allow_sensitive: Optional[List[str]] = AllowSensitiveOpt, purpose: Optional[str] = PurposeOpt) -> None:
    """USER's quarantined statements: values that failed their key's validator and texts that read as instructions
    to the agent; each pending (72 h), released by an independent second statement, or expired."""
    _check(user, now)
    g = grant(allow_sensitive, purpose)
    with open_ledger(ctx) as ml:
        q = ml.quarantine(user, now=now, allow_sensitive=g)
    if as_json:
        emit_json(q.model_dump(mode="json"))
        return
    table = Table(title=f"quarantine of {user} ({sum(i.state == 'pending' for i in q.items)} pending)")
    for col in ("key", "v", "value", "why", "state", "until", "source"):
        table.add_column(col)
    for i in q.items:
        until = i.expires_at.isoformat() if i.state == "pending" else (
            f"released as v{i.released_by}" if i.state == "released" else "")
        table.add_row(i.key, str(i.version), value_cell(i, 60), i.reason, i.state, until,
                      i.source + (f" {i.source_ref}" if i.source_ref else ""))
    out.print(table)
    if q.withheld_texts:
        held = Table(title=f"withheld from context ({len(q.withheld_texts)}): read as instructions to the assistant")
        for col in ("where", "kind", "text", "said"):
            held.add_column(col)
        for w in q.withheld_texts:
            where = {"message": f"message {w.session_id}/{w.message_id} ({w.role})", "summary": f"summary {w.session_id}",
                     "card": f"card {w.session_id}", "fact": f"fact {w.key}"}[w.path]
            held.add_row(where, w.kind, clip(w.text, 60), w.observed_at.isoformat() if w.observed_at else "")
        out.print(held)


@app.command("due")
def due_cmd(ctx: typer.Context, user: str, now: Optional[str] = NowOpt, as_json: bool = JsonOpt,
            allow_sensitive: Optional[List[str]] = AllowSensitiveOpt, purpose: Optional[str] = PurposeOpt) -> None:
    """USER's current facts to re-confirm: past their key prefix's verify_after (health.*: 30 days since last
    stated or confirmed), or corrected three times or more."""
    _check(user, now)
    g = grant(allow_sensitive, purpose)
    with open_ledger(ctx) as ml:
        d = ml.due(user, now=now, allow_sensitive=g)
    if as_json:
        emit_json(d.model_dump(mode="json"))
        return
    table = Table(title=f"due for {user} ({len(d.items)})")
    for col in ("key", "v", "value", "why", "confirmed", "due since"):
        table.add_column(col)
    for f in d.items:
        why = f.why if f.why == "verify_after" else f"review ({f.corrections} corrections)"
        table.add_row(f.key, str(f.version), value_cell(f, 60), why, f.confirmed_at.isoformat(), f.due_at.isoformat())
    out.print(table)


@app.command("stats")
def stats_cmd(ctx: typer.Context, user: Optional[str] = typer.Argument(None, help="One user (default: the store)."),
              now: Optional[str] = NowOpt, as_json: bool = JsonOpt) -> None:
    """Memory health of USER or of the whole store: users, facts, freshness_7d, conflict_rate,
    correction_rate_per_1k_messages, quarantined, due, scheduled (docs/hygiene.md)."""
    _check(user, now)
    with open_ledger(ctx) as ml:
        s = ml.stats(user, now=now)
    if as_json:
        emit_json(s.model_dump(mode="json"))
        return
    for name, value in s.model_dump(mode="json").items():
        out.print(f"{name:<33} {'n/a' if value is None else value}")


@app.command("retract-source")
def retract_source_cmd(ctx: typer.Context, user: str, source_ref: str, as_json: bool = JsonOpt) -> None:
    """Withdraw SOURCE_REF: what it alone supports is retracted, or the earlier value other sources support is put
    back; values other sources also support stay (docs/hygiene.md)."""
    from memledger.withdrawal import check_source_ref

    _check(user, None)
    check_source_ref(source_ref)
    with open_ledger(ctx) as ml:
        r = ml.retract_source(user, source_ref)
    if as_json:
        emit_json(r.model_dump(mode="json"))
        return
    for c in r.changes:
        refs = ", ".join(x or "(no source_ref)" for x in c.supported_by)
        if c.action == "kept":
            out.print(f"kept {c.key} v{c.version} {_short(c.value)}: also supported by {refs}")
        elif c.action == "restored":
            out.print(f"restored {c.key}: {_short(c.value)} (v{c.version}) withdrawn, {_short(c.restored_value)} "
                      f"(v{c.restored_version}) current again, supported by {refs}")
        else:
            out.print(f"withdrawn {c.key} v{c.version} {_short(c.value)}: no other source supports a value")
    if not r.receipts:
        out.print(f"nothing recorded: {r.source_ref} was withdrawn for {r.user_id} before")
    elif not r.changes:
        n = sum(1 for x in r.receipts if x.effect == "withdraw_source")
        out.print(f"withdrew {r.source_ref} from {n} fact(s) of {r.user_id}: no current value rested on it "
                  "(what it said is history only)")
