"""Refusals worded for the agent faces: the field a caller sent, the problem, and a fix in the caller's terms.

A request's refusal (``memledger/requests/``: search, context, remember) needs nothing here: it is worded once in
the request's field names and each face renders it (:meth:`memledger.requests.RequestError.worded`).

What is still reworded here, and why: the refusals of the verbs that have no request model (the fact commands
assert, correct, retract and record; unlink; the session verbs; profile, history and the time-travel reads;
relations and identity links; erase and forget), and those raised past a request's checks (an idempotency key
reused for another command, an opt-out session, an erased user, a remember ``about`` naming no one). They are worded
for the CLI (``field: --text``, ``fix: give --task ...``, ``run `memledger session start USER SESSION```), and over
MCP and HTTP the caller sent a tool argument or a JSON body field, so :func:`for_face` renames CLI flags to the
argument/body field (``--replace-action`` -> ``replace_actions``) and CLI commands to the tool or route that does the
same; :func:`from_validation` words a pydantic failure of an argument model (``ValidationError.errors()``) the same
way, with a fix (``ledger.schemas.pydantic_problem`` gives the problem).
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Literal

from ledger.errors import BadInput
from ledger.schemas import pydantic_problem

from ..requests import Names, RequestError

Face = Literal["mcp", "http"]

#: CLI commands named in fixes (``memledger history u1 k``, in backticks or parentheses) -> the face's tool or route
COMMANDS: dict[str, dict[str, str]] = {
    "session start": {"mcp": "`log_message` (it starts the session)",
                      "http": "`POST /v1/users/{user_id}/sessions/{session_id}`"},
    "history": {"mcp": "`history`", "http": "`GET /v1/users/{user_id}/history/{key}`"},
    "assert": {"mcp": "`remember`", "http": "`POST /v1/users/{user_id}/facts/{key}`"},
    "correct": {"mcp": "`correct`", "http": "`POST /v1/users/{user_id}/facts/{key}/corrections`"},
    "retract": {"mcp": "`retract`", "http": "`POST /v1/users/{user_id}/facts/{key}/retractions`"},
    "unlink": {"mcp": "`unlink`", "http": "`POST /v1/users/{user_id}/facts/{key}/unlinks`"},
    "erase": {"mcp": "`erase`", "http": "`DELETE /v1/users/{user_id}`"},
    "profile": {"mcp": "`profile`", "http": "`GET /v1/users/{user_id}/profile`"},
}
#: whole CLI phrases of fixes -> the face's own (tried before COMMANDS)
PHRASES: dict[str, dict[str, str]] = {
    "run `memledger session start USER SESSION` (or log a message) first": {
        "mcp": "call `log_message` first (it starts the session)",
        "http": "start it with `POST /v1/users/{user_id}/sessions/{session_id}` (or log a message) first"},
}
#: positional CLI arguments named as fields -> the argument/body field
POSITIONAL = {"USER": "user_id", "KEY": "key", "VALUE": "value", "SESSION": "session_id"}

_FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)(-?)")
_CMD = re.compile(r"`memledger ((?:session )?[a-z-]+)[^`]*`|(?<=\()memledger ((?:session )?[a-z-]+)[^()]*(?=\))")


def _fields(model: Any) -> set[str]:
    if isinstance(model, (set, frozenset)):
        return set(model)
    return set(getattr(model, "model_fields", {}) or {})


def face_field(name: str, model: Any = None) -> str:
    """A CLI flag or positional name as the argument/body field: ``--observed-at`` -> ``observed_at``,
    ``--replace-action`` -> ``replace_actions`` (when ``model`` has that field), ``USER`` -> ``user_id``.
    A prefix such as ``commands[0].`` or ``line 3: `` is kept."""
    m = re.match(r"^(.*?)(--[a-z][a-z0-9-]*|[A-Z][A-Z_]*)$", name or "")
    if m is None:
        return name
    prefix, bare = m.groups()
    if bare.startswith("--"):
        out = bare[2:].replace("-", "_")
    elif bare in POSITIONAL:
        out = POSITIONAL[bare]
    else:
        return name
    fields = _fields(model)
    if fields and out not in fields and out + "s" in fields:
        out += "s"
    return prefix + out


def face_text(text: str, face: Face, model: Any = None) -> str:
    """``text`` (a problem or fix) with CLI flags named as fields and CLI commands as the face's tool or route."""
    if not text:
        return text
    for phrase, faces in PHRASES.items():
        text = text.replace(phrase, faces[face])

    def command(m: re.Match[str]) -> str:
        faces = COMMANDS.get(m.group(1) or m.group(2) or "")
        return faces[face] if faces is not None else m.group(0)

    text = _CMD.sub(command, text)

    def flag(m: re.Match[str]) -> str:
        name = face_field("--" + m.group(1), model)
        return name + ("_" if m.group(2) else "")

    text = _FLAG.sub(flag, text)
    return text.replace(" flag", " field") if "--" not in text else text


