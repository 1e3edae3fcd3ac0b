"""What ``/openapi.json`` and ``/docs`` say of the HTTP API beyond FastAPI's defaults.

* **Problem responses.** Every error the API answers is RFC 9457 ``application/problem+json`` with ``field``,
  ``problem`` and ``fix`` (memledger/servers/http.py ``problem_response``). The document lists, on each route, the
  statuses it can answer with that schema (:func:`problem_statuses`), instead of FastAPI's ``HTTPValidationError``
  for 422 alone: a client generated from it, or a checker such as schemathesis, knows every answer.
* **Docs that work offline.** ``/docs`` (Swagger UI) and ``/redoc`` load their scripts, styles and favicon from
  this server (``/docs/static/...``), served from the ``fastapi-offline`` package's copy of the assets: nothing is
  fetched from another host, so the pages work on a machine without internet and leak no request to a CDN.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field

PROBLEM = "application/problem+json"
#: where the Swagger UI and ReDoc assets are served (open without a key, as /docs is)
STATIC_PREFIX = "/docs/static"

#: what each problem status means on this API (the description of each listed response)
STATUS_MEANING = {
    401: "No API key, or an unknown, revoked or expired one (`field`: Authorization).",
    403: "The key does not hold this user, or lacks what the request asks for (admin, a sensitive label).",
    409: "A conflicting concurrent write, an Idempotency-Key reused with another request, or a user moved to "
         "another shard since the position given in `after`.",
    410: "The user was erased: nothing of them can be read or written.",
    413: "The body is larger than the server accepts.",
    422: "Bad input: `field` names what was wrong, `problem` what, `fix` what to send instead (`errors` lists "
         "each field when several were).",
    503: "Not available yet: the projections have not reached the position in `after`, the user is moving "
         "between shards, or the server's shard map is out of date (see Retry-After).",
}


class FieldProblem(BaseModel):
    """One field's problem, when a request had several."""

    field: str
    problem: str


class Problem(BaseModel):
    """An error answer (RFC 9457 problem details), as every error of this API is."""

    type: str = Field(description="A URI naming the kind of problem.")
    title: str
    status: int
    detail: str = Field(description="One sentence: field, problem and fix.")
    field: str | None = Field(description="The request field, header or path part that was wrong, if one was.")
    problem: str = Field(description="What was wrong.")
    fix: str = Field(description="What to send or do instead.")
    errors: list[FieldProblem] | None = Field(default=None, description="Each field's problem (422).")


def problem_statuses(path: str, method: str, open_paths: set[str]) -> list[int]:
    """The problem statuses ``method`` on ``path`` can answer with: none for the open routes (health, the docs);
    401, 403, 409, 422 and 503 for every keyed route; 410 where a user (or an agent's own memories) is named; 413 where a body is sent."""
    if path in open_paths:
        return []
    out = [401, 403, 409, 422, 503]
    if "{user_id}" in path or "{agent_id}" in path:
        out.append(410)
    if method.lower() in ("post", "put", "patch"):
        out.append(413)
    return sorted(out)


def install(app: FastAPI, open_paths: set[str]) -> None:
    """Make ``app``'s OpenAPI document list the problem responses (:func:`problem_statuses`) and serve ``/docs``
    and ``/redoc`` with local assets. Call it after every route is added; create ``app`` with
    ``docs_url=None, redoc_url=None``."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        comps = schema.setdefault("components", {}).setdefault("schemas", {})
        problem = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
        comps.update(problem.pop("$defs", {}))
        comps["Problem"] = problem
        for name in ("HTTPValidationError", "ValidationError"):
            comps.pop(name, None)
        ref = {"$ref": "#/components/schemas/Problem"}
        for path, ops in schema.get("paths", {}).items():
            for method, op in ops.items():
                responses = op.setdefault("responses", {})
                responses.pop("422", None)  # FastAPI's HTTPValidationError: never what this API answers
                for status in problem_statuses(path, method, open_paths):
                    responses[str(status)] = {"description": STATUS_MEANING[status],
                                              "content": {PROBLEM: {"schema": ref}}}
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]

    import fastapi_offline

    static = Path(fastapi_offline.__file__).parent / "static"
    app.mount(STATIC_PREFIX, StaticFiles(directory=static), name="docs-static")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title=f"{app.title} - API docs",
                                   swagger_js_url=f"{STATIC_PREFIX}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{STATIC_PREFIX}/swagger-ui.css",
                                   swagger_favicon_url=f"{STATIC_PREFIX}/favicon.png")

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(openapi_url="/openapi.json", title=f"{app.title} - API reference",
                              redoc_js_url=f"{STATIC_PREFIX}/redoc.standalone.js",
                              redoc_favicon_url=f"{STATIC_PREFIX}/favicon.png", with_google_fonts=False)
