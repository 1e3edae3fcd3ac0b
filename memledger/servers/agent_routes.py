"""The HTTP routes of an agent's own memories (written without a user, kept under the user id ``~agent/<agent_id>``:
memledger/agent_space.py), each the user route of the same name and shape under ``/v1/agents/{agent_id}``:
``POST .../memories`` (remember), ``POST .../facts/{key}`` (assert), ``.../facts/{key}/corrections``,
``.../facts/{key}/retractions``; ``GET .../profile``, ``.../history``, ``.../history/{key}``, ``POST .../search``;
time travel ``GET .../believed``, ``.../true-at``, ``.../diff``, ``.../audit``; ``GET .../export``; and
``DELETE /v1/agents/{agent_id}``, the erasure of ``DELETE /v1/users/{user_id}`` (an admin key, ``Confirm-Erase``
repeating the agent id; the receipt with its signed certificate). Erasing an agent's own memories destroys the key
of ``~agent/<agent_id>`` alone: the memories that agent wrote about users are theirs, and stay.

Who may call them: a key limited to that agent (``memledger keys create --agent A``, with or without users), or an
admin key holding every user (``keys create --admin``, no ``--user``). A key holding users and no agent gets 403
naming ``agent_id`` (an agent's own memories belong to none of its users), and so does a key limited to another
agent. ``run_id`` narrows within the agent's memories; ``agent_id`` (or ``actor``) in a body or query may only
repeat the path's (422 otherwise). Erasing needs an admin key besides (a key limited to the agent is not enough,
unless created with --admin as well), as erasing a user does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import Body, Depends, FastAPI, Header, Path, Query, Request, Response

from ledger.agent_spaces import opened, space_of
from ledger.errors import BadInput
from ledger.schemas import check_identifier

from ..scopes import RUN_HELP
from .models import (_ALLOW, _PURPOSE, AuditArgs, BelievedArgs, DiffArgs, HistoryArgs, HttpAssertBody,
                     HttpCorrectBody, HttpSearchBody, ProfileArgs, RememberBody, RetractBody, TrueAtArgs)
from .ops import Service


#: the fix of a malformed agent id in a path (a blank one cannot be "left out" there)
PATH_FIX = "name the agent in the path: /v1/agents/{agent_id}/..., agent_id its id as written (non-blank text)"


def add_agent_routes(app: FastAPI, service: Service, *, written: Callable[..., Response],
                     position: Callable[[Any], int], granted: Callable[..., Any],
                     labels_ok: Callable[[Any, Any], None], principal: Callable[[Request], Any],
                     problem: Callable[..., Exception], key_of: Callable[..., Any], idem: Callable[[Any, Any], Any],
                     query: Callable[[type, tuple[str, ...]], Any], validated: Callable[..., Any]) -> None:
    """Add the routes to ``app``; the callables are the HTTP module's (``written`` sets ``X-Ledger-Position``,
    ``position`` reads it from a receipt,
    ``granted`` validates ``allow_sensitive``/``purpose`` and checks the key's labels, ``labels_ok`` checks the
    key's labels, ``problem`` makes its problem+json errors, ``key_of`` checks a path's fact key, ``idem`` puts the
    ``Idempotency-Key`` header into a body, ``query`` reads a model from the query string (but the fields named: the path's) and ``validated``
    validates query fields with a model, both as the user routes do)."""

    async def agent_of(request: Request, agent_id: str = Path(description="The agent whose own memories (those "
                                                                         "written with agent_id and no user).")) -> str:
        try:
            space = space_of(check_identifier(agent_id, "agent_id"))
        except BadInput as exc:
            raise problem(422, "Bad input", str(exc), field=exc.field, problem=exc.problem,
                          fix=exc.fix or PATH_FIX) from None
        p = principal(request)
        if p.agent is not None and p.agent != agent_id:
            said = f"this API key is limited to agent {p.agent!r}, not {agent_id!r}"
            fix = f"use /v1/agents/{p.agent}/..., or a key for agent {agent_id!r}"
            raise problem(403, "Forbidden", f"{said} (fix: {fix})", field="agent_id", problem=said, fix=fix)
        if not p.allows_agent(agent_id):
            said = "this API key holds users; an agent's own memories belong to none of them"
            fix = ("use an admin key created without --user, or a key limited to the agent (keys create --agent "
                   f"{agent_id}); for the memories an agent wrote about a user, use "
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
    IdemHeader = Header(None, alias="Idempotency-Key", description="A retried request with the same key records "
                        "nothing new and returns the first receipt.")

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

    # -- the other writes: assert, correct, retract one key ----------------------------------------------------------
    @app.post("/v1/agents/{agent_id}/facts/{key}", tags=["agents"], status_code=201,
              description="Assert a fact as the agent's own memory (no user): the user route's body.")
    def assert_fact(body: HttpAssertBody, space: str = Depends(agent_of), key: str = Depends(key_of),
                    idempotency_key: str | None = IdemHeader) -> Response:
        r = own(space, service.assert_fact, key, same_agent(space, idem(body, idempotency_key)))
        return written(r.model_dump(mode="json"), r.position, 201)

    @app.post("/v1/agents/{agent_id}/facts/{key}/corrections", tags=["agents"], status_code=201,
              description="Correct one of the agent's own memories: the user route's body.")
    def correct(body: HttpCorrectBody, space: str = Depends(agent_of), key: str = Depends(key_of),
                idempotency_key: str | None = IdemHeader) -> Response:
        r = own(space, service.correct, key, same_agent(space, idem(body, idempotency_key)))
        return written(r.model_dump(mode="json"), r.position, 201)

    @app.post("/v1/agents/{agent_id}/facts/{key}/retractions", tags=["agents"], status_code=201,
              description="Retract one of the agent's own memories: the user route's body.")
    def retract(space: str = Depends(agent_of), key: str = Depends(key_of),
                body: RetractBody = Body(default_factory=RetractBody),
                idempotency_key: str | None = IdemHeader) -> Response:
        r = own(space, service.retract, key, same_agent(space, idem(body, idempotency_key)))
        return written(r.model_dump(mode="json"), r.position, 201)

    # -- erasure: the user route's rules, on the agent's own memories alone -----------------------------------------
    @app.delete("/v1/agents/{agent_id}", tags=["agents"],
                description="Erase the agent's own memories (those written with agent_id and no user): their key is "
                            "destroyed, every projection purged; the receipt holds a certificate signed with the "
                            "store's key. Needs an admin key and the header Confirm-Erase repeating the agent id. "
                            "The memories the agent wrote about users are theirs and are left as they are. Erasing "
                            "again records nothing new.")
    def erase(request: Request, agent_id: str = Path(description="The agent whose own memories to erase."),
              confirm: str | None = Header(None, alias="Confirm-Erase",
                                           description="The agent id again: erasing is irreversible.")) -> Response:
        p = principal(request)
        try:
            agent = check_identifier(agent_id, "agent_id")
        except BadInput as exc:
            raise problem(422, "Bad input", str(exc), field=exc.field, problem=exc.problem,
                          fix=exc.fix or PATH_FIX) from None
        if not p.allows_agent(agent):
            said = (f"this API key is limited to agent {p.agent!r}, not {agent!r}" if p.agent is not None else
                    "this API key holds users; an agent's own memories belong to none of them")
            fix = "use an admin key created without --user (memledger keys create --admin)"
            raise problem(403, "Forbidden", f"agent_id: {said} (fix: {fix})", field="agent_id", problem=said,
                          fix=fix)
        if not p.admin:
            raise problem(403, "Forbidden", "erasing needs an admin key (memledger keys create --admin)",
                          field="Authorization", problem="erasing needs an admin key",
                          fix="use a key created with memledger keys create --admin")
        if confirm != agent:
            raise problem(422, "Bad input", "Confirm-Erase: must repeat the agent id (erasing is irreversible)",
                          field="Confirm-Erase", problem="missing or not the agent id",
                          fix=f"send Confirm-Erase: {agent}")
        space = space_of(agent)
        try:
            with opened(space):
                r = service.erase(space)
        except BadInput as exc:
            if exc.field != "user_id" or not exc.problem.startswith("nothing is held"):
                raise
            said = f"agent {agent!r} has no own memories (nothing was written with agent_id {agent!r} and no user)"
            fix = "check the agent id: erasing burns it for good"
            raise problem(422, "Bad input", f"agent_id: {said} (fix: {fix})", field="agent_id", problem=said,
                          fix=fix) from None
        return written(r.model_dump(mode="json"), r.position or 0)

    # -- the other reads: one key's history, time travel on both axes, export --------------------------------------
    @app.get("/v1/agents/{agent_id}/history/{key}", tags=["agents"])
    async def history_key(request: Request, space: str = Depends(agent_of), key: str = Depends(key_of),
                          after: int | None = Query(None, ge=0), allow_sensitive: list[str] | None = Query(None),
                          purpose: str | None = Query(None), run_id: str | None = Run) -> Any:
        g = granted(request, HistoryArgs, allow_sensitive=allow_sensitive, purpose=purpose, run_id=run_id)
        rows = (await service.call(own, space, service.history, key, after, g.allow_sensitive, g.purpose, None,
                                   g.run_id, inline=True)).rows
        return [r.model_dump(mode="json") for r in rows]

    @app.get("/v1/agents/{agent_id}/believed", tags=["agents"],
             description="What the ledger believed of the agent's own memories as of a system (or observed) instant, "
                         "sliced at a valid instant: the user route's query fields.")
    async def believed(request: Request, space: str = Depends(agent_of),
                       q: BelievedArgs = Depends(query(BelievedArgs, ("agent_id",)))) -> Any:
        labels_ok(principal(request), q.allow_sensitive)
        return (await service.call(own, space, service.believed, q, inline=True)).model_dump(mode="json")

    @app.get("/v1/agents/{agent_id}/true-at", tags=["agents"])
    async def true_at(request: Request, space: str = Depends(agent_of),
                      q: TrueAtArgs = Depends(query(TrueAtArgs, ("agent_id",)))) -> Any:
        labels_ok(principal(request), q.allow_sensitive)
        return (await service.call(own, space, service.true_at, q, inline=True)).model_dump(mode="json")

    @app.get("/v1/agents/{agent_id}/diff", tags=["agents"])
    async def diff(request: Request, space: str = Depends(agent_of),
                   from_: str = Query(alias="from", description="Earlier as-of instant (ISO 8601 with offset)."),
                   to: str = Query(description="Later as-of instant (ISO 8601 with offset)."),
                   valid_at: str | None = Query(None), axis: str = Query("system"),
                   after: int | None = Query(None, ge=0), allow_sensitive: list[str] | None = Query(None),
                   purpose: str | None = Query(None), run_id: str | None = Run) -> Any:
        a = validated(DiffArgs, from_as_of=from_, to_as_of=to, valid_at=valid_at, axis=axis, after=after,
                      allow_sensitive=allow_sensitive, purpose=purpose, run_id=run_id)
        labels_ok(principal(request), a.allow_sensitive)
        return (await service.call(own, space, service.diff, a, inline=True)).model_dump(mode="json")

    @app.get("/v1/agents/{agent_id}/audit", tags=["agents"])
    async def audit(request: Request, space: str = Depends(agent_of),
                    q: AuditArgs = Depends(query(AuditArgs, ("agent_id",)))) -> Any:
        labels_ok(principal(request), q.allow_sensitive)
        return (await service.call(own, space, service.audit, q, inline=True)).model_dump(mode="json")

    @app.get("/v1/agents/{agent_id}/export", tags=["agents"],
             description="Everything held of the agent's own memories. Complete for an admin key; for any other "
                         "key gated as every read (allow_sensitive). run_id: only what was written in that run.")
    def export(request: Request, space: str = Depends(agent_of),
               allow_sensitive: list[str] | None = Query(None, description=_ALLOW),
               purpose: str | None = Query(None, description=_PURPOSE), run_id: str | None = Run) -> Any:
        from ..sensitivity import check_allow_sensitive, check_purpose

        p = principal(request)
        check_purpose(purpose)  # refused (422) whoever asks, as the user route does
        check_allow_sensitive(allow_sensitive)
        g = granted(request, ProfileArgs, allow_sensitive=None if p.admin else allow_sensitive, purpose=purpose,
                    run_id=run_id)
        with opened(space):
            return service.export(space, complete=p.admin, allow_sensitive=g.allow_sensitive,
                                  purpose=g.purpose or (f"export by admin key {p.key_id}" if p.admin else None),
                                  run_id=g.run_id).model_dump(mode="json")


def agent_route_of(raw_path: str) -> tuple[str, str, str, str] | None:
    """For a raw path ``/v1/users/~agent%2FA/REST`` (an agent's own id, as receipts show it, sent as a user): the
    user id, the agent id, the route that serves it (``/v1/agents/A/REST``) and A as a path segment; else None."""
    from urllib.parse import quote, unquote

    from ledger.agent_spaces import PREFIX

    segment, _, rest = raw_path[len("/v1/users/"):].partition("/")
    user = unquote(segment)
    if not user.casefold().startswith(PREFIX) or len(user) == len(PREFIX):
        return None
    agent = user[len(PREFIX):]
    part = quote(agent, safe="")
    return user, agent, f"/v1/agents/{part}" + (f"/{rest}" if rest else ""), part
