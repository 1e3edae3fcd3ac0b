"""Import a mem0 store: ``memledger import mem0 EXPORT.json [--history history.db]``.

What is read:

* ``EXPORT.json`` — what mem0's ``Memory.get_all`` returns, for one user or several: ``{"results": [...]}`` or a
  list of such objects (or of result lists). Each item needs ``id``, ``memory`` (the text) and ``user_id``;
  ``created_at``/``updated_at`` (ISO 8601 with offset), ``metadata``, ``agent_id``, ``run_id``, ``actor_id`` are
  kept when present. An item with an ``agent_id`` and no user is carried into that agent's own memories (the user
  id ``~agent/<agent_id>``, memledger/agent_space.py; the report counts them under ``agents``), as mem0 keeps an
  agent's memories without a user; an item with neither (a run's alone) is skipped.
* ``--history history.db`` — mem0's SQLite history (``~/.mem0/history.db``; table ``history``: ``memory_id``,
  ``old_memory``, ``new_memory``, ``event`` ADD/UPDATE/DELETE, ``created_at``, ``updated_at``, ...). For each
  memory of the export it holds, the ledger gets every step: ADD asserts, UPDATE asserts the new text (a change
  of mind: the old version is kept as history), DELETE retracts, each observed at the time mem0 recorded it. The
  history names no user, so the steps of a memory deleted before the export are skipped and reported.

Each memory becomes one fact of its user, under the key ``memory.m`` + 12 hex of SHA-256 of ``mem0:<id>`` (from the
id, never from the text), with the value the mem0-compatible API reads (memledger/compat/mem0_shapes.py:
the text, or ``{"memory", "metadata", "actor_id"}``), ``agent_id`` as the actor and ``run_id`` as the session.
mem0's memories are written by its LLM from what the user said, so they are recorded as ``agent_inference`` unless
``source="user_statement"`` is given (memories added with ``infer=False`` are the user's own words).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

from ledger.agent_spaces import space_of
from ledger.errors import BadInput
from ledger.schemas import check_identifier
from ledger.timeutil import parse_instant

from ..agent_space import opened_if_own
from ..compat.mem0_shapes import stored_value
from . import ImportReport, checked, record_all

SOURCES = ("agent_inference", "user_statement")
#: the largest export read (bytes): a file this big is not a get_all answer
MAX_EXPORT = 512 * 1024 * 1024


def fact_key(mem0_id: str) -> str:
    """The ledger key of mem0 memory ``mem0_id``: ``memory.m`` + 12 hex of SHA-256 of ``mem0:<id>``."""
    return "memory.m" + hashlib.sha256(f"mem0:{mem0_id}".encode("utf-8")).hexdigest()[:12]


def read_export(path: Path) -> list[Any]:
    """The items of a ``get_all`` export (see the module docstring), unchecked. Raises BadInput naming ``path``
    when the file is missing, too big, not JSON or not of that shape."""
    if not path.is_file():
        raise BadInput("path", f"{str(path)!r} is not a file", "give the JSON file mem0's get_all was saved to")
    if path.stat().st_size > MAX_EXPORT:
        raise BadInput("path", f"{str(path)!r} is over {MAX_EXPORT // 2**20} MB",
                       "split the export by user (get_all per user_id)")
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except RecursionError:
        raise BadInput("path", f"{str(path)!r} nests too deeply to be a get_all answer",
                       "give the JSON file mem0's get_all was saved to") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadInput("path", f"{str(path)!r} is not JSON ({str(exc)[:80]})",
                       "give the JSON file mem0's get_all was saved to") from None
    found: list[Any] = []

    def collect(x: Any) -> bool:
        if isinstance(x, dict) and isinstance(x.get("results"), list):
            found.extend(x["results"])
            return True
        if isinstance(x, list):
            if all(isinstance(i, dict) and "results" not in i for i in x):
                found.extend(x)
                return True
            return all(collect(i) for i in x)
        return False

    if not collect(data):
        raise BadInput("path", "is not a get_all answer: expected {\"results\": [...]} or a list of them",
                       "save the value mem0's Memory.get_all returned, as JSON")
    return found


def read_history(path: Path) -> dict[str, list[dict[str, Any]]]:
    """mem0's history rows by memory id, oldest first, read without writing to the file. Raises BadInput naming
    ``history`` when it is not a mem0 history database."""
    if not path.is_file():
        raise BadInput("history", f"{str(path)!r} is not a file", "give mem0's history.db (~/.mem0/history.db)")
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            cols = {r[1] for r in con.execute("PRAGMA table_info(history)")}
            need = {"memory_id", "new_memory", "event", "created_at"}
            if not need <= cols:
                raise BadInput("history", f"{str(path)!r} has no mem0 history table "
                               f"(columns {', '.join(sorted(need))})", "give mem0's history.db (~/.mem0/history.db)")
            wanted = [c for c in ("memory_id", "old_memory", "new_memory", "event", "created_at", "updated_at",
                                  "is_deleted", "actor_id", "role") if c in cols]
            rows = con.execute(f"SELECT {', '.join(wanted)} FROM history ORDER BY created_at, rowid").fetchall()
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise BadInput("history", f"{str(path)!r} is not an SQLite database ({exc})",
                       "give mem0's history.db (~/.mem0/history.db)") from None
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        r = dict(zip(wanted, row))
        out.setdefault(str(r["memory_id"]), []).append(r)
    for steps in out.values():  # an UPDATE keeps the memory's creation time: order each memory by when it happened
        steps.sort(key=lambda r: str(r.get("updated_at") or r["created_at"]) if r["event"] != "ADD" else "")
    return out


def mem0_commands(items: list[Any], history: dict[str, list[dict[str, Any]]] | None = None, *,
                  source: str = "agent_inference") -> tuple[list[dict[str, Any]], ImportReport]:
    """The ledger commands that carry ``items`` (and their ``history`` steps) over, and the report of what was read
    and skipped (see the module docstring). Pure: nothing is written."""
    if source not in SOURCES:
        raise BadInput("source", f"{source!r} is not one of {', '.join(SOURCES)}",
                       "use agent_inference (mem0's LLM wrote them) or user_statement (added with infer=False)")
    report = ImportReport("mem0", items=len(items))
    commands: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    for n, it in enumerate(items):
        where = f"results[{n}]"
        if not isinstance(it, dict):
            report.skip(where, f"is a {type(it).__name__}, not a memory object")
            continue
        mid = it.get("id")
        if not isinstance(mid, str) or not mid:
            report.skip(where, "no id" if mid is None else f"id is a {type(mid).__name__}, not a string")
            continue
        if mid in seen:
            report.skip(f"{where} ({mid})", "its id is listed earlier in the export: the first one is imported")
            continue
        seen.add(mid)
        user, text, agent = it.get("user_id"), it.get("memory"), it.get("agent_id")
        if user is None or (isinstance(user, str) and not user.strip()):
            if not isinstance(agent, str) or not agent.strip():
                report.skip(mid, "no user_id and no agent_id: a memory of a run alone has no user or agent to "
                            "belong to")
                continue
            try:  # an agent's memory without a user: the agent's own
                user = space_of(check_identifier(agent, "agent_id"))
            except BadInput as exc:
                report.skip(mid, f"{exc.field}: {exc.problem}")
                continue
        if not isinstance(user, str):
            report.skip(mid, f"user_id is a {type(user).__name__}, not a string")
            continue
        if not isinstance(text, str) or not text.strip():
            report.skip(mid, "no memory text" if text is None else "memory is not a non-empty string")
            continue
        wrong = [f for f in ("agent_id", "run_id", "actor_id") if it.get(f) is not None and not isinstance(it[f], str)]
        if it.get("metadata") is not None and not isinstance(it["metadata"], dict):
            wrong.append("metadata")
        if wrong:
            report.skip(mid, f"{', '.join(wrong)}: not of mem0's type (a string; metadata an object)")
            continue
        try:
            cmds = _memory_commands(mid, user, it, (history or {}).get(mid, []), source)
        except BadInput as exc:
            report.skip(mid, f"{exc.field}: {exc.problem}")
            continue
        commands.extend((mid, c) for c in cmds)
    for mid in sorted(set(history or {}) - seen):
        report.skip(mid, "in the history only (deleted before the export): the history names no user")
    with opened_if_own(*(c["user_id"] for _, c in commands)):
        return checked(commands, report), report


def _memory_commands(mid: str, user: str, it: dict[str, Any], steps: list[dict[str, Any]],
                     source: str) -> list[dict[str, Any]]:
    key = fact_key(mid)
    meta = it.get("metadata") if isinstance(it.get("metadata"), dict) else None
    common = {"user_id": user, "key": key, "source": source, "source_ref": f"mem0:{mid}"}
    if isinstance(it.get("agent_id"), str) and it["agent_id"]:
        common["actor"] = it["agent_id"]
    if isinstance(it.get("run_id"), str) and it["run_id"]:
        common["session_id"] = it["run_id"]
    actor_id = it.get("actor_id") if isinstance(it.get("actor_id"), str) else None
    out: list[dict[str, Any]] = []
    last: str | None = None
    for i, s in enumerate(steps):
        event = str(s.get("event") or "").upper()
        at = parse_instant(s.get("updated_at") or s["created_at"] if event != "ADD" else s["created_at"],
                     "history.created_at")
        tag = {**common, "observed_at": at.isoformat(), "idempotency_key": f"import:mem0:{mid}:{i}"}
        if event in ("ADD", "UPDATE") and isinstance(s.get("new_memory"), str) and s["new_memory"].strip():
            text = s["new_memory"]
            out.append({**tag, "op": "assert", "value": stored_value(text, None, s.get("actor_id")), "text": text})
            last = text
        elif event == "DELETE" and last is not None:
            out.append({**tag, "op": "retract", "reason": "deleted in mem0"})
            last = None
    text = it["memory"]
    if text != last or not out:  # the export holds the memory as it is now: its last step if the history lacks it
        created = parse_instant(it["created_at"], "created_at") if it.get("created_at") else None
        updated = parse_instant(it["updated_at"], "updated_at") if it.get("updated_at") else None
        at = (updated if out and updated else created) or updated
        step = {**common, "op": "assert", "value": stored_value(text, meta, actor_id), "text": text,
                "idempotency_key": f"import:mem0:{mid}:now"}
        if at is not None:
            step["observed_at"] = at.isoformat()
        out.append(step)
    elif meta or actor_id:  # the last step's value gains the export's metadata
        out[-1]["value"] = stored_value(text, meta, actor_id)
    return out


def import_mem0(ml: Any, path: str | Path, *, history: str | Path | None = None,
                source: str = "agent_inference") -> ImportReport:
    """Read ``path`` (and ``history``), then record what they hold (see the module docstring). Raises BadInput
    (nothing written) when a file cannot be read; items that cannot be carried over are in the report."""
    items = read_export(Path(path))
    steps = read_history(Path(history)) if history is not None else None
    commands, report = mem0_commands(items, steps, source=source)
    with opened_if_own(*(c["user_id"] for c in commands)):
        return record_all(ml, commands, report)
