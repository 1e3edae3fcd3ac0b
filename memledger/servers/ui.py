"""The browser pages of ``memledger serve http``: ``/ui/users/{user_id}`` (a user's timeline), ``/ui/health`` (the
store's memory health), a sign-in form, and the pages' script and style (docs/timeline.md).

Signing in: the form takes an API key (``memledger keys create``) and keeps it in a cookie that is ``HttpOnly``
(no script reads it), ``SameSite=Strict`` (no other site's page sends it) and scoped to ``Path=/ui``. The cookie
is read by these routes only: ``KeyMiddleware`` authorises ``/v1`` and ``/mcp`` by the ``Authorization`` header
alone, so the cookie never authorises an API call, a write least of all. The pages are read-only: the only
thing they record is a disclosure for each labelled (sensitive) fact they show, as ``context`` does.

A user's page shows a fact labelled sensitive (health, finance, ...) only when its address asks for the label
(``?allow_sensitive=health&purpose=...``) and the key holds it (403 otherwise); else the fact is drawn "withheld
(health)". ``?agent_id=A&run_id=R`` shows only what that agent wrote / that run held (``timeline --agent/--run``).
A user's page needs a key holding that user; ``/ui/health`` (every user's figures) needs a key holding every user
(an admin key created without ``--user``). An agent's own memories (written without a user) have their page at
their id, ``/ui/users/~agent/A`` (``timeline - --agent A``), for a key holding every user or a key limited to agent
A; a key limited to an agent opens that page and no other (a user's timeline shows every agent's memories of the
user), and signing in with one goes there whatever page asked. Refusals are small HTML pages with the status: 401 (sign in), 403,
404, 410 (an erased user: the page shows the erasure receipt and nothing else), 422 (a malformed user id).
"""

from __future__ import annotations

import contextlib
import posixpath
import urllib.parse
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ledger.agent_spaces import PREFIX, opened, space_of
from ledger.errors import BadInput
from ledger.schemas import check_identifier, check_user_id
from projections.db import request_scope

from ..scopes import check_scope
from ..sensitivity import check_grant
from .keys import APIKeyStore, Principal
from .ops import Service

COOKIE = "memledger_ui"
#: the served pages' policy: script, style and everything else from this server only; nothing inline runs
PAGE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'none'; "
            "font-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'")
