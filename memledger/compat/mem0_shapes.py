"""What :mod:`memledger.compat.mem0` needs besides the ledger: memory ids, argument checks with mem0's argument names,
how a memory's text and metadata are kept in a fact's value, mem0's filter language, and mem0's result shapes
(items and history rows) built from the ledger's rows.

Memory ids. A mem0 memory is one fact of the ledger: a user and a key. Its id is ``mlm_`` followed by the unpadded
URL-safe base64 of the JSON ``[user_id, key]`` (:func:`memory_id`, :func:`parse_memory_id`): stable (the same fact
always has the same id, in every process and after a rebuild), reversible without a lookup table, and opaque enough
for callers that store ids. An update keeps the id (a new version of the same fact); a memory deleted and later
said again in the same slot gets its id back, and its history shows both lives.

Values. A memory without metadata is stored as the ledger stores any free-text memory: value = text. With metadata
(or a message's ``name``) the value is ``{"memory": TEXT, "metadata": {...}, "actor_id": NAME}`` (the last two only
when given) and the fact's ``text`` is still the sentence, so slot resolution and search read it as usual
(:func:`stored_value`, :func:`read_value`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ledger.errors import BadInput
from ledger.agent_spaces import PREFIX, space_of
from ledger.schemas import (MAX_TEXT, canonical_json, check_agent_id, check_identifier, check_key, check_text,
                            check_user_id)

logger = logging.getLogger("memledger.compat.mem0")

ID_PREFIX = "mlm_"
#: the keys mem0 keeps out of caller metadata (scope is set by the arguments, never by metadata)
IDENTITY_KEYS = ("user_id", "agent_id", "run_id", "actor_id")
SCOPE_KEYS = ("user_id", "agent_id", "run_id")
ROLES = ("user", "assistant", "system", "tool")
#: mem0's metadata filter operators (``{"key": {"gte": 3}}``) and logical keys
OPERATORS = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "contains", "icontains")
LOGICAL = ("AND", "OR", "NOT")
_VALUE_KEYS = {"memory", "metadata", "actor_id"}
_ID_FIX = "pass an id returned by add, get, get_all or search"


# -- ids -----------------------------------------------------------------------------------------------------------
def memory_id(user_id: str, key: str) -> str:
    """The mem0 id of fact ``key`` of ``user_id`` (see the module docstring)."""
    raw = json.dumps([user_id, key], ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return ID_PREFIX + base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def parse_memory_id(mid: Any, field: str = "memory_id") -> tuple[str, str]:
    """``(user_id, key)`` of an id made by :func:`memory_id`. Raises BadInput naming ``field`` for anything else."""
    if not isinstance(mid, str) or not mid.startswith(ID_PREFIX):
        shown = repr(mid) if isinstance(mid, str) else f"a {type(mid).__name__}"
        raise BadInput(field, f"{shown[:80]} is not a memledger memory id", _ID_FIX)
    body = mid[len(ID_PREFIX):]
    try:
        pair = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode("utf-8"))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        pair = None
    if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
        raise BadInput(field, f"{mid[:80]!r} is not a memledger memory id (it does not decode)", _ID_FIX)
    try:  # an agent's own id was minted here for agent_id alone: its agent id is checked, not refused as a user
        own = pair[0].startswith(PREFIX)
        user_id = space_of(check_agent_id(pair[0][len(PREFIX):], "user_id")) if own else check_user_id(pair[0])
        key = check_key(pair[1])
    except BadInput as exc:
        raise BadInput(field, f"{mid[:80]!r} names an invalid {exc.field}", _ID_FIX) from None
    if memory_id(user_id, key) != mid:
        raise BadInput(field, f"{mid[:80]!r} is not in the canonical form of a memledger memory id", _ID_FIX)
    return user_id, key


def memory_hash(memory: str | None) -> str | None:
    """mem0's ``hash`` of a memory: the MD5 hex digest of its text (an identity for deduplication, not security)."""
    return None if memory is None else hashlib.md5(memory.encode("utf-8")).hexdigest()