def for_face(exc: BadInput, face: Face, model: Any = None) -> BadInput:
    """``exc`` worded for ``face``: its field, problem and fix in the caller's terms (a new BadInput).

    A request's refusal (:class:`memledger.requests.RequestError`) is worded by the request itself: a tool's
    arguments and a route's fields are the request's fields, so its names are the face's. Other refusals, worded
    for the CLI by the verbs that are not requests yet, are renamed by the patterns below."""
    if isinstance(exc, RequestError):
        worded = exc.worded(Names(face))
        if not worded.fix:  # every refusal says what to send instead
            worded.fix = _default_fix(face)
        return worded
    field = face_field(exc.field or "", model) or exc.field
    out = BadInput(field, face_text(exc.problem, face, model), face_text(exc.fix or "", face, model) or
                   _default_fix(face))
    return out


def _default_fix(face: Face) -> str:
    return ("see the tool's input schema (tools/list)" if face == "mcp"
            else "see /openapi.json for the expected fields and types")


#: how like a known field an unknown one must be to be offered as "did you mean" (difflib's ratio): at 0.6 a name
#: sharing three letters of five was offered (``bogus`` -> ``about``); below it, the fields are listed instead
CLOSE_NAME = 0.65


def close_name(name: str, known: Any) -> str | None:
    """The known field ``name`` most likely misspells (``agentid`` -> ``agent_id``), or None when none is close."""
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=CLOSE_NAME)
    return close[0] if close else None


#: where FastAPI says a request field was (the first part of its error locations)
_LOCATIONS = ("body", "query", "path", "header", "cookie")


def _loc(loc: Any, located: bool = False) -> str:
    """A pydantic error location as a field path; ``located``: FastAPI's, whose first part says where the field was
    (("query", "query") is the query parameter ``query``, not ``body``)."""
    parts: list[str] = []
    for i, p in enumerate(loc or ()):
        if located and i == 0 and p in _LOCATIONS:
            continue
        if isinstance(p, int):
            parts.append(f"[{p}]")
        else:
            parts.append(("." if parts else "") + str(p))
    return "".join(parts)


def fix_of(err: dict[str, Any], field: str, face: Face, model: Any = None) -> str:
    """The fix for one pydantic error of field ``field``."""
    kind = err.get("type", "")
    msg = str(err.get("msg", ""))
    ctx = err.get("ctx") or {}
    inner = ctx.get("error")
    if isinstance(inner, BadInput) and inner.fix:
        return face_text(inner.fix, face, model)
    if "; fix: " in msg:
        return face_text(msg.partition("; fix: ")[2], face, model)
    what = "argument" if face == "mcp" else "field"
    if kind == "missing":
        return f"give {field} (a required {what})"
    if kind == "extra_forbidden":
        known = sorted(_fields(model) - {"user_id"} if face == "http" else _fields(model))
        name = field.rsplit(".", 1)[-1]
        close = close_name(_snake(name), known)
        hint = f"did you mean {close}? " if close else ""
        return f"{hint}remove it; the {what}s are: {', '.join(known)}" if known else "remove it"
    if kind == "literal_error":
        return f"use one of {ctx.get('expected', '')}"
    if kind in ("json_invalid",):
        return "send one JSON object (check quotes, commas and brackets)"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return "send a JSON object"
    if msg.startswith("Input should be "):
        return "give a value that is " + msg[len("Input should be "):].split(", unable to")[0]
    if kind == "string_too_long":
        return f"shorten it to at most {ctx.get('max_length', '?')} characters"
    if kind == "string_too_short":
        return f"give at least {ctx.get('min_length', '?')} characters"
    if kind == "too_long":
        return f"give at most {ctx.get('max_length', '?')} items"
    if kind == "too_short":
        return f"give at least {ctx.get('min_length', '?')} items"
    return _default_fix(face)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower().replace("-", "_")


def from_validation(errors: list[dict[str, Any]], face: Face, model: Any = None, where: str = "", *,
                    located: bool = False) -> BadInput:
    """The first pydantic error of an argument model as a :class:`BadInput` (field, problem, fix). ``located``:
    the errors are FastAPI's request errors, each location starting with where the field was."""
    e = errors[0] if errors else {"loc": (), "msg": "invalid", "type": "value_error"}
    field = where + (_loc(e.get("loc"), located) or ("arguments" if face == "mcp" else "body"))
    inner = (e.get("ctx") or {}).get("error")
    if isinstance(inner, BadInput):
        problem = inner.problem
    else:
        problem = pydantic_problem(e)
        if "; fix: " in problem:
            problem = problem.partition("; fix: ")[0]
        if e.get("type") == "extra_forbidden" and face == "mcp":
            problem = "is not an argument of this tool"
    return BadInput(field, face_text(problem, face, model), fix_of(e, field, face, model))


def text_of(exc: BadInput) -> str:
    """``<field>: <problem> (fix: <fix>)``: how MCP tool errors and HTTP ``detail`` word a refusal."""
    return f"{exc.field}: {exc.problem}" + (f" (fix: {exc.fix})" if exc.fix else "")
