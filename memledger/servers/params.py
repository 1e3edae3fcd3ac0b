"""What each HTTP route takes: its query parameters and body fields, read from FastAPI's dependencies, so a
parameter the route does not take is refused (422) and an unknown field is answered with the route's own fields."""

from __future__ import annotations

from typing import Any

from fastapi import Request

from ledger.errors import BadInput

from .wording import close_name


_CACHE: dict[int, tuple[frozenset[str], frozenset[str]]] = {}


def _fields_of(route: Any) -> tuple[frozenset[str], frozenset[str]]:
    """(query parameter names, body field names) of a route, from its flattened dependencies (cached per route)."""
    if id(route) in _CACHE:
        return _CACHE[id(route)]
    query: set[str] = set()
    body: set[str] = set()
    todo = [route.dependant]
    while todo:  # the route's parameters and those of every dependency it declares
        dep = todo.pop()
        query |= {p.alias for p in dep.query_params}
        for b in dep.body_params:
            body |= set(getattr(b.field_info.annotation, "model_fields", {}) or {})
        todo.extend(dep.dependencies)
    query, body = frozenset(query), frozenset(body)
    _CACHE[id(route)] = (query, body)
    return query, body


def route_fields(request: Request) -> frozenset[str] | None:
    """The query parameters and body fields of the route answering ``request`` (``user_id`` of the path left out),
    or None when no route was matched."""
    route = request.scope.get("route")
    if getattr(route, "dependant", None) is None:
        return None
    query, body = _fields_of(route)
    return (query | body) - {"user_id"}


async def no_unknown_query(request: Request) -> None:
    """Refuse a query parameter the route does not take (422 naming it and the route's parameters): a misspelled
    option (``?kk=5``, ``?half_life=``) would otherwise be ignored and the answer look right."""
    if not request.query_params or not request.url.path.startswith("/v1/"):
        return  # the API's routes; the /ui pages read their own address
    route = request.scope.get("route")
    if getattr(route, "dependant", None) is None:
        return
    known, _ = _fields_of(route)
    for name in request.query_params:
        if name not in known:
            close = [c for c in (close_name(name, known),) if c] or sorted(
                k for k in known if len(name) > 2 and (k.startswith(name) or name.startswith(k)))[:1]
            hint = f"did you mean {close[0]}? " if close else ""
            listed = ", ".join(sorted(known)) or "none"
            raise BadInput(name, "is not a query parameter of this route",
                           f"{hint}remove it; the query parameters are: {listed}")
