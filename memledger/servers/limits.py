"""Bounded requests: the largest body the HTTP API reads (docs/interfaces.md, "Bounded requests")."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

#: the largest request body accepted, in bytes (a batch of commands with long sentences fits; a 10 MB query does not)
MAX_BODY = 8 * 1024 * 1024



def replaying(body: bytes, receive: Receive) -> Receive:
    """An ASGI ``receive`` that hands the app ``body`` (a request body already read in full) as one message, then
    defers to ``receive`` (for the disconnect a streaming response waits on)."""
    sent = {"done": False}

    async def replay() -> dict[str, Any]:
        if not sent["done"]:
            sent["done"] = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay

class BodyLimitMiddleware:
    """ASGI middleware: a request body larger than :data:`MAX_BODY` is refused at once with 413 problem+json, by its
    ``Content-Length`` before anything is read; a body sent without one (chunked) is read here up to the limit and
    refused the same way once it passes it, so no route ever parses more."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
            await self._too_large(scope, receive, send, length.decode(errors="replace"))
            return
        if length is not None or scope.get("method") in ("GET", "HEAD", "DELETE", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        # no Content-Length (a chunked body): read it here, up to the limit, then hand it on whole
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, receive, send)  # the client went away: let the route see it
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > MAX_BODY:
                await self._too_large(scope, receive, send, f"more than {MAX_BODY}")
                return
            if not message.get("more_body"):
                break
        await self.app(scope, replaying(b"".join(chunks), receive), send)

    @staticmethod
    async def _too_large(scope: Scope, receive: Receive, send: Send, size: str) -> None:
        # the API's problem+json shape (memledger/servers/http.py problem_response), written here: this module is
        # imported by that one
        body = {"type": "https://memledger.dev/problems/content-too-large", "title": "Content Too Large",
                "status": 413, "detail": f"body: is {size} bytes long", "field": "body",
                "problem": f"is larger than {MAX_BODY} bytes",
                "fix": f"send at most {MAX_BODY} bytes; split a batch of commands into smaller ones"}
        await JSONResponse(body, status_code=413, media_type="application/problem+json")(scope, receive, send)