# -- arguments -----------------------------------------------------------------------------------------------------
def entity_id(value: Any, name: str) -> str | None:
    """A user_id / agent_id / run_id as mem0 takes it (an int becomes a string, surrounding spaces are trimmed),
    checked as the ledger's user id (``user_id``) or identifier (``agent_id`` -> the fact's actor, ``run_id`` -> its
    session id). None stays None. Raises BadInput naming ``name``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise BadInput(name, f"must be a string, got {type(value).__name__}",
                       f"pass {name} as a string such as 'alice'")
    value = str(value).strip()
    if not value:
        raise BadInput(name, "is empty", f"give {name} as a non-empty string, or leave it out")
    if name == "user_id":
        return check_user_id(value, name)
    return check_identifier(value, name)  # an agent or run id: a user id's characters (ledger/schemas.py)


def require_user(user_id: str | None, agent_id: str | None, run_id: str | None) -> str:
    """The user id a call is scoped to: ``user_id``, or with ``agent_id`` alone (not ``"*"``) that agent's own
    memories, kept under the user id ``~agent/<agent_id>`` (memledger/agent_space.py), as mem0 lets an agent keep
    memories of its own. Raises BadInput naming ``user_id`` when neither names one (``run_id`` alone narrows
    nothing: a run is kept within a user or an agent)."""
    if user_id is not None:
        return user_id
    if agent_id is not None and agent_id != "*":
        return space_of(check_identifier(agent_id, "agent_id"))
    if run_id is not None:
        raise BadInput("user_id", "is missing: run_id alone is not a scope memledger keeps",
                       "pass user_id= (or agent_id= for an agent's own memories) as well: a run's memories are "
                       "kept within a user or an agent")
    raise BadInput("user_id", "is missing (one of user_id, agent_id or run_id is required)",
                   "pass user_id='...', or agent_id='...' for that agent's own memories (in search and get_all "
                   "also filters={'user_id': '...'})")


def shown_user(user_id: str) -> dict[str, str]:
    """The ``user_id`` entry of a memory's item and filter payload: none for an agent's own memory (mem0 shows
    only the scopes a memory was added with, and its ``agent_id`` names the agent)."""
    return {} if user_id.startswith(PREFIX) else {"user_id": user_id}


def check_metadata(metadata: Any, field: str = "metadata") -> dict[str, Any] | None:
    """Caller metadata as mem0 keeps it: a dict of JSON values; the identity keys (user_id, agent_id, run_id,
    actor_id) are dropped with a warning, as mem0 does. None or empty -> None. Raises BadInput naming ``field``."""
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise BadInput(field, f"is a {type(metadata).__name__}",
                       "pass a dict of JSON values, e.g. {'category': 'food'}")
    clean = {}
    for k, v in metadata.items():
        if not isinstance(k, str):
            raise BadInput(field, f"has the non-string key {k!r}", "use string keys")
        if k in IDENTITY_KEYS:
            logger.warning("ignoring metadata[%r]: identity fields cannot be set through metadata", k)
            continue
        clean[k] = v
    canonical_json(clean, field)  # JSON values only, within the ledger's size and nesting limits
    return clean or None


def check_text_arg(text: Any, field: str) -> str:
    """A memory's text: a non-empty string of at most MAX_TEXT characters without control characters."""
    if not isinstance(text, str):
        raise BadInput(field, f"must be a string, got {type(text).__name__}",
                       "pass the text as a string (images and content parts are not supported)")
    if not text.strip():
        raise BadInput(field, "is empty", "give the text to remember")
    check_text(text, field)
    if len(text) > MAX_TEXT:
        raise BadInput(field, f"is {len(text)} characters long", f"use at most {MAX_TEXT}")
    return text


def normalise_messages(messages: Any) -> list[dict[str, Any]]:
    """mem0's ``messages`` (a string, a ``{"role", "content"}`` dict, or a list of them) as a list of
    ``{"role", "content", "name", "where"}`` (``where`` names the argument in errors). Every message is checked
    before anything is written. Raises BadInput naming the message and field (``messages[2].content``)."""
    if isinstance(messages, str):
        return [{"role": "user", "content": check_text_arg(messages, "messages"), "name": None, "where": "messages"}]
    if isinstance(messages, dict):
        items, wheres = [messages], ["messages"]
    elif isinstance(messages, (list, tuple)):
        items, wheres = list(messages), [f"messages[{i}]" for i in range(len(messages))]
    else:
        raise BadInput("messages", f"is a {type(messages).__name__}",
                       "pass a string, a {'role': ..., 'content': ...} dict, or a list of such dicts")
    if not items:
        raise BadInput("messages", "is an empty list", "pass at least one message")
    out = []
    for m, where in zip(items, wheres):
        if not isinstance(m, dict):
            raise BadInput(where, f"is a {type(m).__name__}, not a message", "pass {'role': 'user', 'content': '...'}")
        role = m.get("role")
        if role not in ROLES:
            raise BadInput(f"{where}.role", f"{role!r} is not a role", "use user, assistant, system or tool")
        content = check_text_arg(m.get("content"), f"{where}.content")
        name = m.get("name")
        if name is not None:
            name = entity_id(name, f"{where}.name")
        out.append({"role": role, "content": content, "name": name, "where": where})
    return out


