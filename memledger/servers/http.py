"""The HTTP API (``memledger serve http``): FastAPI routes over the ledger's verbs, per-user API keys, RFC 9457
problem+json errors, a server-sent-events change feed, and the MCP server at ``/mcp`` behind the same keys.

Contracts (docs/interfaces.md):

- ``Authorization: Bearer <key>`` on every route but ``GET /v1/health``, ``/openapi.json``, ``/docs`` and ``/redoc``: no or an
  unknown/revoked/expired key -> 401; a key that does not hold the path's user (or a user a batch or ``also=``
  names) -> 403.
- JSON bodies are the CLI's ``--json`` (the same models, ``model_dump(mode="json")``).
- Writes return ``X-Ledger-Position`` (the log position to pass as ``after=`` to a later read, here or in another
  process); the ``Idempotency-Key`` header becomes the command's idempotency key.
- Errors: problem+json, each status listed on each route in /openapi.json (memledger/servers/openapi_doc.py).
  Bad input never gives a 5xx.
- Logs: one access line per request: method, route template (never the raw path or query string), status and ms,
  control characters escaped; no text, value, query or body is ever logged (search has a POST form).
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import Body, Depends, FastAPI, Header, Path, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from ledger.errors import BadInput, ConflictError, IdempotencyMismatch, MemledgerError, NotCaughtUp, SubjectErasedError
from ledger.schemas import check_key, check_user_id
from projections.db import request_scope

from ..scopes import AGENT_HELP, RUN_HELP
from .agent_keys import AgentKeyMiddleware, narrow_related
from .limits import MAX_BODY, BodyLimitMiddleware  # noqa: F401  (MAX_BODY: part of this module's surface)
from .keys import APIKeyStore, Principal
from .mcp import PRINCIPAL_STATE, build_mcp
from .openapi_doc import STATIC_PREFIX, install as install_openapi_doc
from .models import (
    _ALLOW,
    _PURPOSE,
    AssertBody,
    AuditArgs,
    BelievedArgs,
    CardBody,
    CommandsBody,
    ContextBody,
    CorrectBody,
    DiffArgs,
    HistoryArgs,
    HttpAssertBody,
    HttpContextBody,
    HttpCorrectBody,
    HttpSearchBody,
    HttpUnlinkBody,
    LogMessageBody,
    ObservedBody,
    ProfileArgs,
    RememberBody,
    RetractBody,
    SearchBody,
    SessionStartBody,
    SummaryBody,
    TrueAtArgs,
    UnlinkBody,
)

#: every body and query field of the routes: a CLI flag a ledger refusal names is renamed to one of these
#: (``--replace-action`` -> ``replace_actions``; memledger/servers/wording.py)
BODY_FIELDS = frozenset().union(*(m.model_fields for m in (
    AssertBody, AuditArgs, BelievedArgs, CardBody, CommandsBody, ContextBody, CorrectBody, DiffArgs, HttpSearchBody,
    LogMessageBody, ObservedBody, RememberBody, RetractBody, SessionStartBody, SummaryBody, TrueAtArgs, UnlinkBody)))
from .ops import Service
from .params import no_unknown_query, route_fields
from .ui import build_ui_router, is_ui_path
from .wording import for_face, from_validation, text_of

log = logging.getLogger("memledger.http")

OPEN_PATHS = {"/v1/health", "/openapi.json", "/docs", "/redoc"}
PROBLEM = "application/problem+json"


class Problem(Exception):
    """An HTTP error answered as problem+json."""

    def __init__(self, status: int, title: str, detail: str, headers: dict[str, str] | None = None,
                 **extra: Any) -> None:
        super().__init__(detail)
        self.status, self.title, self.detail, self.headers, self.extra = status, title, detail, headers or {}, extra


#: the fix of a problem that names none, by status
DEFAULT_FIX = {401: "send Authorization: Bearer <key>, with a key the server's operator issued",
               403: "use a key that holds it (the server's operator issues keys per user)",
               410: "nothing of an erased user can be read or written",
               422: "see /openapi.json for the expected fields and types",
               500: "report it with the server's log line", 501: "upgrade memledger"}


def problem_response(status: int, title: str, detail: str, headers: dict[str, str] | None = None,
                     **extra: Any) -> JSONResponse:
    """A problem+json response; every one carries ``field``, ``problem`` and ``fix`` (from ``detail`` when the
    caller gave none: ``"also: this API key does not hold user 'u9'"`` -> field ``also``)."""
    if "problem" not in extra:
        m = re.match(r"^([A-Za-z_][\w.\[\]-]*): (.+)$", detail, re.S)
        extra.setdefault("field", m.group(1) if m else None)
        extra["problem"] = m.group(2) if m else detail
    extra.setdefault("field", None)
    extra.setdefault("fix", DEFAULT_FIX.get(status, "see /openapi.json"))
    body = {"type": f"https://memledger.dev/problems/{title.lower().replace(' ', '-')}", "title": title,
            "status": status, "detail": detail, **extra}
    return JSONResponse(body, status_code=status, media_type=PROBLEM, headers=headers)


def _problem_of(exc: BaseException) -> JSONResponse | None:
    if isinstance(exc, Problem):
        return problem_response(exc.status, exc.title, exc.detail, exc.headers, **exc.extra)
    if isinstance(exc, IdempotencyMismatch):
        w = for_face(exc, "http", BODY_FIELDS)
        return problem_response(409, "Idempotency mismatch", text_of(w), field=w.field, problem=w.problem,
                                fix=w.fix)
    if isinstance(exc, BadInput):
        w = for_face(exc, "http", BODY_FIELDS)  # body fields and routes, not the CLI's flags and commands
        if "was erased" in exc.problem:
            return problem_response(410, "Subject erased", text_of(w), field=w.field, problem=w.problem,
                                    fix=w.fix)
        return problem_response(422, "Bad input", text_of(w), field=w.field, problem=w.problem, fix=w.fix)
    if isinstance(exc, ConflictError):
        return problem_response(409, "Conflict", str(exc), field=None, problem=str(exc),
                                fix="retry the request (an Idempotency-Key makes the retry safe)")
    if isinstance(exc, NotCaughtUp):
        return problem_response(503, "Not caught up", str(exc), headers={"Retry-After": "1"}, field="after",
                                problem=str(exc), fix="retry after a second")
    if isinstance(exc, SubjectErasedError):
        return problem_response(410, "Subject erased", str(exc), field="user_id", problem=str(exc),
                                fix="nothing of an erased user can be read or written")
    if isinstance(exc, NotImplementedError):
        return problem_response(501, "Not implemented", str(exc))
    from ..sharding.directory import UserMoving
    from ..sharding.sharded import UnknownShard, UserMoved

    if isinstance(exc, UnknownShard):  # this server's map file is older than the directory's ring
        return problem_response(503, "Shard map out of date", str(exc), headers={"Retry-After": "30"},
                                field=None, problem=str(exc), fix="restart the server with the current shard map")

    if isinstance(exc, UserMoving):  # a shard move of this user is switching: the write was not made
        return problem_response(503, "User moving", str(exc), headers={"Retry-After": "2"}, field="user_id",
                                problem=str(exc), fix="retry in a few seconds")
    if isinstance(exc, UserMoved):
        return problem_response(409, "User moved", str(exc), field="after", problem=str(exc),
                                fix="read again without after=")
    if isinstance(exc, MemledgerError):
        return problem_response(500, "Ledger error", f"{type(exc).__name__}: {exc}")
    return None


def log_safe(text: Any) -> str:
    """``text`` with every control character (newline, NUL, escape, ...) and backslash written as an escape
    (``\\n``, ``\\x00``): a logged field can never start a forged line or carry raw control bytes."""
    out = []
    for ch in str(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch.isprintable():  # False for every control, format and separator character but the space
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    return "".join(out)


def route_template(routes: Any, scope: Scope) -> str:
    """The template of the route ``scope`` matches (``/v1/users/{user_id}/facts/{key}``), never the raw path, whose
    segments carry user ids and fact keys; ``-`` when no route matches (a 404)."""
    from starlette.routing import Match

    partial = None
    for route in (routes() if callable(routes) else routes) or ():
        sub = getattr(route, "original_router", None)
        if sub is not None and not getattr(getattr(route, "include_context", None), "prefix", ""):
            # FastAPI keeps an included router (the /ui pages) as one entry that names no path: look inside it
            inner = route_template(sub.routes, scope)
            if inner != "-":
                return inner
            continue
        try:
            match, _ = route.matches(scope)
        except Exception:  # noqa: BLE001, S112 - a route that cannot match this scope
            continue
        if match is Match.FULL:
            return str(getattr(route, "path", "-"))
        if match is Match.PARTIAL and partial is None:
            partial = str(getattr(route, "path", "-"))
    return partial or "-"


class KeyMiddleware:
    """ASGI middleware: authenticate ``Authorization: Bearer`` (401 problem+json otherwise), put the key's
    :class:`Principal` in the request state (``scope["state"]``, where routes and MCP tools read it), and write
    one access-log line: method, route template (never the raw path: it holds user ids and keys; never the query
    string), status, milliseconds, every field with its control characters escaped (:func:`log_safe`)."""

    def __init__(self, app: ASGIApp, keys: APIKeyStore, service: Service, routes: Any = None) -> None:
        self.app, self.keys, self.service, self.routes = app, keys, service, routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        path, status, principal = scope.get("path", ""), {"code": 0}, None

        async def send_logged(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            # the /ui pages sign in by their own cookie; the docs' assets are public
            if path not in OPEN_PATHS and not path.startswith(STATIC_PREFIX + "/") and not is_ui_path(path):
                principal = await self._principal(scope)
                if principal is None:
                    resp = problem_response(401, "Unauthorized", "send a valid API key: Authorization: Bearer <key>",
                                            headers={"WWW-Authenticate": 'Bearer realm="memledger"'},
                                            field="Authorization", problem="no API key, or an unknown, revoked or "
                                            "expired one", fix="send Authorization: Bearer <key>, with a key the "
                                            "server's operator issued")
                    await resp(scope, receive, send_logged)
                    return
                scope.setdefault("state", {})[PRINCIPAL_STATE] = principal
            # the database holds a keyed request to the key's users too (row-level security on PostgreSQL)
            with request_scope(principal.scope if principal is not None else None):
                await self.app(scope, receive, send_logged)
        finally:
            log.info("%s %s %s %.1fms", log_safe(scope.get("method")), log_safe(route_template(self.routes, scope)),
                     status["code"], (time.perf_counter() - start) * 1000)

    async def _principal(self, scope: Scope) -> Principal | None:
        header = ""
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                header = value.decode("latin-1")
                break
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return await self.service.call(self.keys.authenticate, token.strip(), inline=True)


def principal(request: Request) -> Principal:
    p = request.scope.get("state", {}).get(PRINCIPAL_STATE)
    if p is None:  # the middleware lets no request through without one; a guard, not a path
        raise Problem(401, "Unauthorized", "Authorization: no API key on this request")
    return p


def create_app(service: Service, *, mcp: bool = True, allow_destructive: bool = False,
               host: str = "127.0.0.1") -> FastAPI:
    """The FastAPI app on ``service``'s ledger (the MCP server mounted at ``/mcp`` unless ``mcp=False``)."""
    keys = APIKeyStore(service.ml)
    mcp_server = build_mcp(service, allow_destructive=allow_destructive, require_key=True) if mcp else None
    mcp_routes: list[Any] = []
    if mcp_server is not None:
        # the MCP endpoint as a route of this app (not a sub-mount: no /mcp -> /mcp/ redirect), behind KeyMiddleware
        # json_response: a tool answers with one JSON body instead of an SSE stream per POST (less work per call;
        # the tools send no progress or server-to-client requests)
        mcp_routes = list(mcp_server.streamable_http_app(streamable_http_path="/mcp", host=host,
                                                         json_response=True).routes)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if mcp_server is None:
            yield
            return
        async with mcp_server.session_manager.run():
            yield

    # documents the bearer scheme in /openapi.json (the Authorize button of /docs); KeyMiddleware enforces it
    bearer = Security(HTTPBearer(auto_error=False, description="An API key: memledger keys create --user U"))
    app = FastAPI(title="memledger", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None,
                  dependencies=[bearer, Depends(no_unknown_query)],
                  description="An event-sourced memory ledger for LLM agents. Every route but /v1/health needs "
                              "Authorization: Bearer <key> (memledger keys create). Errors are RFC 9457 "
                              "problem+json. See docs/interfaces.md.")
    app.router.routes.extend(mcp_routes)
    app.include_router(build_ui_router(service, keys))  # the browser pages (docs/timeline.md)
    app.add_middleware(AgentKeyMiddleware)  # inside the key middleware: it reads the request's key
    app.add_middleware(KeyMiddleware, keys=keys, service=service, routes=lambda: app.router.routes)
    app.add_middleware(BodyLimitMiddleware)  # added last: runs first, before a key is even looked up

    @app.exception_handler(Exception)
    async def on_error(request: Request, exc: Exception) -> Response:
        resp = _problem_of(exc)
        if resp is not None:
            return resp
        log.error("unexpected %s on %s %s", log_safe(type(exc).__name__), log_safe(request.method),
                  log_safe(route_template(app.router.routes, request.scope)))
        return problem_response(500, "Internal error", f"{type(exc).__name__}")

    for cls in (Problem, BadInput, ConflictError, NotCaughtUp, SubjectErasedError, MemledgerError,
                NotImplementedError):
        app.add_exception_handler(cls, on_error)

    @app.exception_handler(RequestValidationError)
    async def on_validation(request: Request, exc: RequestValidationError) -> Response:
        errors = list(exc.errors())
        first = errors[0] if errors else {"loc": ("body",), "msg": "invalid", "type": "value_error"}
        kind, loc = first.get("type", ""), tuple(first.get("loc", ()))
        ctype = request.headers.get("content-type", "")
        if kind == "json_invalid":  # loc is ("body", <byte offset>): the field is the body
            reason = str((first.get("ctx") or {}).get("error", "")) or "invalid"
            w = BadInput("body", f"is not valid JSON ({reason} at character {loc[-1] if loc else '?'})",
                         "send one JSON object (check quotes, commas and brackets)")
        elif loc == ("body",) and kind in ("dict_type", "model_attributes_type", "model_type") and \
                "json" not in ctype.lower():
            shown = (ctype.split(";")[0].strip() or "no Content-Type")
            w = BadInput("Content-Type", f"the body was sent as {shown}, so it was not read as JSON",
                         "send the JSON body with Content-Type: application/json")
        else:
            # an unknown field is told with this route's fields, never every route's
            w = from_validation(errors, "http", route_fields(request) or BODY_FIELDS, located=True)
        details = [{"field": ".".join(str(p) for p in e.get("loc", ())), "problem": str(e.get("msg"))}
                   for e in errors]
        return problem_response(422, "Bad input", text_of(w), field=w.field, problem=w.problem, fix=w.fix,
                                errors=details)

    @app.exception_handler(StarletteHTTPException)
    async def on_http(request: Request, exc: StarletteHTTPException) -> Response:
        """Routing and body-parsing errors (404, 405, an unreadable body) as problem+json with field/problem/fix."""
        method = request.method
        raw = request.scope.get("raw_path", b"").decode("latin-1")
        if exc.status_code == 404 and raw.startswith("/v1/users/") and "%2f" in raw.lower():
            from .agent_routes import agent_route_of

            own = agent_route_of(raw)
            if own is not None:  # a receipt's ~agent/A sent back as a user: its memories are under /v1/agents/A
                problem = (f"{own[0]!r} holds the own memories of agent {own[1]!r}, which are served under "
                           "/v1/agents/, not /v1/users/")
                return problem_response(404, "Not found", f"user_id: {problem}", field="user_id", problem=problem,
                                        fix=f"use {own[2]} (the routes under /v1/agents/{own[3]} serve them; "
                                            "see /openapi.json)")
            # a user id holding "/" (sent as %2F) cannot be told from the path's own segments
            return problem_response(404, "Not found", "user_id: holds '/', which no route of this API can carry",
                                    field="user_id", problem="holds '/', which no route of this API can carry",
                                    fix="use user ids without '/' over HTTP (the CLI, Python and MCP take them)")
        if exc.status_code == 404:
            return problem_response(404, "Not found", "path: no route has this path (fix: see /openapi.json)",
                                    field="path", problem="no route has this path",
                                    fix="see /openapi.json (or /docs) for the routes")
        if exc.status_code == 405:
            allow = (exc.headers or {}).get("Allow") or (exc.headers or {}).get("allow") or ""
            fix = f"use {allow.replace(', ', ' or ')}" if allow else "see /openapi.json for the routes"
            return problem_response(405, "Method not allowed", f"method: {log_safe(method)} is not allowed on "
                                    f"this route (fix: {fix})", headers=dict(exc.headers or {}), field="method",
                                    problem=f"{log_safe(method)} is not allowed on this route", fix=fix)
        if exc.status_code == 400:  # FastAPI could not read the body: not UTF-8, or JSON nested too deeply
            cause = exc.__cause__ or exc.__context__
            if isinstance(cause, RecursionError):
                problem = "is JSON nested too deeply to be read"
                fix = "flatten it (a value nested a few levels deep is plenty)"
            elif isinstance(cause, UnicodeDecodeError):
                problem = "is not UTF-8 text"
                fix = "send the JSON body encoded as UTF-8"
            else:
                problem, fix = "could not be read as JSON", "send one UTF-8 JSON object"
            return problem_response(422, "Bad input", f"body: {problem} (fix: {fix})", field="body",
                                    problem=problem, fix=fix)
        detail = str(exc.detail)
        return problem_response(exc.status_code, "Error", detail, headers=dict(exc.headers or {}), field=None,
                                problem=detail, fix="see /openapi.json")

    # -- dependencies ----------------------------------------------------------------------------------------------
    async def user_of(request: Request, user_id: str = Path(description="Whose memory.")) -> str:
        p = principal(request)
        try:
            user_id = check_user_id(user_id)
        except BadInput as exc:
            raise Problem(422, "Bad input", str(exc), field=exc.field, problem=exc.problem, fix=exc.fix) from None
        if not p.allows(user_id):
            raise Problem(403, "Forbidden", f"this API key does not hold user {user_id!r}", field="user_id",
                          problem=f"this API key does not hold user {user_id!r}",
                          fix="use a key created with --user for that user")
        if await service.call(service.erased, user_id, inline=True):
            raise Problem(410, "Subject erased", f"user {user_id!r} was erased; nothing of them can be read or "
                          "written", field="user_id", problem=f"user {user_id!r} was erased",
                          fix="nothing of an erased user can be read or written")
        return user_id

    async def key_of(key: str = Path(description="The fact's dotted key (reads take any key as recorded; a "
                                                 "write of a new key refuses capitals).")) -> str:
        return check_key(key)

    def granted(request: Request, model: type, **fields: Any) -> Any:
        """The request's grant (``allow_sensitive``, ``purpose``) validated with ``model`` (422 naming the field),
        each label held by the key (403 otherwise)."""
        g = _validated(model, **fields)
        labels_ok(principal(request), g.allow_sensitive)
        return g

    def labels_ok(p: Principal, labels: list[str] | None) -> None:
        if labels:
            from ..sensitivity import check_allow_sensitive

            missing = sorted(check_allow_sensitive(labels) - p.allow_sensitive)  # a malformed label: 422
            if missing:
                fix = f"use an API key granted the label {missing[0]} (the operator grants it when creating the key)"
                raise Problem(403, "Forbidden", f"this API key may not let in {', '.join(missing)} (fix: {fix})",
                              field="allow_sensitive", problem=f"this API key may not let in {', '.join(missing)}",
                              fix=fix)

    def written(data: Any, position: int, status: int = 200) -> JSONResponse:
        headers = {"X-Ledger-Position": str(position)}
        shard = data.get("shard") if isinstance(data, dict) else None
        if isinstance(shard, str):  # on a shard map positions are per shard: say whose log this one is on
            headers["X-Ledger-Shard"] = shard
        return JSONResponse(data, status_code=status, headers=headers)

    def idem(body: Any, header: str | None) -> Any:
        if not header or not hasattr(body, "idempotency_key"):
            return body
        given = getattr(body, "idempotency_key", None)
        if given is None:
            return body.model_copy(update={"idempotency_key": header})
        if given != header:  # which one names the retry? refuse rather than pick one silently
            raise BadInput("idempotency_key", f"the body's {given!r} differs from the Idempotency-Key header's "
                           f"{header!r}", "send one of them (or the same key in both)")
        return body

    IdemHeader = Header(None, alias="Idempotency-Key", description="A retried request with the same key records "
                        "nothing new and returns the first receipt.")
    After = Query(None, ge=0, description="A log position (X-Ledger-Position of a write): answer only once "
                  "the projections include it.")
    AllowSensitive = Query(None, description=_ALLOW)
    Purpose = Query(None, description=_PURPOSE)
    Agent, Run = Query(None, description=AGENT_HELP), Query(None, description=RUN_HELP)  # memledger/scopes.py

    # -- health ------------------------------------------------------------------------------------------------
    @app.get("/v1/health", tags=["meta"])
    async def health() -> dict[str, Any]:
        return await anyio.to_thread.run_sync(service.health)  # a thread: never blocks the loop on the store

    # -- writes ------------------------------------------------------------------------------------------------
    @app.post("/v1/users/{user_id}/memories", tags=["writes"], status_code=201)
    def remember(request: Request, body: RememberBody, user_id: str = Depends(user_of),
                 idempotency_key: str | None = IdemHeader) -> Response:
        r = narrow_related(service.ml, service.remember(user_id, idem(body, idempotency_key)),
                           getattr(principal(request), "agent", None))  # a key limited to an agent sees its own
        return written(r.model_dump(mode="json"), _position(r), 201)

    @app.post("/v1/users/{user_id}/facts/{key}", tags=["writes"], status_code=201)
    def assert_fact(body: HttpAssertBody, user_id: str = Depends(user_of), key: str = Depends(key_of),
                    idempotency_key: str | None = IdemHeader) -> Response:
        r = service.assert_fact(user_id, key, idem(body, idempotency_key))
        return written(r.model_dump(mode="json"), r.position, 201)

    @app.post("/v1/users/{user_id}/facts/{key}/corrections", tags=["writes"], status_code=201)
    def correct(body: HttpCorrectBody, user_id: str = Depends(user_of), key: str = Depends(key_of),
                idempotency_key: str | None = IdemHeader) -> Response:
        r = service.correct(user_id, key, idem(body, idempotency_key))
        return written(r.model_dump(mode="json"), r.position, 201)

    @app.post("/v1/users/{user_id}/facts/{key}/retractions", tags=["writes"], status_code=201)
    def retract(user_id: str = Depends(user_of), key: str = Depends(key_of),
                body: RetractBody = Body(default_factory=RetractBody),
                idempotency_key: str | None = IdemHeader) -> Response:
        r = service.retract(user_id, key, idem(body, idempotency_key))
        return written(r.model_dump(mode="json"), r.position, 201)

    @app.post("/v1/users/{user_id}/facts/{key}/unlinks", tags=["writes"], status_code=201,
              description="Undo a wrong `remember` decision: `version` of `key` does not belong there (recorded "
                          "as events: the replaced value comes back, the statement moves to a key of its own, or a "
                          "conflict is settled). Returns the new decision (a remember receipt).")
    def unlink(body: HttpUnlinkBody, user_id: str = Depends(user_of), key: str = Depends(key_of)) -> Response:
        r = service.unlink(user_id, key, body.version)
        return written(r.model_dump(mode="json"), _position(r), 201)

    # people, places and organisations (docs/relations.md): their routes are in relation_routes.py
    from .relation_routes import add_relation_routes

    add_relation_routes(app, service, user_of=user_of, written=written, labels_ok=labels_ok, principal=principal,
                        query=_query, problem=Problem)

    @app.post("/v1/commands", tags=["writes"], status_code=201)
    def commands(request: Request, body: CommandsBody, idempotency_key: str | None = IdemHeader) -> Response:
        p = principal(request)
        if not body.commands:
            raise BadInput("commands", "is empty", "send at least one command ({op, user_id, key, value, ...})")
        cmds = []
        for i, c in enumerate(body.commands):
            u = c.get("user_id")
            try:
                u = check_user_id(u, f"commands[{i}].user_id")
            except BadInput as exc:
                raise Problem(422, "Bad input", str(exc), field=exc.field, problem=exc.problem, fix=exc.fix) from None
            if not p.allows(u):
                raise Problem(403, "Forbidden", f"commands[{i}].user_id: this API key does not hold user {u!r}")
            if service.erased(u):
                raise Problem(410, "Subject erased", f"commands[{i}].user_id: user {u!r} was erased")
            if idempotency_key and "idempotency_key" not in c:
                c = {**c, "idempotency_key": f"{idempotency_key}:{i}"}
            cmds.append(c)
        try:
            receipts = service.record(cmds)
        except BadInput as exc:
            if exc.field.endswith((".key", ".value")) and exc.problem == "is missing":
                # a free-text statement ({user_id, text}) sent as a fact command: say where it goes
                raise BadInput(exc.field, exc.problem, "each command names a fact: {op: assert|correct|retract, "
                               "user_id, key, value, ...}; a free-text statement goes to POST "
                               "/v1/users/{user_id}/memories") from None
            raise
        return written({"receipts": [r.model_dump(mode="json") for r in receipts]},
                       max((r.position for r in receipts), default=0), 201)

    # -- reads -------------------------------------------------------------------------------------------------
    # Every read below that shows fact values takes allow_sensitive/purpose: a labelled fact is shown only when
    # asked for and the key holds its label (labels_ok: 403 otherwise); else it is withheld (memledger/sensitivity.py).
    @app.get("/v1/users/{user_id}/profile", tags=["reads"])
    async def profile(request: Request, user_id: str = Depends(user_of), after: int | None = After,
                      allow_sensitive: list[str] | None = AllowSensitive, purpose: str | None = Purpose,
                      agent_id: str | None = Agent, run_id: str | None = Run) -> Any:
        g = granted(request, ProfileArgs, allow_sensitive=allow_sensitive, purpose=purpose, agent_id=agent_id,
                    run_id=run_id)
        return (await service.call(service.profile, user_id, after, g.allow_sensitive, g.purpose, g.agent_id,
                                   g.run_id, inline=True)).model_dump(mode="json")

    @app.get("/v1/users/{user_id}/history", tags=["reads"])
    async def history(request: Request, user_id: str = Depends(user_of),
                      key: str | None = Query(None, description="One fact's key."), after: int | None = After,
                      allow_sensitive: list[str] | None = AllowSensitive, purpose: str | None = Purpose,
                      agent_id: str | None = Agent, run_id: str | None = Run) -> Any:
        g = granted(request, HistoryArgs, allow_sensitive=allow_sensitive, purpose=purpose, agent_id=agent_id,
                    run_id=run_id)
        rows = (await service.call(service.history, user_id, key, after, g.allow_sensitive, g.purpose, g.agent_id,
                                   g.run_id, inline=True)).rows
        return [r.model_dump(mode="json") for r in rows]

    @app.get("/v1/users/{user_id}/history/{key}", tags=["reads"])
    async def history_key(request: Request, user_id: str = Depends(user_of), key: str = Depends(key_of),
                          after: int | None = After, allow_sensitive: list[str] | None = AllowSensitive,
                          purpose: str | None = Purpose, agent_id: str | None = Agent, run_id: str | None = Run) -> Any:
        g = granted(request, HistoryArgs, allow_sensitive=allow_sensitive, purpose=purpose, agent_id=agent_id,
                    run_id=run_id)
        rows = (await service.call(service.history, user_id, key, after, g.allow_sensitive, g.purpose, g.agent_id,
                                   g.run_id, inline=True)).rows
        return [r.model_dump(mode="json") for r in rows]

    @app.get("/v1/users/{user_id}/believed", tags=["time travel"])
    async def believed(request: Request, user_id: str = Depends(user_of),
                       q: BelievedArgs = Depends(_query(BelievedArgs))) -> Any:
        labels_ok(principal(request), q.allow_sensitive)
        return (await service.call(service.believed, user_id, q, inline=True)).model_dump(mode="json")

    @app.get("/v1/users/{user_id}/true-at", tags=["time travel"])
    async def true_at(request: Request, user_id: str = Depends(user_of),
                      q: TrueAtArgs = Depends(_query(TrueAtArgs))) -> Any:
        labels_ok(principal(request), q.allow_sensitive)
        return (await service.call(service.true_at, user_id, q, inline=True)).model_dump(mode="json")

    @app.get("/v1/users/{user_id}/diff", tags=["time travel"])
    async def diff(request: Request, user_id: str = Depends(user_of),
                   from_: str = Query(alias="from", description="Earlier as-of instant (ISO 8601 with offset)."),
                   to: str = Query(description="Later as-of instant (ISO 8601 with offset)."),
                   valid_at: str | None = Query(None), axis: str = Query("system"), after: int | None = After,
                   allow_sensitive: list[str] | None = AllowSensitive, purpose: str | None = Purpose,
                   agent_id: str | None = Agent, run_id: str | None = Run) -> Any:
        a = _validated(DiffArgs, from_as_of=from_, to_as_of=to, valid_at=valid_at, axis=axis, after=after,
                       allow_sensitive=allow_sensitive, purpose=purpose, agent_id=agent_id, run_id=run_id)
        labels_ok(principal(request), a.allow_sensitive)
        return (await service.call(service.diff, user_id, a, inline=True)).model_dump(mode="json")

    @app.get("/v1/users/{user_id}/audit", tags=["time travel"])
    async def audit(request: Request, user_id: str = Depends(user_of),
                    q: AuditArgs = Depends(_query(AuditArgs))) -> Any:
        labels_ok(principal(request), q.allow_sensitive)
        return (await service.call(service.audit, user_id, q, inline=True)).model_dump(mode="json")

    @app.post("/v1/users/{user_id}/search", tags=["reads"])
    async def search_post(request: Request, body: HttpSearchBody, user_id: str = Depends(user_of)) -> Any:
        return await service.call(_search, request, user_id, body)  # CPU-heavy: a worker thread, never the loop

    @app.get("/v1/users/{user_id}/search", tags=["reads"],
             description="The query lands in URLs (proxies, browser history): prefer POST, which also takes "
                         "half_lives.")
    async def search_get(request: Request, user_id: str = Depends(user_of), query: str = Query(),
                         k: int = Query(10), as_of: str | None = Query(None), source: str | None = Query(None),
                         role: str | None = Query(None), also: list[str] | None = Query(None),
                         allow_sensitive: list[str] | None = Query(None), purpose: str | None = Query(None),
                         min_score: float | None = Query(None), role_filter: str | None = Query(None),
                         exclude_source: list[str] | None = Query(None), within: str = Query("facts"),
                         min_confidence: float | None = Query(None), role_bonus: float | None = Query(None),
                         trace_id: str | None = Query(None), after: int | None = After, expand: int = Query(0),
                         linked: bool = Query(True), agent_id: str | None = Agent, run_id: str | None = Run) -> Any:
        body = _validated(HttpSearchBody, query=query, k=k, as_of=as_of, source=source, role=role, also=also,
                          allow_sensitive=allow_sensitive, purpose=purpose, min_score=min_score, linked=linked,
                          role_filter=role_filter, exclude_source=exclude_source, within=within, expand=expand,
                          min_confidence=min_confidence, role_bonus=role_bonus, trace_id=trace_id, after=after,
                          agent_id=agent_id, run_id=run_id)
        return await service.call(_search, request, user_id, body)  # CPU-heavy: a worker thread, never the loop

    def _search(request: Request, user_id: str, body: HttpSearchBody) -> Any:
        p = principal(request)
        body = service.linked_also(user_id, body, p.allows)  # type: ignore[assignment]
        labels_ok(p, body.allow_sensitive)
        for other in body.also or []:  # the ledger merges the users' hits; the key must hold each of them
            other = check_user_id(other, "also")
            if not p.allows(other):
                raise Problem(403, "Forbidden", f"also: this API key does not hold user {other!r}")
            if service.erased(other):
                raise Problem(410, "Subject erased", f"also: user {other!r} was erased")
        return [h.model_dump(mode="json") for h in service.recall(user_id, body).hits]

    @app.get("/v1/users/{user_id}/context", tags=["reads"])
    def context_get(request: Request, user_id: str = Depends(user_of), session_id: str | None = Query(None),
                    query: str | None = Query(None), now: str | None = Query(None), budget: int = Query(2000),
                    allow_sensitive: list[str] | None = Query(None), purpose: str | None = Query(None),
                    trace_id: str | None = Query(None), recent_messages: int = Query(20), memories: int = Query(30),
                    as_of: str | None = Query(None), axis: str = Query("system"),
                    min_confidence: float | None = Query(None), after: int | None = After,
                    agent_id: str | None = Agent, run_id: str | None = Run) -> Any:
        body = _validated(ContextBody, session_id=session_id, query=query, now=now, budget=budget,
                          allow_sensitive=allow_sensitive, purpose=purpose, trace_id=trace_id,
                          recent_messages=recent_messages, memories=memories, as_of=as_of, axis=axis,
                          min_confidence=min_confidence, after=after, agent_id=agent_id, run_id=run_id)
        labels_ok(principal(request), body.allow_sensitive)
        return service.context(user_id, body).model_dump(mode="json")

    @app.post("/v1/users/{user_id}/context", tags=["reads"])
    def context_post(request: Request, body: HttpContextBody, user_id: str = Depends(user_of)) -> Any:
        labels_ok(principal(request), body.allow_sensitive)
        return service.context(user_id, body).model_dump(mode="json")

    @app.get("/v1/users/{user_id}/resume", tags=["sessions"])
    def resume(user_id: str = Depends(user_of), now: str | None = Query(None),
               expiry_hours: float = Query(48.0, gt=0)) -> Any:
        return service.resume(user_id, now, expiry_hours).model_dump(mode="json")  # a bad `now` is refused as now

    @app.get("/v1/users/{user_id}/export", tags=["privacy"],
             description="Everything held about the user. Complete for an admin key (the user's right of access); "
                         "for any other key gated as every read (allow_sensitive). Each labelled fact it shows is "
                         "recorded as a disclosure. agent_id / run_id: only what was written in that scope.")
    def export(request: Request, user_id: str = Depends(user_of), allow_sensitive: list[str] | None = AllowSensitive,
               purpose: str | None = Purpose, agent_id: str | None = Agent, run_id: str | None = Run) -> Any:
        from ..sensitivity import check_allow_sensitive, check_purpose

        p = principal(request)
        check_purpose(purpose)  # refused (422) whoever asks: an admin's export records its purpose as well
        check_allow_sensitive(allow_sensitive)
        g = granted(request, ProfileArgs, allow_sensitive=None if p.admin else allow_sensitive, purpose=purpose,
                    agent_id=agent_id, run_id=run_id)
        return service.export(user_id, complete=p.admin, allow_sensitive=g.allow_sensitive,
                              purpose=g.purpose or (f"export by admin key {p.key_id}" if p.admin else None),
                              agent_id=g.agent_id, run_id=g.run_id).model_dump(mode="json")

    @app.delete("/v1/users/{user_id}", tags=["privacy"])
    def erase(request: Request, user_id: str = Path(), confirm: str | None = Header(None, alias="Confirm-Erase")
              ) -> Response:
        p = principal(request)
        user_id = check_user_id(user_id)
        if not p.allows(user_id):
            raise Problem(403, "Forbidden", f"user_id: this API key does not hold user {user_id!r}")
        if not p.admin:
            raise Problem(403, "Forbidden", "erasing needs an admin key (memledger keys create --admin)",
                          field="Authorization", problem="erasing needs an admin key",
                          fix="use a key created with memledger keys create --admin")
        if confirm != user_id:
            raise Problem(422, "Bad input", "Confirm-Erase: must repeat the user id (erasing is irreversible)",
                          field="Confirm-Erase", problem="missing or not the user id", fix=f"send Confirm-Erase: "
                          f"{user_id}")
        r = service.erase(user_id)
        return written(r.model_dump(mode="json"), r.position or 0)

    # -- sessions ----------------------------------------------------------------------------------------------
    @app.get("/v1/users/{user_id}/sessions", tags=["sessions"])
    def sessions(user_id: str = Depends(user_of)) -> Any:
        return service.sessions(user_id)

    @app.post("/v1/users/{user_id}/sessions/{session_id}", tags=["sessions"], status_code=201)
    def session_start(session_id: str, user_id: str = Depends(user_of),
                      body: SessionStartBody = Body(default_factory=SessionStartBody)) -> Response:
        r = service.session_start(user_id, session_id, body)
        return written(r.model_dump(mode="json"), r.position, 201)

    @app.get("/v1/users/{user_id}/sessions/{session_id}/messages", tags=["sessions"])
    def messages(session_id: str, user_id: str = Depends(user_of),
                 limit: int | None = Query(None, ge=1, le=100_000, description="Only the last N messages.")) -> Any:
        rows = service.messages(user_id, session_id)
        return rows[-limit:] if limit is not None else rows

    @app.post("/v1/users/{user_id}/sessions/{session_id}/messages", tags=["sessions"], status_code=201)
    def log_message(session_id: str, body: LogMessageBody, user_id: str = Depends(user_of)) -> Response:
        r = service.log_message(user_id, session_id, body)
        return written(r.model_dump(mode="json"), r.position, 201)

    @app.post("/v1/users/{user_id}/sessions/{session_id}/card", tags=["sessions"], status_code=201)
    def update_card(session_id: str, body: CardBody, user_id: str = Depends(user_of)) -> Response:
        r = service.update_card(user_id, session_id, body)
        return written(r.model_dump(mode="json"), r.position, 201)

    @app.post("/v1/users/{user_id}/sessions/{session_id}/summaries", tags=["sessions"], status_code=201)
    def summarize(session_id: str, body: SummaryBody, user_id: str = Depends(user_of)) -> Response:
        r = service.summarize(user_id, session_id, body)
        return written(r.model_dump(mode="json"), r.position, 201)

    @app.post("/v1/users/{user_id}/sessions/{session_id}/end", tags=["sessions"], status_code=201)
    def end_session(session_id: str, user_id: str = Depends(user_of),
                    body: ObservedBody = Body(default_factory=ObservedBody)) -> Response:
        r = service.end_session(user_id, session_id, body.observed_at, body.close_memories)
        return written(r.model_dump(mode="json"), max([r.position, *(c.position for c in r.closed_memories or ())]),
                       201)

    # -- change feed (feed_routes.py) --------------------------------------------------------------------------
    from .feed_routes import add_feed_routes

    add_feed_routes(app, service, user_of=user_of, problem=Problem)
    from .agent_routes import add_agent_routes  # an agent's own memories, written without a user

    add_agent_routes(app, service, written=written, position=_position, granted=granted, labels_ok=labels_ok,
                     principal=principal, problem=Problem, key_of=key_of, idem=idem, query=_query,
                     validated=_validated)

    install_openapi_doc(app, OPEN_PATHS)
    return app


