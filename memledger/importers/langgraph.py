"""Import a LangGraph store's items: ``memledger import langgraph ITEMS.jsonl``.

The file holds one item per line, as a store's ``search`` returns them (``item.dict()``): ``namespace`` (a list of
strings), ``key``, ``value`` (an object), ``created_at`` and ``updated_at`` (ISO 8601 with offset). Blank lines are
skipped. The namespace's first label is the user, as in memledger's own store (memledger/integrations/langgraph.py):
the item becomes the fact ``lg.<label>...<key>`` of that user, so ``MemledgerStore`` serves it afterwards under the
same namespace and key. The value is the fact's value, its string leaves the sentence search reads; the item is
observed at its ``created_at``, and its namespace and key are its ``source_ref``. The store keeps one value per
item, so one assert carries it. Items are recorded as ``agent_inference`` (an agent wrote them into its store)
unless ``source="user_statement"`` is given. Needs no LangGraph install.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ledger.errors import BadInput
from ledger.timeutil import parse_instant

from ..integrations.lg_keys import _text_of, ledger_key
from . import ImportReport, checked, record_all
from .mem0 import SOURCES

#: the longest line read (characters): a store item is far smaller
MAX_LINE = 4 * 1024 * 1024
#: the largest file read (bytes)
MAX_FILE = 512 * 1024 * 1024


def read_items(path: Path) -> list[tuple[int, Any]]:
    """``(line number, parsed JSON)`` of each non-blank line. Raises BadInput naming ``path`` (or the line) when the
    file is missing or a line is not JSON."""
    if not path.is_file():
        raise BadInput("path", f"{str(path)!r} is not a file", "give a JSON Lines file of the store's items")
    if path.stat().st_size > MAX_FILE:
        raise BadInput("path", f"{str(path)!r} is over {MAX_FILE // 2**20} MB", "split the items into several files")
    try:
        raw = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadInput("path", f"{str(path)!r} is not UTF-8 (byte {exc.start})", "save the file as UTF-8") from None
    out = []
    for n, line in enumerate(raw.split("\n"), 1):  # not splitlines: U+2028 may stand inside a JSON string
        if not line.strip():
            continue
        if len(line) > MAX_LINE:
            raise BadInput(f"line {n}", f"is over {MAX_LINE // 2**20} MB", "one item per line")
        try:
            out.append((n, json.loads(line)))
        except RecursionError:
            raise BadInput(f"line {n}", "nests too deeply to be a store item", "one item per line") from None
        except ValueError as exc:
            raise BadInput(f"line {n}", f"is not JSON ({str(exc)[:80]})",
                           "write one item per line: {\"namespace\": [...], \"key\": ..., \"value\": {...}}") from None
    return out


def langgraph_commands(lines: list[tuple[int, Any]], *, source: str = "agent_inference"
                       ) -> tuple[list[dict[str, Any]], ImportReport]:
    """The ledger commands that carry the items over, and the report of what was read and skipped. Pure."""
    if source not in SOURCES:
        raise BadInput("source", f"{source!r} is not one of {', '.join(SOURCES)}",
                       "use agent_inference (an agent wrote them) or user_statement")
    report = ImportReport("langgraph", items=len(lines))
    commands: list[tuple[str, dict[str, Any]]] = []
    latest: dict[tuple[str, str], tuple[int, int]] = {}
    for n, it in lines:
        where = f"line {n}"
        if not isinstance(it, dict):
            report.skip(where, "not an object")
            continue
        ns, key, value = it.get("namespace"), it.get("key"), it.get("value")
        if not (isinstance(ns, list) and ns and all(isinstance(p, str) for p in ns)):
            report.skip(where, "namespace is not a list of strings naming the user first")
            continue
        if any(not p or "." in p for p in ns):  # LangGraph's own stores refuse these: the store could not read it
            report.skip(where, "namespace has an empty label or a label with '.', which LangGraph refuses")
            continue
        if not isinstance(key, str):
            report.skip(where, "key is not a string")
            continue
        if not isinstance(value, dict):
            report.skip(where, "no value (a deleted item: nothing to carry over)" if value is None
                        else f"value is a {type(value).__name__}, not an object")
            continue
        ref = "/".join(ns) + "#" + key
        try:
            fact = ledger_key(tuple(ns[1:]), key)
            at = parse_instant(it["created_at"], "created_at") if it.get("created_at") is not None else None
            cmd = {"op": "assert", "user_id": ns[0], "key": fact, "value": value, "text": _text_of(value),
                   "source": source, "source_ref": f"langgraph:{ref}"[:1000],
                   "idempotency_key": "import:langgraph:" + hashlib.sha256(
                       json.dumps([ns, key, it.get("updated_at"), value], sort_keys=True,
                                  ensure_ascii=False).encode("utf-8")).hexdigest()[:32]}
        except BadInput as exc:
            report.skip(where, f"{exc.field}: {exc.problem}")
            continue
        if at is not None:
            cmd["observed_at"] = at.isoformat()
        if (ns[0], fact) in latest:  # the same item twice: the store keeps the last put
            index, earlier = latest[(ns[0], fact)]
            commands[index] = (where, cmd)
            latest[(ns[0], fact)] = (index, n)
            report.skip(f"line {earlier}", f"{ref} is listed again on line {n}: the last line holding it is imported")
            continue
        latest[(ns[0], fact)] = (len(commands), n)
        commands.append((where, cmd))
    return checked(commands, report), report


def import_langgraph(ml: Any, path: str | Path, *, source: str = "agent_inference") -> ImportReport:
    """Read ``path`` and record its items (see the module docstring). Raises BadInput (nothing written) when the
    file cannot be read; items that cannot be carried over are in the report."""
    commands, report = langgraph_commands(read_items(Path(path)), source=source)
    return record_all(ml, commands, report)