def rename_fields(exc: BadInput, names: dict[str, str]) -> BadInput:
    """``exc`` with its field named as the caller named it (``actor`` -> ``agent_id``, ``text`` ->
    ``messages[0].content``); other fields unchanged."""
    field = names.get(exc.field, exc.field)
    return exc if field == exc.field else type(exc)(field, exc.problem, exc.fix)


# -- values --------------------------------------------------------------------------------------------------------
def stored_value(text: str, metadata: dict[str, Any] | None, actor_id: str | None) -> Any:
    """The fact value of a memory: the text itself, or ``{"memory", "metadata"?, "actor_id"?}`` when there is more
    to keep (module docstring)."""
    if not metadata and actor_id is None:
        return text
    value: dict[str, Any] = {"memory": text}
    if metadata:
        value["metadata"] = metadata
    if actor_id is not None:
        value["actor_id"] = actor_id
    return value


def read_value(value: Any, text: str | None) -> tuple[str | None, dict[str, Any] | None, str | None]:
    """``(memory, metadata, actor_id)`` of a fact version: the inverse of :func:`stored_value`; a fact written
    another way reads as its text (or its value, as JSON when it is not a string) with no metadata."""
    if (isinstance(value, dict) and isinstance(value.get("memory"), str) and set(value) <= _VALUE_KEYS
            and isinstance(value.get("metadata", {}), dict)):
        return value["memory"], value.get("metadata") or None, value.get("actor_id")
    if text:
        return text, None, None
    if value is None:
        return None, None, None
    return (value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)), None, None


# -- filters -------------------------------------------------------------------------------------------------------
def check_filters(filters: dict[str, Any], field: str = "filters") -> None:
    """Refuse a metadata filter mem0 would refuse (an unknown operator, a logical key without a list). Raises
    BadInput naming ``filters.KEY``."""
    for k, v in filters.items():
        where = f"{field}.{k}"
        if k in LOGICAL:
            if not isinstance(v, list) or not v or not all(isinstance(c, dict) for c in v):
                raise BadInput(where, "must be a non-empty list of conditions",
                               f"e.g. {{'{k}': [{{'category': 'food'}}]}}")
            for i, c in enumerate(v):
                check_filters(c, f"{where}[{i}]")
        elif isinstance(v, dict):
            for op in v:
                if op not in OPERATORS:
                    raise BadInput(where, f"{op!r} is not a filter operator", "use one of " + ", ".join(OPERATORS))
                if op in ("in", "nin") and not isinstance(v[op], list):
                    raise BadInput(f"{where}.{op}", "must be a list", f"e.g. {{'{k}': {{'{op}': ['a', 'b']}}}}")


def _compare(have: Any, op: str, want: Any) -> bool:
    if op == "eq":
        return have == want
    if op == "ne":
        return have != want
    if op == "in":
        return have in want
    if op == "nin":
        return have not in want
    if op in ("contains", "icontains"):
        if isinstance(have, str) and isinstance(want, str):
            return want.lower() in have.lower() if op == "icontains" else want in have
        return isinstance(have, list) and want in have
    numbers = (int, float)
    if isinstance(have, bool) or isinstance(want, bool):
        return False
    both_numbers = isinstance(have, numbers) and isinstance(want, numbers)
    if not (both_numbers or (isinstance(have, str) and isinstance(want, str))):
        return False
    return {"gt": have > want, "gte": have >= want, "lt": have < want, "lte": have <= want}[op]


def matches(payload: dict[str, Any], filters: dict[str, Any]) -> bool:
    """True if a memory's payload (its metadata, user_id, agent_id, run_id, actor_id) satisfies mem0 ``filters``:
    ``{"k": v}`` equality, ``{"k": "*"}`` present, ``{"k": {op: v}}`` with :data:`OPERATORS`, and ``AND``/``OR``/
    ``NOT`` lists. A key the payload lacks matches only ``ne`` and ``nin``."""
    for k, cond in filters.items():
        if k == "AND":
            ok = all(matches(payload, c) for c in cond)
        elif k == "OR":
            ok = any(matches(payload, c) for c in cond)
        elif k == "NOT":
            ok = not any(matches(payload, c) for c in cond)
        elif k not in payload:
            ok = isinstance(cond, dict) and bool(cond) and all(op in ("ne", "nin") for op in cond)
        elif cond == "*":
            ok = True
        elif isinstance(cond, dict):
            ok = all(_compare(payload[k], op, want) for op, want in cond.items())
        else:
            ok = payload[k] == cond
        if not ok:
            return False
    return True


