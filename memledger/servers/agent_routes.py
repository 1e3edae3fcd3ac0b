"""The HTTP routes of an agent's own memories (written without a user, kept under the user id ``~agent/<agent_id>``:
memledger/agent_space.py): ``POST /v1/agents/{agent_id}/memories`` (remember), ``GET /v1/agents/{agent_id}/profile``,
``GET /v1/agents/{agent_id}/history`` and ``POST /v1/agents/{agent_id}/search``.

They take an admin key holding every user (``memledger keys create --admin``, no ``--user``): a key holds users, and
an agent's own memories belong to none of them (403 naming ``agent_id`` otherwise). Each route is the user route of
the same name answered on the agent's own id; ``run_id`` narrows within it, ``agent_id`` in a body may only repeat
the path's. Every other verb of an agent's own memories (correct, retract, time travel, export, erase) is in Python,
the CLI (USER ``-`` with ``--agent``) and the MCP tools (``agent_id`` without ``user_id``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import Depends, FastAPI, Path, Query, Request, Response

from ledger.agent_spaces import opened, space_of
from ledger.errors import BadInput
from ledger.schemas import check_identifier

from ..scopes import RUN_HELP
from .models import HistoryArgs, HttpSearchBody, ProfileArgs, RememberBody
from .ops import Service


def add_agent_routes(app: FastAPI, service: Service, *, written: Callable[..., Response],
                     position: Callable[[Any], int], granted: Callable[..., Any],
                     labels_ok: Callable[[Any, Any], None], principal: Callable[[Request], Any],
                     problem: Callable[..., Exception]) -> None:
    """Add the routes to ``app``; the callables are the HTTP module's (``written`` sets ``X-Ledger-Position``,
    ``position`` reads it from a receipt,
    ``granted`` validates ``allow_sensitive``/``purpose`` and checks the key's labels, ``labels_ok`` checks the
    key's labels, ``problem`` makes its problem+json errors)."""

    async def agent_of(request: Request, agent_id: str = Path(description="The agent whose own memories (those "
                                                                         "written with agent_id and no user).")) -> str:
        try:
            space = space_of(check_identifier(agent_id, "agent_id"))
        except BadInput as exc:
            raise problem(422, "Bad input", str(exc), field=exc.field, problem=exc.problem, fix=exc.fix) from None
        if not principal(request).all_users:
            said = "this API key holds users; an agent's own memories belong to none of them"
            fix = ("use an admin key created without --user; for the memories an agent wrote about a user, use "
                   f"/v1/users/{{user_id}}/...?agent_id={agent_id}")
            raise problem(403, "Forbidden", f"{said} (fix: {fix})", field="agent_id", problem=said, fix=fix)
        if await service.call(service.erased, space, inline=True):
            raise problem(410, "Subject erased", f"agent {agent_id!r}'s own memories were erased",
                          field="agent_id", problem=f"agent {agent_id!r}'s own memories were erased",
                          fix="nothing of an erased agent's own memories can be read or written")
        return space

    def own(space: str, fn: Callable[..., Any], *args: Any) -> Any:
        with opened(space):  # the space passes the user id check for this call only (ledger/agent_spaces.py)
            return fn(space, *args)

    def same_agent(space: str, body: Any) -> Any:
        """``body`` with the path's agent as its ``agent_id``; one naming another agent is refused (422)."""
        agent = space.split("/", 1)[1]
        for field in ("agent_id", "actor"):
            given = getattr(body, field, None)
            if given is not None and given != agent:
                raise BadInput(field, f"{given!r} is not the path's agent {agent!r}",
                               f"leave {field} out (the path names the agent)")
        return body.model_copy(update={"agent_id": agent}) if hasattr(body, "actor") else body

    Run = Query(None, description=RUN_HELP)

    @app.post("/v1/agents/{agent_id}/memories", tags=["agents"], status_code=201,
              description="Remember something as the agent's own memory (no user): the user route's body.")
    def remember(body: RememberBody, space: str = Depends(agent_of)) -> Response:
        r = own(space, service.remember, same_agent(space, body))
        return written(r.model_dump(mode="json"), position(r), 201)

    @app.get("/v1/agents/{agent_id}/profile", tags=["agents"])
    async def profile(request: Request, space: str = Depends(agent_of), after: int | None = Query(None, ge=0),
                      allow_sensitive: list[str] | None = Query(None), purpose: str | None = Query(None),
                      run_id: str | None = Run) -> Any:
        g = granted(request, ProfileArgs, allow_sensitive=allow_sensitive, purpose=purpose, run_id=run_id)
        return (await service.call(own, space, service.profile, after, g.allow_sensitive, g.purpose, None, g.run_id,
                                   inline=True)).model_dump(mode="json")

    @app.get("/v1/agents/{agent_id}/history", tags=["agents"])
    async def history(request: Request, space: str = Depends(agent_of),
                      key: str | None = Query(None, description="One fact's key."),
                      after: int | None = Query(None, ge=0), allow_sensitive: list[str] | None = Query(None),
                      purpose: str | None = Query(None), run_id: str | None = Run) -> Any:
        g = granted(request, HistoryArgs, allow_sensitive=allow_sensitive, purpose=purpose, run_id=run_id)
        rows = (await service.call(own, space, service.history, key, after, g.allow_sensitive, g.purpose, None,
                                   g.run_id, inline=True)).rows
        return [r.model_dump(mode="json") for r in rows]

    @app.post("/v1/agents/{agent_id}/search", tags=["agents"])
    async def search(request: Request, body: HttpSearchBody, space: str = Depends(agent_of)) -> Any:
        if body.also:
            raise BadInput("also", "names other memories to search", "leave also out: an agent's own memories are "
                           "searched alone (search a user's with /v1/users/{user_id}/search)")
        labels_ok(principal(request), body.allow_sensitive)
        body = same_agent(space, body)
        hits = (await service.call(own, space, service.recall, body)).hits  # CPU-heavy: a worker thread
        return [h.model_dump(mode="json") for h in hits]
