"""The addresses of a LangGraph store's items in the ledger, and an item's sentence for search, with no LangGraph
import: the store (memledger/integrations/langgraph.py) and the importer of a store's items
(memledger/importers/langgraph.py) share them. The mapping and the escaping are described in the store's module."""

from __future__ import annotations

import json
import re
from typing import Any

from ledger.errors import BadInput
from ledger.schemas import KEY_RE, MAX_KEY

ROOT = "lg"
_PLAIN = re.compile(r"[a-z0-9\-]")  # new ledger keys are lowercase: capitals are escaped too
_ESCAPED = re.compile(r"^(?:[a-z0-9\-]|_[0-9a-f]{2})+$")


def escape(label: str) -> str:
    """One namespace label or key as a ledger key segment (reversible; see the module docstring)."""
    if label == "":
        return "_"
    out = []
    for ch in label:
        if _PLAIN.fullmatch(ch):
            out.append(ch)
        else:
            out.extend(f"_{b:02x}" for b in ch.encode("utf-8", "surrogatepass"))
    return "".join(out)


def unescape(segment: str) -> str:
    """The label or key a segment made by :func:`escape` stands for. Raises ValueError for anything else."""
    if segment == "_":
        return ""
    if not _ESCAPED.match(segment):
        raise ValueError(f"{segment!r} is not an escaped label")
    raw = bytearray()
    i = 0
    while i < len(segment):
        if segment[i] == "_":
            raw.append(int(segment[i + 1:i + 3], 16))
            i += 3
        else:
            raw.extend(segment[i].encode())
            i += 1
    return raw.decode("utf-8", "surrogatepass")


def ledger_key(prefix: tuple[str, ...], key: str) -> str:
    """The ledger key of item ``key`` under namespace ``(user_id, *prefix)``. Raises BadInput if too long."""
    out = ".".join([ROOT, *(escape(p) for p in prefix), escape(key)])
    if len(out) > MAX_KEY or not KEY_RE.match(out):
        raise BadInput("key", f"namespace {prefix!r} and key {key[:40]!r} escape to {len(out)} characters",
                       f"keep the escaped namespace and key within {MAX_KEY} characters")
    return out


def item_address(fact_key: str) -> tuple[tuple[str, ...], str] | None:
    """``(prefix, key)`` of a ledger key made by :func:`ledger_key`, or None for a key outside the store."""
    parts = fact_key.split(".")
    if len(parts) < 2 or parts[0] != ROOT:
        return None
    try:
        labels = [unescape(p) for p in parts[1:]]
    except ValueError:
        return None
    return tuple(labels[:-1]), labels[-1]


#: the namespace labels that name a scope (memledger/scopes.py) when they follow the user: ``(user, "agents", A,
#: ...)`` is agent A's, ``(user, "runs", R, ...)`` and ``(user, "agents", A, "runs", R, ...)`` run R's
SCOPE_LABELS = {"agents": "actor", "runs": "session_id"}


def namespace_scope(namespace: tuple[str, ...]) -> dict[str, str]:
    """The scopes a namespace names, as the fields a write records them in (``{"actor": A, "session_id": R}``):
    ``(user, "agents", A, ...)`` names agent A, ``(user, "runs", R, ...)`` run R, ``(user, "agents", A, "runs", R,
    ...)`` both. An empty label names no scope (the item is stored as it always was: the namespace keeps
    addressing it); a label that is no agent or run id (``x/y`` as an agent, a zero-width space: the rules of
    :func:`ledger.schemas.check_agent_id` and :func:`~ledger.schemas.check_run_id`) is refused, as that id would be
    on every other face.

    Raises:
        BadInput: naming ``namespace[i]``, the label's place, with the characters an agent or run id may hold.
    """
    from ledger.schemas import check_identifier

    out: dict[str, str] = {}
    rest, at = list(namespace[1:]), 1
    for label, field in SCOPE_LABELS.items():
        if len(rest) >= 2 and rest[0] == label:
            if isinstance(rest[1], str) and rest[1] == "":
                return out
            try:
                value = check_identifier(rest[1], field)
            except BadInput as exc:
                scope = "agent_id" if label == "agents" else "run_id"
                raise BadInput(f"namespace[{at + 1}]", f"(the {scope} after {label!r}): {exc.problem}",
                               exc.fix) from None
            if value is not None:
                out[field] = value
            rest, at = rest[2:], at + 2
    return out


def _text_of(value: dict[str, Any]) -> str:
    """The fact's sentence for search: the value's string leaves, in order (the JSON when it has none)."""
    leaves: list[str] = []

    def walk(x: Any) -> None:
        if isinstance(x, str):
            if x.strip():
                leaves.append(x.strip())
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)

    walk(value)
    text = ". ".join(leaves) if leaves else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text[:100_000] or "{}"