# -- ledger rows to mem0 shapes ------------------------------------------------------------------------------------
@dataclass
class Life:
    """The current life of one memory (since its last ADD), from the history rows: what made it current."""

    version: int
    created_at: str
    updated_at: str
    agent_id: str | None
    run_id: str | None
    sensitivity: str | None
    memory: str | None


def iso(at: datetime | None) -> str | None:
    """An instant as mem0 writes it: ISO 8601 in UTC with ``+00:00``."""
    return None if at is None else at.isoformat()


def walk(rows: list[dict[str, Any]], memory_id: str | None = None, texts: dict[int, str | None] | None = None,
         actor_ids: dict[int, str | None] | None = None) -> tuple[list[dict[str, Any]], Life | None]:
    """mem0 history rows of one fact, and its current :class:`Life` (None when it has no current memory).

    ``rows``: the fact's ``history_versions`` rows in log order (``version``, ``event_id``, ``effect``, ``status``,
    ``recorded_at``, ``observed_at`` (the time used, when given), ``actor``, ``session_id``, ``sensitivity``);
    ``texts``/``actor_ids``: each version's memory and
    message name, where known. A version that became current is an ADD (nothing current before) or an UPDATE (a
    supersede or a correction: ``old_memory`` the memory it replaced); a retraction, or a ``forget`` that shredded the
    current version, is a DELETE. Reaffirmations, backfills, contests and quarantined statements changed no memory
    and make no row, as in mem0.
    """
    texts, actor_ids = texts or {}, actor_ids or {}
    status = {r["version"]: r["status"] for r in rows}
    out: list[dict[str, Any]] = []
    life: Life | None = None
    for r in rows:
        # when it was said: an imported memory keeps mem0's times (memledger/importers/mem0.py), a memory added here
        # was observed as it was recorded
        effect, at, version = r["effect"], iso(r.get("observed_at") or r["recorded_at"]), r["version"]
        text = texts.get(version)
        if effect == "new" or (effect in ("supersede", "correct") and life is None):
            event, old = "ADD", None
        elif effect in ("supersede", "correct"):
            event, old = "UPDATE", life.memory if life else None
        elif effect == "retract" and life is not None:
            event, old = "DELETE", life.memory
        elif effect == "forget" and life is not None and status.get(life.version) == "forgotten":
            event, old = "DELETE", None
        else:
            continue
        if event == "DELETE":
            created = life.created_at if life else at
            life = None
        else:
            created = at if event == "ADD" or life is None else life.created_at
            life = Life(version, created, at, r["actor"], r["session_id"], r["sensitivity"], text)
        out.append({"id": r["event_id"], "memory_id": memory_id, "old_memory": old,
                    "new_memory": None if event == "DELETE" else text, "event": event, "created_at": created,
                    "updated_at": at, "is_deleted": event == "DELETE", "actor_id": actor_ids.get(version),
                    "role": None})
    return out, life


def payload(user_id: str, life: Life | None, metadata: dict[str, Any] | None, actor_id: str | None) -> dict[str, Any]:
    """What mem0's filters see of a memory: its metadata and its scope (user_id, agent_id, run_id, actor_id)."""
    out = dict(metadata or {})
    out.update(shown_user(user_id))
    if life is not None and life.agent_id is not None:
        out["agent_id"] = life.agent_id
    if life is not None and life.run_id is not None:
        out["run_id"] = life.run_id
    if actor_id is not None:
        out["actor_id"] = actor_id
    return out


_NO_SCORE = object()


def item(mid: str, user_id: str, memory: str, metadata: dict[str, Any] | None, life: Life | None,
         actor_id: str | None, fallback_at: datetime | None, score: Any = _NO_SCORE) -> dict[str, Any]:
    """One memory in mem0's shape: ``id, memory, hash, metadata, [score], created_at, updated_at, user_id`` and
    ``agent_id``, ``run_id``, ``actor_id`` when set (as mem0's ``MemoryItem`` plus its promoted payload keys).
    ``score`` is left out unless given (``get`` gives None, as mem0's does)."""
    out: dict[str, Any] = {"id": mid, "memory": memory, "hash": memory_hash(memory), "metadata": metadata}
    if score is not _NO_SCORE:
        out["score"] = score
    out["created_at"] = life.created_at if life else iso(fallback_at)
    out["updated_at"] = life.updated_at if life else iso(fallback_at)
    out.update(shown_user(user_id))
    if life is not None and life.agent_id is not None:
        out["agent_id"] = life.agent_id
    if life is not None and life.run_id is not None:
        out["run_id"] = life.run_id
    if actor_id is not None:
        out["actor_id"] = actor_id
    return out