def _position(receipt: Any) -> int:
    pos = getattr(receipt, "position", None)
    if isinstance(pos, int):
        return pos
    receipts = getattr(receipt, "receipts", None) or []
    return max((getattr(r, "position", 0) for r in receipts), default=0)


def _validated(model: type, **fields: Any) -> Any:
    """Validate query parameters with a body model: errors become the same 422 problem as a body's."""
    from pydantic import ValidationError

    try:
        return model(**{k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        # located as FastAPI locates a query parameter's error, so a field named "query" keeps its name
        raise RequestValidationError([{**e, "loc": ("query", *e.get("loc", ()))} for e in exc.errors()]) from None


def _query(model: type, omit: tuple[str, ...] = ()) -> Any:
    """A dependency reading ``model``'s fields (without ``user_id``, nor those in ``omit``: a path's) from the query
    string."""
    import inspect

    names = [n for n in model.model_fields if n != "user_id" and n not in omit]
    lists = {n for n in names if "list[" in str(model.model_fields[n].annotation)}  # repeatable: ?a=x&a=y

    def dep(request: Request) -> Any:
        qp = request.query_params
        data: dict[str, Any] = {}
        for n in names:
            if n in qp:
                data[n] = qp.getlist(n) if n in lists else qp[n]
        return _validated(model, **data)

    params = [inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request)]
    for n in names:
        f = model.model_fields[n]
        annotation: Any = list[str] | None if n in lists else str | None if not f.is_required() else str
        params.append(inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY,
                                        default=Query(None if not f.is_required() else ..., description=f.description),
                                        annotation=annotation))

    async def wrapper(request: Request, **kwargs: Any) -> Any:  # async: validation only, no thread hop
        return dep(request)

    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return wrapper
