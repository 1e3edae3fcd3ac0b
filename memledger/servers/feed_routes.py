"""The change feed over HTTP: ``GET /v1/users/{user_id}/changes``, server-sent events, one ``change`` event per
belief change from a log position on (docs/interfaces.md), behind the same API keys as every route. A server told
to stop ends each open feed with an ``end`` event (``{"reason", "after"}``: resume with ``after``)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable

import anyio
from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.responses import StreamingResponse

from ledger.errors import BadInput, MemledgerError

from .ops import Service


def add_feed_routes(app: FastAPI, service: Service, *, user_of: Callable[..., str],
                    problem: Callable[..., Exception]) -> None:
    """Add the feed route to ``app``; ``user_of`` checks the key holds the path's user, ``problem`` makes the HTTP
    module's problem+json errors."""
    # set by `memledger serve http` when the server is told to stop: each open feed then ends with an `end` event
    # naming the position to resume from, instead of being cut when the graceful shutdown's time runs out
    draining = app.state.draining = threading.Event()

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
                raise problem(422, "Bad input", "Last-Event-ID: not a log position", field="Last-Event-ID",
                              problem="not an integer", fix="send the id of the last event received") from None
        head_now = await anyio.to_thread.run_sync(service.head, user_id)
        shard = await anyio.to_thread.run_sync(service.shard_of, user_id)
        if start > head_now:  # a position the log has not reached: it would wait forever for events
            field = "Last-Event-ID" if last_event_id is not None and start != after else "after"
            raise BadInput(field, f"position {start} is past the log's head ({head_now})",
                           f"pass a position from an earlier event or receipt (0..{head_now})")
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
                if draining.is_set():
                    yield (f"event: end\ndata: {json.dumps({'reason': 'the server is stopping', 'after': position})}"
                           "\n\n").encode()
                    return
                idle += poll
                if idle >= 15:
                    idle = 0.0
                    yield b": keep-alive\n\n"
                try:
                    if shard is not None:
                        now_on = await anyio.to_thread.run_sync(service.shard_of, user_id)
                        if now_on != shard:  # positions of the old shard mean nothing on the new one: say so, end
                            yield (f"event: moved\ndata: {json.dumps({'user_id': user_id, 'from': shard, 'to': now_on})}"
                                   "\n\n").encode()
                            return
                    new_head = await anyio.to_thread.run_sync(service.head, user_id)
                    if new_head != head:
                        head = new_head
                        pending = await anyio.to_thread.run_sync(service.changes, user_id, position)
                except MemledgerError:  # the user was erased (or the store closed) while streaming: end it
                    return

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

