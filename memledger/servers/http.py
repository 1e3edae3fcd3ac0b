"""The HTTP API (``memledger serve http``): FastAPI routes over the ledger's verbs, per-user API keys, RFC 9457
problem+json errors, a server-sent-events change feed, and the MCP server at ``/mcp`` behind the same keys.

Contracts (docs/interfaces.md):

- ``Authorization: Bearer <key>`` on every route but ``GET /v1/health``, ``/openapi.json`` and ``/docs``: no or an
  unknown/revoked/expired key -> 401; a key that does not hold the path's user (or a user a batch or ``also=``
  names) -> 403.
- JSON bodies are the CLI's ``--json`` (the same models, ``model_dump(mode="json")``).
- Writes return ``X-Ledger-Position`` (the log position to pass as ``after=`` to a later read, here or in another
  process); the ``Idempotency-Key`` header becomes the command's idempotency key.
- Errors: BadInput 422 (``field``, ``problem``, ``fix``), idempotency mismatch and concurrency conflicts 409, not
  caught up 503 with ``Retry-After``, an erased user 410, a missing key 401, a foreign user 403. Bad input never
  gives a 5xx.
- Logs: one access line per request with method, path (no query string), status and milliseconds; no memory text,
  value or query is ever logged (bodies are never logged; search has a POST form so queries stay out of URLs).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import Body, Depends, FastAPI, Header, Path, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.security import HTTPBearer
from starlette.types import ASGIApp, Receive, Scope, Send

from ledger.errors import BadInput, ConflictError, IdempotencyMismatch, MemledgerError, NotCaughtUp, SubjectErasedError
from ledger.schemas import check_key, check_user_id

from .keys import KeyStore, Principal
from .mcp import PRINCIPAL_STATE, build_mcp
from .models import (AssertBody, AuditArgs, BelievedArgs, CardBody, CommandsBody, ContextBody, CorrectBody, DiffArgs,
                     HttpSearchBody, LogMessageBody, ObservedBody, RememberBody, RetractBody, SearchBody,
                     SessionStartBody, SummaryBody, TrueAtArgs)
from .ops import Service

log = logging.getLogger("memledger.http")

OPEN_PATHS = {"/v1/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}
PROBLEM = "application/problem+json"


class Problem(Exception):
    """An HTTP error answered as problem+json."""

    def __init__(self, status: int, title: str, detail: str, headers: dict[str, str] | None = None,
                 **extra: Any) -> None:
        super().__init__(detail)
        self.status, self.title, self.detail, self.headers, self.extra = status, title, detail, headers or {}, extra


def problem_response(status: int, title: str, detail: str, headers: dict[str, str] | None = None,
                     **extra: Any) -> JSONResponse:
    body = {"type": f"https://memledger.dev/problems/{title.lower().replace(' ', '-')}", "title": title,
            "status": status, "detail": detail, **extra}
    return JSONResponse(body, status_code=status, media_type=PROBLEM, headers=headers)


def _problem_of(exc: BaseException) -> JSONResponse | None:
    if isinstance(exc, Problem):
        return problem_response(exc.status, exc.title, exc.detail, exc.headers, **exc.extra)
    if isinstance(exc, IdempotencyMismatch):
        return problem_response(409, "Idempotency mismatch", str(exc), field=exc.field, problem=exc.problem,
                                fix=exc.fix)
    if isinstance(exc, BadInput):
        if "was erased" in exc.problem:
            return problem_response(410, "Subject erased", str(exc), field=exc.field, problem=exc.problem,
                                    fix=exc.fix)
        return problem_response(422, "Bad input", str(exc), field=exc.field, problem=exc.problem, fix=exc.fix)
    if isinstance(exc, ConflictError):
        return problem_response(409, "Conflict", str(exc))
    if isinstance(exc, NotCaughtUp):
        return problem_response(503, "Not caught up", str(exc), headers={"Retry-After": "1"})
    if isinstance(exc, SubjectErasedError):
        return problem_response(410, "Subject erased", str(exc))
    if isinstance(exc, NotImplementedError):
        return problem_response(501, "Not implemented", str(exc))
    if isinstance(exc, MemledgerError):
        return problem_response(500, "Ledger error", f"{type(exc).__name__}: {exc}")
    return None


class KeyMiddleware:
    """ASGI middleware: authenticate ``Authorization: Bearer`` (401 problem+json otherwise), put the key's
    :class:`Principal` in the request state (``scope["state"]``, where routes and MCP tools read it), and write
    one access-log line without the query string."""

    def __init__(self, app: ASGIApp, keys: KeyStore, service: Service) -> None:
        self.app, self.keys, self.service = app, keys, service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        path = scope.get("path", "")
        status = {"code": 0}

        async def send_logged(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            if path not in OPEN_PATHS:
                principal = await self._principal(scope)
                if principal is None:
                    resp = problem_response(401, "Unauthorized", "send a valid API key: Authorization: Bearer <key> "
                                            "(memledger keys create --user U)",
                                            headers={"WWW-Authenticate": 'Bearer realm="memledger"'})
                    await resp(scope, receive, send_logged)
                    return
                scope.setdefault("state", {})[PRINCIPAL_STATE] = principal
            await self.app(scope, receive, send_logged)
        finally:
            log.info("%s %s %s %.1fms", scope.get("method"), path, status["code"],
                     (time.perf_counter() - start) * 1000)

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
        raise Problem(401, "Unauthorized", "send Authorization: Bearer <key>")
    return p


def create_app(service: Service, *, mcp: bool = True, allow_destructive: bool = False,
               host: str = "127.0.0.1") -> FastAPI:
    """The FastAPI app on ``service``'s ledger (the MCP server mounted at ``/mcp`` unless ``mcp=False``)."""
    keys = KeyStore(service.ml)
    mcp_server = build_mcp(service, allow_destructive=allow_destructive, require_key=True) if mcp else None
    mcp_routes: list[Any] = []
    if mcp_server is not None:
        # the MCP endpoint as a route of this app (not a sub-mount: no /mcp -> /mcp/ redirect), behind KeyMiddleware
        # json_response: a tool answers with one JSON body instead of an SSE stream per POST (~1 ms less per call;
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
    app = FastAPI(title="memledger", version="0.1.0", lifespan=lifespan, dependencies=[bearer],
                  description="An event-sourced memory ledger for LLM agents. Every route but /v1/health needs "
                              "Authorization: Bearer <key> (memledger keys create). Errors are RFC 9457 "
                              "problem+json. See docs/interfaces.md.")
    app.router.routes.extend(mcp_routes)
    app.add_middleware(KeyMiddleware, keys=keys, service=service)

    @app.exception_handler(Exception)
    async def on_error(request: Request, exc: Exception) -> Response:
        resp = _problem_of(exc)
        if resp is not None:
            return resp
        log.error("unexpected %s on %s %s", type(exc).__name__, request.method, request.url.path)
        return problem_response(500, "Internal error", f"{type(exc).__name__}")

    for cls in (Problem, BadInput, ConflictError, NotCaughtUp, SubjectErasedError, MemledgerError,
                NotImplementedError):
        app.add_exception_handler(cls, on_error)

    @app.exception_handler(RequestValidationError)
    async def on_validation(request: Request, exc: RequestValidationError) -> Response:
        errors = exc.errors()
        first = errors[0] if errors else {"loc": ("body",), "msg": "invalid"}
        loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path", "header")]
        field = ".".join(loc) or "body"
        fix = "see /openapi.json for the expected fields and types"
        msg = str(first.get("msg", "invalid"))
        if "; fix: " in msg:
            msg, _, fix = msg.partition("; fix: ")
            msg = msg.removeprefix("Value error, ")
        details = [{"field": ".".join(str(p) for p in e.get("loc", ())), "problem": str(e.get("msg"))}
                   for e in errors]
        return problem_response(422, "Bad input", f"{field}: {msg} ({fix})", field=field, problem=msg, fix=fix,
                                errors=details)

    # -- dependencies ----------------------------------------------------------------------------------------------
    async def user_of(request: Request, user_id: str = Path(description="Whose memory.")) -> str:
        p = principal(request)
        try:
            user_id = check_user_id(user_id)
        except BadInput as exc:
            raise Problem(422, "Bad input", str(exc), field=exc.field, problem=exc.problem, fix=exc.fix) from None
        if not p.allows(user_id):
            raise Problem(403, "Forbidden", f"this API key does not hold user {user_id!r}")
        if await service.call(service.erased, user_id, inline=True):
            raise Problem(410, "Subject erased", f"user {user_id!r} was erased; nothing of them can be read or "
                          "written", field="user_id")
        return user_id

    async def key_of(key: str = Path(description="The fact's dotted key.")) -> str:
        return check_key(key)

    def labels_ok(p: Principal, labels: list[str] | None) -> None:
        if labels:
            missing = sorted({x.strip() for x in labels} - p.allow_sensitive)
            if missing:
                raise Problem(403, "Forbidden", f"this API key may not let in {', '.join(missing)} (create one "
                              f"with --allow-sensitive {missing[0]})")

    def written(data: Any, position: int, status: int = 200) -> JSONResponse:
        return JSONResponse(data, status_code=status, headers={"X-Ledger-Position": str(position)})

    def idem(body: Any, header: str | None) -> Any:
        if header and getattr(body, "idempotency_key", None) is None and hasattr(body, "idempotency_key"):
            return body.model_copy(update={"idempotency_key": header})
        return body

    IdemHeader = Header(None, alias="Idempotency-Key", description="A retried request with the same key records "
                        "nothing new and returns the first receipt.")
    After = Query(None, ge=0, description="A log position (X-Ledger-Position of a write): answer only once "
                  "the projections include it.")

    # -- health ------------------------------------------------------------------------------------------------
    @app.get("/v1/health", tags=["meta"])
    async def health() -> dict[str, Any]:
        return {"status": "ok", "head": await service.call(service.head, inline=True)}

    # -- writes ------------------------------------------------------------------------------------------------
    @app.post("/v1/users/{user_id}/memories", tags=["writes"], status_code=201)
    def remember(body: RememberBody, user_id: str = Depends(user_of), idempotency_key: str | None = IdemHeader
                 ) -> Response:
        r = service.remember(user_id, idem(body, idempotency_key))
        return written(r.model_dump(mode="json"), _position(r), 201)

    @app.post("/v1/users/{user_id}/facts/{key}", tags=["writes"], status_code=201)
    def assert_fact(body: AssertBody, user_id: str = Depends(user_of), key: str = Depends(key_of),
                    idempotency_key: str | None = IdemHeader) -> Response:
        r = service.assert_fact(user_id, key, idem(body, idempotency_key))
        return written(r.model_dump(mode="json"), r.position, 201)

    @app.post("/v1/users/{user_id}/facts/{key}/corrections", tags=["writes"], status_code=201)
    def correct(body: CorrectBody, user_id: str = Depends(user_of), key: str = Depends(key_of),
                idempotency_key: str | None = IdemHeader) -> Response:
        r = service.correct(user_id, key, idem(body, idempotency_key))
        return written(r.model_dump(mode="json"), r.position, 201)

    @app.post("/v1/users/{user_id}/facts/{key}/retractions", tags=["writes"], status_code=201)
    def retract(user_id: str = Depends(user_of), key: str = Depends(key_of),
                body: RetractBody = Body(default_factory=RetractBody),
                idempotency_key: str | None = IdemHeader) -> Response:
        r = service.retract(user_id, key, idem(body, idempotency_key))
        return written(r.model_dump(mode="json"), r.position, 201)

    @app.post("/v1/commands", tags=["writes"], status_code=201)
    def commands(request: Request, body: CommandsBody, idempotency_key: str | None = IdemHeader) -> Response:
        p = principal(request)
        cmds = []
        for i, c in enumerate(body.commands):
            u = c.get("user_id")
            try:
                u = check_user_id(u, f"commands[{i}].user_id")
            except BadInput as exc:
                raise Problem(422, "Bad input", str(exc), field=exc.field, problem=exc.problem, fix=exc.fix) from None
            if not p.allows(u):
                raise Problem(403, "Forbidden", f"commands[{i}]: this API key does not hold user {u!r}")
            if service.erased(u):
                raise Problem(410, "Subject erased", f"commands[{i}]: user {u!r} was erased")
            if idempotency_key and "idempotency_key" not in c:
                c = {**c, "idempotency_key": f"{idempotency_key}:{i}"}
            cmds.append(c)
        receipts = service.record(cmds)
        return written({"receipts": [r.model_dump(mode="json") for r in receipts]},
                       max((r.position for r in receipts), default=0), 201)

    # -- reads -------------------------------------------------------------------------------------------------
    @app.get("/v1/users/{user_id}/profile", tags=["reads"])
    async def profile(user_id: str = Depends(user_of), after: int | None = After) -> Any:
        return (await service.call(service.profile, user_id, after, inline=True)).model_dump(mode="json")

    @app.get("/v1/users/{user_id}/history", tags=["reads"])
    async def history(user_id: str = Depends(user_of), key: str | None = Query(None, description="One fact's key."),
                      after: int | None = After) -> Any:
        rows = (await service.call(service.history, user_id, key, after, inline=True)).rows
        return [r.model_dump(mode="json") for r in rows]

    @app.get("/v1/users/{user_id}/history/{key}", tags=["reads"])
    async def history_key(user_id: str = Depends(user_of), key: str = Depends(key_of),
                          after: int | None = After) -> Any:
        rows = (await service.call(service.history, user_id, key, after, inline=True)).rows
        return [r.model_dump(mode="json") for r in rows]

    @app.get("/v1/users/{user_id}/believed", tags=["time travel"])
    async def believed(user_id: str = Depends(user_of), q: BelievedArgs = Depends(_query(BelievedArgs))) -> Any:
        return (await service.call(service.believed, user_id, q, inline=True)).model_dump(mode="json")

    @app.get("/v1/users/{user_id}/true-at", tags=["time travel"])
    async def true_at(user_id: str = Depends(user_of), q: TrueAtArgs = Depends(_query(TrueAtArgs))) -> Any:
        return (await service.call(service.true_at, user_id, q, inline=True)).model_dump(mode="json")

    @app.get("/v1/users/{user_id}/diff", tags=["time travel"])
    async def diff(user_id: str = Depends(user_of),
                   from_: str = Query(alias="from", description="Earlier as-of instant (ISO 8601 with offset)."),
                   to: str = Query(description="Later as-of instant (ISO 8601 with offset)."),
                   valid_at: str | None = Query(None), axis: str = Query("system"), after: int | None = After) -> Any:
        a = _validated(DiffArgs, from_as_of=from_, to_as_of=to, valid_at=valid_at, axis=axis, after=after)
        return (await service.call(service.diff, user_id, a, inline=True)).model_dump(mode="json")

    @app.get("/v1/users/{user_id}/audit", tags=["time travel"])
    async def audit(user_id: str = Depends(user_of), q: AuditArgs = Depends(_query(AuditArgs))) -> Any:
        return (await service.call(service.audit, user_id, q, inline=True)).model_dump(mode="json")

    @app.post("/v1/users/{user_id}/search", tags=["reads"])
    async def search_post(request: Request, body: HttpSearchBody, user_id: str = Depends(user_of)) -> Any:
        return await service.call(_search, request, user_id, body, inline=True)

    @app.get("/v1/users/{user_id}/search", tags=["reads"],
             description="The query lands in URLs (proxies, browser history): prefer POST.")
    async def search_get(request: Request, user_id: str = Depends(user_of), query: str = Query(),
                         k: int = Query(10), as_of: str | None = Query(None), source: str | None = Query(None),
                         role: str | None = Query(None), also: list[str] | None = Query(None),
                         allow_sensitive: list[str] | None = Query(None), purpose: str | None = Query(None),
                         after: int | None = After) -> Any:
        body = _validated(HttpSearchBody, query=query, k=k, as_of=as_of, source=source, role=role, also=also,
                          allow_sensitive=allow_sensitive, purpose=purpose, after=after)
        return await service.call(_search, request, user_id, body, inline=True)

    def _search(request: Request, user_id: str, body: HttpSearchBody) -> Any:
        p = principal(request)
        labels_ok(p, body.allow_sensitive)
        users = [user_id]
        for other in body.also or []:
            other = check_user_id(other, "also")
            if not p.allows(other):
                raise Problem(403, "Forbidden", f"also: this API key does not hold user {other!r}")
            if other not in users:
                users.append(other)
        plain = SearchBody(**body.model_dump(exclude={"also"}))
        if len(users) == 1:
            return [h.model_dump(mode="json") for h in service.recall(user_id, plain).hits]
        merged = []
        for u in users:
            if service.erased(u):
                raise Problem(410, "Subject erased", f"also: user {u!r} was erased")
            merged += [{**h.model_dump(mode="json"), "user_id": u} for h in service.recall(u, plain).hits]
        merged.sort(key=lambda h: -h["score"])
        return [{**h, "rank": i} for i, h in enumerate(merged[:body.k], 1)]

    @app.get("/v1/users/{user_id}/context", tags=["reads"])
    def context_get(request: Request, user_id: str = Depends(user_of), session_id: str | None = Query(None),
                    query: str | None = Query(None), now: str | None = Query(None), budget: int = Query(2000),
                    allow_sensitive: list[str] | None = Query(None), purpose: str | None = Query(None),
                    after: int | None = After) -> Any:
        body = _validated(ContextBody, session_id=session_id, query=query, now=now, budget=budget,
                          allow_sensitive=allow_sensitive, purpose=purpose, after=after)
        labels_ok(principal(request), body.allow_sensitive)
        return service.context(user_id, body).model_dump(mode="json")

    @app.post("/v1/users/{user_id}/context", tags=["reads"])
    def context_post(request: Request, body: ContextBody, user_id: str = Depends(user_of)) -> Any:
        labels_ok(principal(request), body.allow_sensitive)
        return service.context(user_id, body).model_dump(mode="json")

    @app.get("/v1/users/{user_id}/resume", tags=["sessions"])
    def resume(user_id: str = Depends(user_of), now: str | None = Query(None),
               expiry_hours: float = Query(48.0, gt=0)) -> Any:
        if now is not None:
            _validated(ObservedBody, observed_at=now)
        return service.resume(user_id, now, expiry_hours).model_dump(mode="json")

    @app.get("/v1/users/{user_id}/export", tags=["privacy"])
    def export(user_id: str = Depends(user_of)) -> Any:
        return service.export(user_id).model_dump(mode="json")

    @app.delete("/v1/users/{user_id}", tags=["privacy"])
    def erase(request: Request, user_id: str = Path(), confirm: str | None = Header(None, alias="Confirm-Erase")
              ) -> Response:
        p = principal(request)
        user_id = check_user_id(user_id)
        if not p.allows(user_id):
            raise Problem(403, "Forbidden", f"this API key does not hold user {user_id!r}")
        if not p.admin:
            raise Problem(403, "Forbidden", "erasing needs an admin key (memledger keys create --admin)")
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
    def messages(session_id: str, user_id: str = Depends(user_of)) -> Any:
        return service.messages(user_id, session_id)

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
        r = service.end_session(user_id, session_id, body.observed_at)
        return written(r.model_dump(mode="json"), r.position, 201)

    # -- change feed -------------------------------------------------------------------------------------------
    @app.get("/v1/users/{user_id}/changes", tags=["reads"], response_class=StreamingResponse,
             description="Server-sent events, one `change` event per belief change (key, kind, version, position, "
                         "recorded_at), from log position `after` (or the Last-Event-ID header) on; resumable from "
                         "any position. `limit` closes the stream after that many events.")
    async def changes(request: Request, user_id: str = Depends(user_of), after: int = Query(0, ge=0),
                      last_event_id: str | None = Header(None, alias="Last-Event-ID"),
                      limit: int | None = Query(None, ge=1), poll: float = Query(0.25, ge=0.01, le=10)
                      ) -> StreamingResponse:
        start = after
        if last_event_id is not None:
            try:
                start = max(start, int(last_event_id))
            except ValueError:
                raise Problem(422, "Bad input", "Last-Event-ID: not a log position", field="Last-Event-ID",
                              problem="not an integer", fix="send the id of the last event received") from None
        first = await anyio.to_thread.run_sync(service.changes, user_id, start)

        async def stream() -> AsyncIterator[bytes]:
            sent, position, pending = 0, start, first
            head = -1
            idle = 0.0
            while True:
                for c in pending:
                    yield (f"id: {c.position}\nevent: change\ndata: {c.model_dump_json()}\n\n").encode()
                    position = c.position
                    sent += 1
                    if limit is not None and sent >= limit:
                        return
                pending = []
                if await request.is_disconnected():
                    return
                await asyncio.sleep(poll)
                idle += poll
                if idle >= 15:
                    idle = 0.0
                    yield b": keep-alive\n\n"
                try:
                    new_head = await anyio.to_thread.run_sync(service.head)
                    if new_head != head:
                        head = new_head
                        pending = await anyio.to_thread.run_sync(service.changes, user_id, position)
                except MemledgerError:  # the user was erased (or the store closed) while streaming: end it
                    return

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

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
        raise RequestValidationError(exc.errors()) from None


def _query(model: type) -> Any:
    """A dependency reading ``model``'s fields (without ``user_id``) from the query string."""
    import inspect

    names = [n for n in model.model_fields if n != "user_id"]

    def dep(request: Request) -> Any:
        qp = request.query_params
        data: dict[str, Any] = {}
        for n in names:
            if n in qp:
                data[n] = qp[n]
        return _validated(model, **data)

    params = [inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request)]
    for n in names:
        f = model.model_fields[n]
        params.append(inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY,
                                        default=Query(None if not f.is_required() else ..., description=f.description),
                                        annotation=str | None if not f.is_required() else str))

    async def wrapper(request: Request, **kwargs: Any) -> Any:  # async: validation only, no thread hop
        return dep(request)

    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return wrapper