HEADERS = {"Content-Security-Policy": PAGE_CSP, "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "same-origin", "X-Frame-Options": "DENY", "Cache-Control": "no-store"}
STATIC_TYPES = {"timeline.css": "text/css; charset=utf-8", "timeline.js": "text/javascript; charset=utf-8"}
MAX_FORM = 4096
DEFAULT_NEXT = "/ui/health"
#: why a key limited to one agent opens no page but its agent's own: a timeline shows every agent's memories of a user
_AGENT_ONLY = ("This key is limited to agent {agent!r}: it opens that agent's own memories' page alone ({own}). The "
               "other pages show every agent's memories of a user, so they need a key with no agent limit (memledger "
               "keys create --user USER).")
#: what a fragment carried through sign-in (``#as_of=...&axis=...``) may hold besides letters and digits
FRAGMENT_SAFE = "=&:+-._~%,"


def is_ui_path(path: str) -> bool:
    """True for the paths this module serves (KeyMiddleware leaves their authentication to them): the pages, and
    ``/favicon.ico``, which browsers ask for unasked and which must not answer 401."""
    return path == "/ui" or path.startswith("/ui/") or path == "/favicon.ico"


def own_page(agent: str) -> str:
    """The path of agent ``agent``'s own memories' page (its id percent-encoded as one path segment)."""
    return f"/ui/users/{urllib.parse.quote(space_of(agent), safe='')}"


def _agent_only(agent: str) -> str:
    return _AGENT_ONLY.format(agent=agent, own=own_page(agent))


def _page(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers=HEADERS)


def _safe_next(raw: str | None) -> str:
    """Where to go after signing in: a path of these pages only (never another site, never ``//host``, never
    ``/ui/../v1``), keeping its fragment (``#as_of=...``); ``/ui/health`` for anything else.

    The path must start with ``/ui`` as sent and once decoded and normalised, and hold no ``.`` or ``..`` segment
    in any spelling (``%2e%2e``): a browser resolves those before it asks, so ``/ui/a%2Fb/../../v1``, which stays
    under ``/ui`` once decoded, would still open ``/v1``. A ``/`` inside a user id travels as ``%2F`` and is kept
    as sent."""
    if not raw or any(ord(c) < 0x21 or c == "\\" for c in raw):
        return DEFAULT_NEXT
    parts = urllib.parse.urlsplit(raw)
    path = parts.path
    decoded = urllib.parse.unquote(path)
    if parts.scheme or parts.netloc or not (path == "/ui" or path.startswith("/ui/")) or "\\" in decoded or any(
            ord(c) < 0x20 for c in decoded):
        return DEFAULT_NEXT
    if any(urllib.parse.unquote(seg) in (".", "..") for seg in path.split("/")):
        return DEFAULT_NEXT
    norm = posixpath.normpath(decoded)
    if not (norm == "/ui" or norm.startswith("/ui/")):
        return DEFAULT_NEXT
    fragment = urllib.parse.quote(parts.fragment, safe=FRAGMENT_SAFE) if parts.fragment else ""
    return path + (f"#{fragment}" if fragment else "")


def _cross_site(request: Request) -> bool:
    """True if a form post comes from another site's page (its ``Origin`` names another host, or is ``null``, as
    from a sandboxed frame): signing a browser in or out is refused then, so no other page can sign a visitor in
    with a key of its choosing. (The pages' ``Referrer-Policy: same-origin`` keeps browsers sending their real
    origin on their own form posts; ``no-referrer`` would make them send ``null``.)"""
    origin = request.headers.get("origin")
    if not origin or origin == "null":
        return origin == "null"
    return urllib.parse.urlsplit(origin).netloc != request.headers.get("host", "")


def build_ui_router(service: Service, keys: APIKeyStore) -> APIRouter:
    """The ``/ui`` routes over ``service``'s ledger, authenticating with ``keys`` (left out of the OpenAPI
    document: they are pages, not API)."""
    from ..ui import health_html, user_html
    from ..ui.render import STATIC, login_page, message_page, static_text

    router = APIRouter(include_in_schema=False)

    def to_login(target: str) -> Response:
        """To the sign-in form, which then returns to ``target`` (a path already percent-encoded)."""
        query = urllib.parse.quote(target, safe="/")
        return RedirectResponse(f"/ui/login?next={query}", status_code=303, headers={"Cache-Control": "no-store"})

    @router.api_route("/favicon.ico", methods=["GET", "HEAD"])
    async def favicon() -> Response:
        # the pages name no icon file (``rel=icon`` is empty data); a browser asking anyway gets no content, not 401
        return Response(status_code=204, headers={"Cache-Control": "max-age=86400"})

    @router.api_route("/ui/login", methods=["GET", "HEAD"])
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
        if getattr(p, "agent", None) is not None and urllib.parse.unquote(
                urllib.parse.urlsplit(target).path) != f"/ui/users/{space_of(p.agent)}":
            target = own_page(p.agent)  # the one page such a key opens: there, not to a page it would be refused
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

    @router.api_route("/ui/static/{name}", methods=["GET", "HEAD"])
    async def static(name: str) -> Response:
        if name not in STATIC:
            return _page(message_page("Not found", "No such file."), 404)
        return Response(static_text(name), media_type=STATIC_TYPES[name],
                        headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"})

    # ``:path``: a user id may hold ``/`` (sent as ``%2F``). The whole rest of the path is the id, compared exactly
    # with the key's users and the ledger's: ``/ui/users/ana%2F..%2Fbo`` is the user ``ana/../bo``, never ``bo``,
    # and no other route (``/ui/health``) is reachable through it.
    @router.api_route("/ui/users/{user_id:path}", methods=["GET", "HEAD"])
    def user(request: Request, user_id: str) -> Response:
        here = f"/ui/users/{urllib.parse.quote(user_id, safe='')}"
        p = service.run(_authenticate_sync, keys, request.cookies.get(COOKIE))
        if p is None:
            return to_login(here)
        own = user_id[len(PREFIX):] if user_id.startswith(PREFIX) else None  # an agent's own memories' id
        if own is not None:
            try:
                own = check_identifier(own, "agent_id")
            except BadInput as exc:
                fix = exc.fix or f"give the agent id after {PREFIX!r} (/ui/users/{PREFIX}A: agent A's own memories)"
                return _page(message_page("Bad user id", f"{exc.field}: {exc.problem} (fix: {fix})"), 422)
            if not p.allows_agent(own):
                why = (f"This key is limited to agent {p.agent!r}, not {own!r}." if p.agent is not None else
                       "This key holds users; an agent's own memories belong to none of them (open them with a key "
                       f"holding every user, or one limited to the agent: memledger keys create --agent {own}).")
                return _page(message_page("Forbidden", why, here), 403)
        elif getattr(p, "agent", None) is not None:  # a user's timeline shows every agent's memories of the user
            return _page(message_page("Forbidden", _agent_only(p.agent), here), 403)
        with opened(space_of(own)) if own is not None else contextlib.nullcontext():
            return _user_page(request, p, user_id, here, own)

    def _user_page(request: Request, p: Principal, user_id: str, here: str, own: str | None) -> Response:
        """The timeline of ``user_id`` (an agent's own memories' id when ``own`` names the agent, its space open)."""
        try:
            user_id = check_user_id(user_id)
        except BadInput as exc:
            return _page(message_page("Bad user id", f"{exc.field}: {exc.problem} (fix: {exc.fix})"), 422)
        if own is None and not p.allows(user_id):
            return _page(message_page("Forbidden", f"This key does not hold user {user_id!r}.", here), 403)
        # labelled facts are shown only when the address asks for their label (?allow_sensitive=health&purpose=...)
        # and the key holds it, as on every read; each one shown is recorded as a disclosure
        try:
            grant = check_grant(request.query_params.getlist("allow_sensitive") or None,
                                request.query_params.get("purpose"))
            # ?agent_id=A&run_id=R: only what that agent wrote / that run held, as timeline --agent / --run
            scope = check_scope(request.query_params.get("agent_id"), request.query_params.get("run_id"))
        except BadInput as exc:
            return _page(message_page("Bad input", f"{exc.field}: {exc.problem} (fix: {exc.fix})", here), 422)
        if own is not None and scope.agent_id not in (None, own):  # the page's agent wrote all of its memories
            return _page(message_page("Bad input", f"agent_id: {scope.agent_id!r} is not the page's agent {own!r} "
                                      "(fix: leave agent_id out: the address names the agent)", here), 422)
        missing = sorted(grant.labels - p.allow_sensitive)
        if missing:
            return _page(message_page("Forbidden", f"This key may not show facts labelled {', '.join(missing)} "
                                      f"(create one with memledger keys create --allow-sensitive {missing[0]}).",
                                      here), 403)
        with request_scope(p.scope):  # the database holds the page to the key's users too
            page, view = service.run(user_html, service.run(service.store_of, user_id), user_id,
                                     allow_sensitive=sorted(grant.labels), purpose=grant.purpose,
                                     agent_id=scope.agent_id, run_id=scope.run_id)
        if scope and not view["erased"] and not view["keys"] and not view["sessions"]:
            return _page(message_page("Not found", f"Nothing of {user_id!r} was written in this scope "
                                      f"({', '.join(f'{k}={v}' for k, v in view['scope'].items())}). Check the "
                                      "agent_id / run_id, or leave them out for the whole timeline.", here), 404)
        if not view["erased"] and not view["keys"] and not view["sessions"] and not view["people"]:
            # a mistyped id would otherwise look like a user whose memory is empty (timeline --html refuses it too)
            return _page(message_page("Not found", f"The ledger holds nothing about {user_id!r}: no fact, "
                                      "session, relation or erasure. Check the user id.", here), 404)
        return _page(page, 410 if view["erased"] else 200)

    @router.api_route("/ui/health", methods=["GET", "HEAD"])
    def health(request: Request) -> Response:
        p = service.run(_authenticate_sync, keys, request.cookies.get(COOKIE))
        if p is None:
            return to_login(DEFAULT_NEXT)
        if getattr(p, "agent", None) is not None:
            return _page(message_page("Forbidden", _agent_only(p.agent), DEFAULT_NEXT), 403)
        if not p.all_users:
            return _page(message_page("Forbidden", "The store's health covers every user: sign in with a key "
                                      "holding every user (memledger keys create --admin, without --user).",
                                      DEFAULT_NEXT), 403)
        if service.heads() is not None:
            return _page(message_page("Not on a shard map", "The health page reads one store; on a shard map open "
                                      "each user's page, or run memledger --shards FILE stats.", DEFAULT_NEXT), 501)
        return _page(service.run(health_html, service.ml))

    @router.api_route("/ui", methods=["GET", "HEAD"])
    async def root() -> Response:
        return RedirectResponse("/ui/health", status_code=303)

    return router


def _authenticate_sync(keys: APIKeyStore, secret: Any) -> Principal | None:
    return keys.authenticate(secret) if secret else None
