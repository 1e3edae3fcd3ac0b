"""The HTTP routes of entities and relations (docs/relations.md), behind the same API keys as every route:
``POST /v1/users/{user_id}/relations`` (relate), ``POST .../relations/corrections`` (correct_relation), ``POST
.../relations/retractions`` (unrelate), ``GET /v1/users/{user_id}/relations`` (walk, with ``hops``,
``as_of``, ``valid_at``, ``entity``), ``GET /v1/users/{user_id}/entities``, and the identity links: ``POST
/v1/users/{user_id}/identity-links`` (link), ``POST .../identity-links/removals`` (unlink; the key must hold both
ids) and ``GET .../identity-links``. Labelled relations are shown only
when ``allow_sensitive`` asks for the label and the key holds it (403 otherwise), each one shown recorded as a
disclosure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import Depends, FastAPI, Request, Response

from .models import (CorrectRelationBody, EntitiesArgs, IdentityLinkBody, IdentityUnlinkBody, RelateBody, RelationsArgs,
                     UnrelateBody)
from .ops import Service


def add_relation_routes(app: FastAPI, service: Service, *, user_of: Callable[..., str],
                        written: Callable[..., Response], labels_ok: Callable[[Any, Any], None],
                        principal: Callable[[Request], Any], query: Callable[[type], Any],
                        problem: Callable[..., Exception]) -> None:
    """Add the routes to ``app``; the callables are the HTTP module's (``user_of`` checks the key holds the
    path's user, ``written`` sets ``X-Ledger-Position``, ``labels_ok`` checks the key's labels, ``query`` reads a
    model from the query string, ``problem`` makes its problem+json errors)."""

    @app.post("/v1/users/{user_id}/relations", tags=["relations"], status_code=201,
              description="ENTITY is the RELATION_TYPE of the user (or of `of`): a new name creates the entity; "
                          "a single-valued type supersedes the previous entity (docs/relations.md).")
    def relate(body: RelateBody, user_id: str = Depends(user_of)) -> Response:
        r = service.relate(user_id, body)
        return written(r.model_dump(mode="json"), r.position, 201)

    @app.post("/v1/users/{user_id}/relations/corrections", tags=["relations"], status_code=201,
              description="ENTITY is the RELATION_TYPE and the one recorded never was (history keeps it as "
                          "misreported); `was` names the wrong one of a multi-valued type.")
    def correct_relation(body: CorrectRelationBody, user_id: str = Depends(user_of)) -> Response:
        r = service.correct_relation(user_id, body)
        return written(r.model_dump(mode="json"), r.position, 201)

    @app.post("/v1/users/{user_id}/relations/retractions", tags=["relations"], status_code=201,
              description="The relation is withdrawn, or with `valid_to` true only until then (\"Dana left in May\").")
    def unrelate(body: UnrelateBody, user_id: str = Depends(user_of)) -> Response:
        r = service.unrelate(user_id, body)
        return written(r.model_dump(mode="json"), r.position, 201)

    @app.get("/v1/users/{user_id}/relations", tags=["relations"])
    async def relations(request: Request, user_id: str = Depends(user_of),
                        q: RelationsArgs = Depends(query(RelationsArgs))) -> Any:
        labels_ok(principal(request), q.allow_sensitive)
        return (await service.call(service.relations, user_id, q, inline=True)).model_dump(mode="json")

    @app.post("/v1/users/{user_id}/identity-links", tags=["relations"], status_code=201,
              description="The user and `other` are one person (`confirmed`: a search of either also reads the "
                          "other's memories) or may be (`may_be`: shown, merges nothing). The key must hold both.")
    def identity_link(request: Request, body: IdentityLinkBody, user_id: str = Depends(user_of)) -> Response:
        return both_held(request, body, lambda: service.identity_link(user_id, body))

    @app.post("/v1/users/{user_id}/identity-links/removals", tags=["relations"], status_code=201,
              description="The link between the user and `other` is withdrawn in both ledgers (`identity unlink`).")
    def identity_unlink(request: Request, body: IdentityUnlinkBody, user_id: str = Depends(user_of)) -> Response:
        return both_held(request, body, lambda: service.identity_unlink(user_id, body))

    def both_held(request: Request, body: Any, write: Callable[[], Any]) -> Response:
        """An identity link's write, when the key holds the other id too (403 naming ``other`` otherwise)."""
        if not principal(request).allows(body.other):
            raise problem(403, "Forbidden", f"this API key does not hold user {body.other!r} (fix: use a key that "
                          "holds both ids)", field="other")
        r = write()
        return written(r.model_dump(mode="json"), max(x.position for x in r.receipts), 201)

    @app.get("/v1/users/{user_id}/identity-links", tags=["relations"])
    async def identity_links(user_id: str = Depends(user_of)) -> Any:
        return (await service.call(service.identity_links, user_id, inline=True)).model_dump(mode="json")

    @app.get("/v1/users/{user_id}/entities", tags=["relations"])
    async def entities(request: Request, user_id: str = Depends(user_of),
                       q: EntitiesArgs = Depends(query(EntitiesArgs))) -> Any:
        labels_ok(principal(request), q.allow_sensitive)
        return (await service.call(service.entities, user_id, q, inline=True)).model_dump(mode="json")
