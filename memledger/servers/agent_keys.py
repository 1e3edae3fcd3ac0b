"""API keys limited to one agent (``memledger keys create --user U --agent A``; docs/interfaces.md, "Keys limited to
an agent").

A request made with such a key writes as agent A and reads only what A wrote. :class:`AgentKeyMiddleware` applies
that before any route runs, so every route is covered by one rule rather than each route remembering it:

* a fact write (``memories``, ``facts/{key}``, its corrections and retractions, each command of ``/v1/commands``)
  naming another agent (``agent_id`` or ``actor``) is refused 403; one naming none is written as A;
* a read that takes a scope (profile, history, believed, true-at, search, context, export) naming another agent is
  refused 403; one naming none is narrowed to A;
* every other route of a user (diff, audit, sessions and messages, relations, unlinks, the change feed, erase, ...)
  cannot be narrowed to an agent, so they are refused 403 rather than shown whole; the /ui pages sign in by their
  own cookie and show such a key its agent's own memories' page alone (memledger/servers/ui.py);
* the MCP endpoint passes: each tool call is limited by the same rules (memledger/servers/agent_scope.py);
* the agent's own memories (``/v1/agents/A/...``, memledger/servers/agent_routes.py) are A's alone: there the key
  is checked against the path's agent, not narrowed (erasing them needs an admin key besides).

The user stays the boundary: the key's users are checked as for any key (memledger/servers/http.py).
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from .agent_scope import narrow_related
from .limits import replaying
from .mcp import PRINCIPAL_STATE

__all__ = ["AgentKeyMiddleware", "narrow_related"]

_USER = r"/v1/users/[^/]+"
#: reads that take ``agent_id`` as a query field
QUERY_READS = re.compile(rf"^{_USER}/(profile|history|history/[^/]+|believed|true-at|search|context|export)$")
#: reads that take it in their JSON body
BODY_READS = re.compile(rf"^{_USER}/(search|context)$")
#: fact writes: their JSON body names the agent (``agent_id``, or ``actor``: the same field)
BODY_WRITES = re.compile(rf"^{_USER}/(memories|facts/[^/]+|facts/[^/]+/corrections|facts/[^/]+/retractions)$")
#: what a key limited to an agent may not reach at all (the routes above excepted)
GUARDED = re.compile(r"^(/v1/users/|/v1/commands$|/ui/)")


def _refused(field: str, problem: str, fix: str) -> JSONResponse:
    body = {"type": "https://memledger.dev/problems/forbidden", "title": "Forbidden", "status": 403,
            "detail": f"{field}: {problem}", "field": field, "problem": problem, "fix": fix}
    return JSONResponse(body, status_code=403, media_type="application/problem+json")


def _other_agent(field: str, given: Any, agent: str) -> JSONResponse:
    """The refusal of a request naming an agent other than its key's."""
    return _refused(field, f"{given!r} is not the agent this API key is limited to ({agent!r})",
                    f"leave {field.rsplit('.', 1)[-1]} out (it is {agent!r}), or use a key for agent {given!r}")


def _scoped(item: Any, agent: str, where: str) -> JSONResponse | None:
    """Put ``agent`` into one JSON object of a request (a body, a command) that names no agent; a refusal when it
    names another."""
    if not isinstance(item, dict):
        return None  # not an object: the route's own model refuses it (422)
    for name in ("agent_id", "actor"):
        given = item.get(name)
        if given is not None and given != agent:
            return _other_agent(where + name, given, agent)
    if item.get("agent_id") is None and item.get("actor") is None:
        item["agent_id"] = agent
    return None


class AgentKeyMiddleware:
    """ASGI middleware, inside the key middleware (it reads the request's principal): applies the agent limit of
    the request's API key, as the module docstring says. Requests with any other key pass untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        principal = scope.get("state", {}).get(PRINCIPAL_STATE) if scope["type"] == "http" else None
        agent = getattr(principal, "agent", None)
        path, method = scope.get("path", ""), scope.get("method", "")
        if agent is None or not GUARDED.match(path):
            await self.app(scope, receive, send)
            return
        if method == "GET" and QUERY_READS.match(path):
            query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
            for name, value in query:
                if name == "agent_id" and value != agent:
                    await _other_agent("agent_id", value, agent)(scope, receive, send)
                    return
            if not any(name == "agent_id" for name, _ in query):
                query.append(("agent_id", agent))
            scope = {**scope, "query_string": urlencode(query).encode("latin-1")}
            await self.app(scope, receive, send)
            return
        body_route = method == "POST" and (BODY_READS.match(path) or BODY_WRITES.match(path) or
                                           path == "/v1/commands")
        if not body_route:
            await _refused("Authorization", f"this API key is limited to agent {agent!r}, and {method} {path} "
                           "cannot be limited to an agent", "use a key that is not limited to an agent for this "
                           "route")(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        raw = b"".join(chunks)
        try:
            doc = json.loads(raw) if raw else {}
        except ValueError:
            doc = None  # not JSON: the route refuses it as it would any malformed body
        if doc is not None:
            items = doc.get("commands") if path == "/v1/commands" and isinstance(doc, dict) else [doc]
            for i, item in enumerate(items if isinstance(items, list) else []):
                refusal = _scoped(item, agent, f"commands[{i}]." if path == "/v1/commands" else "")
                if refusal is not None:
                    await refusal(scope, receive, send)
                    return
            raw = json.dumps(doc).encode("utf-8")
        headers = [(k, v) for k, v in scope.get("headers", []) if k != b"content-length"]
        headers.append((b"content-length", str(len(raw)).encode("latin-1")))
        scope = {**scope, "headers": headers}
        await self.app(scope, replaying(raw, receive), send)
