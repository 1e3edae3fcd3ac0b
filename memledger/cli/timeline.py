"""``memledger timeline USER --html FILE``: a user's bitemporal timeline as one self-contained HTML file
(docs/timeline.md), to send to an auditor: it opens offline, fetches nothing (its Content-Security-Policy allows
no request at all), and shows what ``/ui/users/{user_id}`` of ``memledger serve http`` shows.

Bad input (an invalid USER, label or ``--now``, no ``--html``, a FILE in a missing directory or naming a
directory) exits 2 naming the flag, with nothing written. A labelled (sensitive) fact is written to the file only
with ``--allow-sensitive LABEL``, and each one written is recorded as a disclosure, as ``context`` records those
it lets into an agent's context. The file is written whole or not at all (a temporary file renamed into place).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional

import typer

from ledger.errors import BadInput

from .common import AgentReadOpt, RunReadOpt, app, cli_scope, cli_user, open_ledger, out


def _target(path: Optional[str]) -> Path:
    if path is None or not path.strip():
        raise BadInput("--html", "is missing", "name the file to write, e.g. --html timeline.html")
    target = Path(path).expanduser()
    if target.is_dir():
        raise BadInput("--html", f"{path!r} is a directory", "name a file in it, e.g. --html DIR/timeline.html")
    # the file is renamed into place: over a symlink, a device (/dev/null) or a FIFO that would replace the thing
    # itself, not write through it (run as root, /dev/null would become a regular file)
    if target.is_symlink() or (target.exists() and not target.is_file()):
        raise BadInput("--html", f"{path!r} is a symlink or a special file, not a regular file",
                       "name a regular file (or a new one) to write the timeline to")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise BadInput("--html", f"the directory {str(parent)!r} does not exist", "create it first, or write the "
                       "file elsewhere")
    return target


def _write(target: Path, text: str) -> None:
    try:
        fd, tmp = tempfile.mkstemp(prefix=".timeline-", suffix=".html",
                                   dir=target.parent if str(target.parent) else ".")
    except OSError as exc:  # a directory that takes no new file (/proc, read-only): the flag's problem, not a crash
        raise BadInput("--html", f"cannot create a file in {str(target.parent)!r}: {exc.strerror}",
                       "write the timeline to a directory you can write to") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o600)  # it holds a user's memory: readable by its owner only, as the store is
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@app.command("timeline")
def timeline_cmd(
    ctx: typer.Context, user: str,
    html: Optional[str] = typer.Option(None, "--html", help="Write the timeline to this file: one self-contained "
                                       "HTML page that opens offline."),
    allow_sensitive: Optional[list[str]] = typer.Option(
        None, "--allow-sensitive", help="Show facts with this sensitivity label (repeatable, or comma-separated); "
        "each one shown is recorded as a disclosure. Others are shown as withheld."),
    now: Optional[str] = typer.Option(None, "--now", help="Judge scheduled facts at this instant (ISO 8601 with an "
                                      "offset; default now). The file still holds everything recorded."),
    agent: Optional[str] = AgentReadOpt, run: Optional[str] = RunReadOpt,
) -> None:
    """Write USER's memory as a bitemporal timeline to one HTML file (one row per key, a system-time slider, the
    audit of every version, sessions, messages and disclosures); --agent / --run: only what that agent wrote / that
    run held, as a scoped audit shows it (USER - with --agent: the agent's own memories)."""
    from ledger.agent_spaces import unknown_refusal
    from ledger.schemas import check_user_id
    from ledger.timeutil import parse_instant
    from memledger.sensitivity import check_allow_sensitive
    from memledger.ui.model import PURPOSE_EXPORT, record_shown, user_view
    from memledger.ui.render import user_page

    scope = cli_scope(agent, run)
    user = check_user_id(cli_user(ctx, user, scope.agent_id), "USER")
    target = _target(html)
    labels = check_allow_sensitive([x for raw in allow_sensitive or [] for x in raw.split(",")] or None,
                                   "--allow-sensitive")
    if now is not None:
        parse_instant(now, "--now")
    with open_ledger(ctx, embedder="none") as opened:
        from memledger.sharding.sharded import is_sharded

        ml = opened.shard(opened.shard_of(user)) if is_sharded(opened) else opened  # the user's shard on a map
        view = user_view(ml, user, allow_sensitive=labels, now=now, agent_id=scope.agent_id, run_id=scope.run_id)

        def empty(v: dict) -> bool:
            return not v["erased"] and not v["keys"] and not v["sessions"] and not v["people"]

        if empty(view) and (not scope or empty(user_view(ml, user, now=now))):
            # a mistyped USER or --home would otherwise give an auditor an empty file and exit 0
            raise unknown_refusal(user, f"the ledger at this home holds nothing about {user!r} (no fact, session, "
                                  "relation or erasure)", "check the user id (memledger stats lists the store) and "
                                  "--home/--dsn", "USER")
        if empty(view):  # the user is there, the scope is not: a mistyped --agent / --run
            flag, given = ("--agent", scope.agent_id) if scope.agent_id is not None else ("--run", scope.run_id)
            raise BadInput(flag, f"nothing of {user!r} was written {'by agent' if flag == '--agent' else 'in run'} "
                           f"{given!r}" + (f" in run {scope.run_id!r}" if flag == "--agent" and scope.run_id else ""),
                           "check the scope (memledger history USER --json shows each version's actor and "
                           "session_id), or leave it out for the whole timeline")
        page = user_page(view, inline=True)
        _write(target, page)
        positions = record_shown(ml, view, PURPOSE_EXPORT)
    if view["erased"]:
        out.print(f"wrote {target}: {user} was erased; the file holds the erasure receipt only")
        return
    n = sum(len(k["versions"]) for k in view["keys"])
    note = f"; {len(positions)} sensitive facts shown, recorded as disclosures" if positions else ""
    out.print(f"wrote {target}: {len(view['keys'])} keys, {n} versions, {len(view['sessions'])} sessions "
              f"({len(page.encode('utf-8')) / 1024:.0f} KiB){note}")
