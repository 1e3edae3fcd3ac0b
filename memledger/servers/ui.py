"""The browser pages of ``memledger serve http``: ``/ui/users/{user_id}`` (a user's timeline), ``/ui/health`` (the
store's memory health), a sign-in form, and the pages' script and style (docs/timeline.md).

Signing in: the form takes an API key (``memledger keys create``) and keeps it in a cookie that is ``HttpOnly``
(no script reads it), ``SameSite=Strict`` (no other site's page sends it) and scoped to ``Path=/ui``. The cookie
is read by these routes only: ``KeyMiddleware`` authorises ``/v1`` and ``/mcp`` by the ``Authorization`` header
alone, so the cookie never authorises an API call, a write least of all. The pages are read-only: the only
thing they record is a disclosure for each labelled (sensitive) fact they show, as ``context`` does.

A user's page needs a key holding that user; ``/ui/health`` (every user's figures) needs a key holding every user
(an admin key created without ``--user``). Refusals are small HTML pages with the status: 401 (sign in), 403,
404, 410 (an erased user: the page shows the erasure receipt and nothing else), 422 (a malformed user id).
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ledger.errors import BadInput
from ledger.schemas import check_user_id

from .keys import KeyStore, Principal
from .ops import Service

COOKIE = "memledger_ui"
#: the served pages' policy: script, style and everything else from this server only; nothing inline runs
PAGE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'none'; "
            "font-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'")
HEADERS = {"Content-Security-Policy": PAGE_CSP, "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "same-origin", "X-Frame-Options": "DENY", "Cache-Control": "no-store"}
STATIC_TYPES = {"timeline.css": "text/css; charset=utf-8", "timeline.js": "text/javascript; charset=utf-8"}
MAX_FORM = 4096


def is_ui_path(path: str) -> bool:
    """True for the paths this module serves (KeyMiddleware leaves their authentication to them)."""
    return path == "/ui" or path.startswith("/ui/")


def _page(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers=HEADERS)


def _safe_next(raw: str | None) -> str:
    """Where to go after signing in: a path of these pages only (never another site, never ``//host``)."""
    if not raw or not raw.startswith("/ui/") or raw.startswith("//") or "\\" in raw or any(
            ord(c) < 0x21 for c in raw):
        return "/ui/health"
    return raw


def _cross_site(request: Request) -> bool:
    """True if a form post comes from another site's page (its ``Origin`` names another host, or is ``null``, as
    from a sandboxed frame): signing a browser in or out is refused then, so no other page can sign a visitor in
    with a key of its choosing. (The pages' ``Referrer-Policy: same-origin`` keeps browsers sending their real
    origin on their own form posts; ``no-referrer`` would make them send ``null``.)"""
    origin = request.headers.get("origin")
    if not origin or origin == "null":
        return origin == "null"
    return urllib.parse.urlsplit(origin).netloc != request.headers.get("host", "")


def build_ui_router(service: Service, keys: KeyStore) -> APIRouter:
    """The ``/ui`` routes over ``service``'s ledger, authenticating with ``keys`` (left out of the OpenAPI
    document: they are pages, not API)."""
    from ..ui import health_html, user_html
    from ..ui.render import STATIC, login_page, message_page, static_text

    router = APIRouter(include_in_schema=False)

    def to_login(request: Request) -> Response:
        target = urllib.parse.quote(request.url.path, safe="/")
        return RedirectResponse(f"/ui/login?next={target}", status_code=303, headers={"Cache-Control": "no-store"})

    @router.get("/ui/login")
    async def login_form(next: str | None = None) -> Response:
        return _page(login_page(_safe_next(next)))

    @router.post("/ui/login")
    async def login(request: Request) -> Response:
        if _cross_site(request):
            return _page(message_page("Forbidden", "Sign in from this server's own form."), 403)
        raw = await request.body()
        if len(raw) > MAX_FORM:
            return _page(login_page("/ui/health", "The form was too large."), 422)
        form = urllib.parse.parse_qs(raw.decode("utf-8", "replace"), max_num_fields=4)
        secret = (form.get("key") or [""])[0].strip()
        target = _safe_next((form.get("next") or [None])[0])
        p = await service.call(keys.authenticate, secret, inline=True) if secret else None
        if p is None:
            return _page(login_page(target, "That key is unknown, revoked or expired."), 401)
        resp = RedirectResponse(target, status_code=303, headers={"Cache-Control": "no-store"})
        resp.set_cookie(COOKIE, secret, httponly=True, samesite="strict", path="/ui",
                        secure=request.url.scheme == "https")
        return resp

    @router.post("/ui/logout")
    async def logout(request: Request) -> Response:
        if _cross_site(request):
            return _page(message_page("Forbidden", "Sign out from this server's own pages."), 403)
        resp = RedirectResponse("/ui/login", status_code=303, headers={"Cache-Control": "no-store"})
        resp.delete_cookie(COOKIE, path="/ui", httponly=True, samesite="strict")
        return resp

    @router.get("/ui/static/{name}")
    async def static(name: str) -> Response:
        if name not in STATIC:
            return _page(message_page("Not found", "No such file."), 404)
        return Response(static_text(name), media_type=STATIC_TYPES[name],
                        headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"})

    @router.get("/ui/users/{user_id}")
    def user(request: Request, user_id: str) -> Response:
        p = service.run(_authenticate_sync, keys, request.cookies.get(COOKIE))
        if p is None:
            return to_login(request)
        try:
            user_id = check_user_id(user_id)
        except BadInput as exc:
            return _page(message_page("Bad user id", f"{exc.field}: {exc.problem} (fix: {exc.fix})"), 422)
        if not p.allows(user_id):
            return _page(message_page("Forbidden", f"This key does not hold user {user_id!r}."), 403)
        page, view = service.run(user_html, service.ml, user_id, allow_sensitive=sorted(p.allow_sensitive))
        return _page(page, 410 if view["erased"] else 200)

    @router.get("/ui/health")
    def health(request: Request) -> Response:
        p = service.run(_authenticate_sync, keys, request.cookies.get(COOKIE))
        if p is None:
            return to_login(request)
        if not p.all_users:
            return _page(message_page("Forbidden", "The store's health covers every user: sign in with a key "
                                      "holding every user (memledger keys create --admin, without --user)."), 403)
        return _page(service.run(health_html, service.ml))

    @router.get("/ui")
    async def root() -> Response:
        return RedirectResponse("/ui/health", status_code=303)

    return router


def _authenticate_sync(keys: KeyStore, secret: Any) -> Principal | None:
    return keys.authenticate(secret) if secret else None
