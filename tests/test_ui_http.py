"""The ``/ui`` routes of ``memledger serve http`` (in process, FastAPI's TestClient; SQLite): sign-in by form into
an HttpOnly, SameSite=Strict cookie scoped to /ui that never authorises the API; a user's page only with a key
holding the user; the health page only with a key holding every user; an erased user's page is the receipt (410);
the page and its assets come from this server only; bad input is 4xx, never 5xx; GETs record nothing."""

from __future__ import annotations

import logging
import re
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from memledger import MemoryLedger
from memledger.servers.http import create_app
from memledger.servers.keys import APIKeyStore
from memledger.servers.ops import Service
from tests.ui_seed import USER, XSS_SCRIPT, seed

#: a user id that is markup and a path with a query and a fragment: its link must open this user and no other
ODD = '"><img src=x onerror=alert(1)>/../x?y#z'
SLASHED = "Jon/../Gina"


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Any:
    home = tmp_path_factory.mktemp("ui-http") / "h"
    ml = MemoryLedger(home=home, embedder="none")
    seed(ml)
    ml.assert_fact("bo", "preference.drink", "water")
    ml.assert_fact("gone", "preference.drink", "milk")
    ml.erase("gone")
    for uid in (ODD, "x", "Gina"):  # a dispute each, so ODD is listed on the health page
        ml.assert_fact(uid, "diet.type", "vegetarian")
        ml.assert_fact(uid, "diet.type", "omnivore", source="agent_inference")
    ml.assert_fact(SLASHED, "preference.drink", "juice")
    keys = APIKeyStore(ml)
    secrets = {
        "ana": keys.create([USER]).secret,
        "ana_health": keys.create([USER], allow_sensitive=["health"]).secret,
        "bo": keys.create(["bo"]).secret,
        "gone": keys.create([], admin=True).secret,  # holds every user, the erased one included
        "admin": keys.create([], admin=True).secret,
    }
    app = create_app(Service(ml), mcp=False)
    with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
        yield {"ml": ml, "keys": secrets, "client": client}
    ml.close()


def signed_in(ui: Any, who: str) -> TestClient:
    c = TestClient(ui["client"].app, base_url="http://127.0.0.1", follow_redirects=False)
    r = c.post("/ui/login", content=f"key={ui['keys'][who]}&next=/ui/users/{USER}",
               headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 303, r.text
    return c


def test_sign_in_sets_a_strict_httponly_cookie_for_ui_only(ui: Any) -> None:
    c = ui["client"]
    r = c.get(f"/ui/users/{USER}")
    assert r.status_code == 303 and r.headers["location"] == f"/ui/login?next=/ui/users/{USER}"
    form = c.get(r.headers["location"])
    assert form.status_code == 200 and 'type="password"' in form.text and 'name="key"' in form.text
    bad = c.post("/ui/login", content="key=mlk_000000000000_nope-nope-nope-nope-nope&next=/ui/health",
                 headers={"content-type": "application/x-www-form-urlencoded"})
    assert bad.status_code == 401 and "set-cookie" not in bad.headers
    r = c.post("/ui/login", content=f"key={ui['keys']['ana']}&next=/ui/users/{USER}",
               headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 303 and r.headers["location"] == f"/ui/users/{USER}"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith("memledger_ui=mlk_")
    parts = {p.strip().split("=")[0].lower(): p.strip() for p in cookie.split(";")}
    assert "httponly" in parts and parts["samesite"].lower() == "samesite=strict" and parts["path"] == "Path=/ui"


def test_next_never_leaves_the_ui(ui: Any) -> None:
    for target in ("//evil.example/x", "https://evil.example/", "/v1/users/ana/profile", "/ui/\\evil"):
        r = ui["client"].post("/ui/login", content=f"key={ui['keys']['ana']}&next={target}",
                              headers={"content-type": "application/x-www-form-urlencoded"})
        assert r.status_code == 303 and r.headers["location"] == "/ui/health", target


def test_another_sites_page_cannot_sign_a_browser_in_or_out(ui: Any) -> None:
    form = {"content-type": "application/x-www-form-urlencoded"}
    for origin in ("https://evil.example", "null"):
        r = ui["client"].post("/ui/login", content=f"key={ui['keys']['ana']}&next=/ui/health",
                              headers={**form, "origin": origin})
        assert r.status_code == 403 and "set-cookie" not in r.headers, origin
        assert signed_in(ui, "ana").post("/ui/logout", headers={"origin": origin}).status_code == 403
    same = ui["client"].post("/ui/login", content=f"key={ui['keys']['ana']}&next=/ui/health",
                             headers={**form, "origin": "http://127.0.0.1"})
    assert same.status_code == 303 and "memledger_ui=" in same.headers["set-cookie"]


def test_the_cookie_never_authorises_the_api(ui: Any) -> None:
    c = signed_in(ui, "ana")
    head = ui["ml"].head()
    assert c.cookies.get("memledger_ui")
    for method, path, body in (("POST", f"/v1/users/{USER}/facts/preference.drink", {"value": "intruder"}),
                               ("POST", f"/v1/users/{USER}/memories", {"text": "I moved to Mars"}),
                               ("GET", f"/v1/users/{USER}/profile", None)):
        # the cookie is Path=/ui: send it explicitly, as a forged request could
        r = c.request(method, path, json=body, headers={"cookie": f"memledger_ui={ui['keys']['ana']}"})
        assert r.status_code == 401, (path, r.text)
    assert ui["ml"].head() == head


def test_a_users_page_needs_a_key_holding_the_user(ui: Any) -> None:
    r = signed_in(ui, "bo").get(f"/ui/users/{USER}")
    assert r.status_code == 403 and "does not hold user" in r.text
    ok = signed_in(ui, "ana").get(f"/ui/users/{USER}")
    assert ok.status_code == 200 and ok.headers["content-type"].startswith("text/html")
    assert ok.text.count('class="row" data-key=') == 8
    assert "&lt;script&gt;window.__xss = 1&lt;/script&gt;" in ok.text and XSS_SCRIPT not in ok.text


def test_the_page_and_its_assets_come_from_this_server_only(ui: Any) -> None:
    c = signed_in(ui, "ana")
    r = c.get(f"/ui/users/{USER}")
    csp = r.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp and "unsafe" not in csp
    assert r.headers["x-content-type-options"] == "nosniff" and r.headers["cache-control"] == "no-store"
    srcs = re.findall(r'(?:src|href)="([^"]+)"', r.text)
    assert set(srcs) == {"/ui/static/timeline.css", "/ui/static/timeline.js", "#rows", "data:,"}
    for path in ("/ui/static/timeline.css", "/ui/static/timeline.js"):
        asset = c.get(path)
        assert asset.status_code == 200 and len(asset.text) > 1000
        assert "http://" not in asset.text and "https://" not in asset.text and "@import" not in asset.text
    assert c.get("/ui/static/..%2Fmodel.py").status_code == 404
    assert c.get("/ui/static/nothing.js").status_code == 404


def test_reading_the_page_records_nothing_but_disclosures(ui: Any) -> None:
    ml = ui["ml"]
    head = ml.head()
    page = signed_in(ui, "ana").get(f"/ui/users/{USER}")
    assert "withheld (health)" in page.text and "asthma" not in page.text
    assert ml.head() == head
    before = len(ml.disclosures(USER))
    page = signed_in(ui, "ana_health").get(f"/ui/users/{USER}")  # the label not asked for: still withheld
    assert "withheld (health)" in page.text and "asthma" not in page.text
    assert len(ml.disclosures(USER)) == before
    page = signed_in(ui, "ana_health").get(f"/ui/users/{USER}?allow_sensitive=health")
    assert "asthma" in page.text
    rows = ml.disclosures(USER)
    assert len(rows) == before + 1 and rows[-1].purpose == "timeline page (memledger serve http /ui)"


def test_an_erased_user_shows_the_receipt(ui: Any) -> None:
    r = signed_in(ui, "gone").get("/ui/users/gone")
    assert r.status_code == 410 and "Erasure receipt" in r.text and "milk" not in r.text


def test_health_needs_a_key_holding_every_user(ui: Any) -> None:
    assert signed_in(ui, "ana").get("/ui/health").status_code == 403
    r = signed_in(ui, "admin").get("/ui/health")
    assert r.status_code == 200
    for metric in ("freshness_7d", "conflict_rate", "correction_rate_per_1k_messages", "quarantined", "due"):
        assert f'id="metric-{metric}"' in r.text
    top = re.search(r'<table class="numbers" id="top-conflicts">.*?</table>', r.text, re.S).group(0)
    assert f'href="/ui/users/{USER}"' in top and 'href="/ui/users/bo"' not in top


@pytest.mark.parametrize("path", ["/ui/users/%20", "/ui/users/" + "x" * 300, "/ui/users/a%00b"])
def test_bad_user_ids_are_4xx(ui: Any, path: str) -> None:
    r = signed_in(ui, "admin").get(path)
    assert 400 <= r.status_code < 500, (path, r.status_code, r.text[:200])


def test_logout_clears_the_cookie(ui: Any) -> None:
    c = signed_in(ui, "ana")
    r = c.post("/ui/logout")
    assert r.status_code == 303 and 'memledger_ui=""' in r.headers["set-cookie"]
    assert c.get(f"/ui/users/{USER}").status_code == 303


def test_package_data_lists_the_static_files() -> None:
    """A fresh ``pip install`` ships the script and style (pyproject's package-data covers every static file)."""
    import tomllib

    root = Path(__file__).resolve().parent.parent
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["memledger.ui"]
    static = sorted(p.name for p in (root / "memledger" / "ui" / "static").iterdir())
    assert static == ["timeline.css", "timeline.js"]
    assert all(any(Path(name).match(g.split("/")[-1]) for g in globs) for name in static)


def form_post(c: TestClient, body: str) -> Any:
    return c.post("/ui/login", content=body, headers={"content-type": "application/x-www-form-urlencoded"})


def test_health_links_percent_encode_the_user_id_and_open_that_user(ui: Any) -> None:
    c = signed_in(ui, "admin")
    page = c.get("/ui/health").text
    href = "/ui/users/" + urllib.parse.quote(ODD, safe="")
    assert f'href="{href}"' in page and "<img src=x" not in page
    # what a browser does with the attribute: unescape it, resolve it against the page; it stays this user's page
    resolved = urllib.parse.urljoin("http://127.0.0.1/ui/health", href)
    assert urllib.parse.urlsplit(resolved).path == href and "#" not in resolved and "?" not in resolved
    r = c.get(href)
    assert r.status_code == 200 and 'data-key="diet.type"' in r.text
    assert re.search(r'<span class="user">(.*?)</span>', r.text).group(1) == ODD.replace('"', "&quot;").replace(
        ">", "&gt;").replace("<", "&lt;")


def test_a_user_id_holding_a_slash_opens_and_never_reaches_another_user_or_route(ui: Any) -> None:
    admin = signed_in(ui, "admin")
    r = admin.get("/ui/users/Jon%2F..%2FGina")
    assert r.status_code == 200 and "juice" in r.text and "vegetarian" not in r.text
    # the segments after /ui/users/ are the id, compared exactly: never Gina, bo or the health page
    r = admin.get("/ui/users/ana%2F..%2Fbo")
    assert r.status_code == 404 and "water" not in r.text and "holds nothing about" in r.text
    r = admin.get("/ui/users/x%2F..%2F..%2Fhealth")
    assert r.status_code == 404 and "metric-" not in r.text
    r = signed_in(ui, "ana").get(f"/ui/users/{USER}%2F..%2Fbo")
    assert r.status_code == 403 and "water" not in r.text
    # signed out: sent to the form, which returns to the same encoded path
    fresh = TestClient(ui["client"].app, base_url="http://127.0.0.1", follow_redirects=False)
    r = fresh.get("/ui/users/Jon%2F..%2FGina")
    assert r.status_code == 303 and r.headers["location"] == "/ui/login?next=/ui/users/Jon%252F..%252FGina"
    form = fresh.get(r.headers["location"]).text
    assert 'name="next" value="/ui/users/Jon%2F..%2FGina"' in form
    back = form_post(fresh, f"key={ui['keys']['admin']}&next=" + urllib.parse.quote("/ui/users/Jon%2F..%2FGina"))
    assert back.status_code == 303 and back.headers["location"] == "/ui/users/Jon%2F..%2FGina"


@pytest.mark.parametrize("target", ["/ui/../v1/health", "/ui/%2e%2e/v1/health", "/ui/%2E%2E/v1", "/ui/.%2e/v1",
                                    "/ui/./../v1", "/ui/a%2Fb/../../v1", "/ui\\..\\v1", "/ui/%5C..%5Cv1",
                                    "/ui/users/a/../../../v1", "/uix", "%2Fui/health", "/ui/users/..",
                                    "/ui/%0d%0aSet-Cookie:x=1"])
def test_next_is_normalised_and_kept_under_ui(ui: Any, target: str) -> None:
    r = form_post(ui["client"], f"key={ui['keys']['ana']}&next={urllib.parse.quote(target)}")
    assert r.status_code == 303 and r.headers["location"] == "/ui/health", target


def test_next_keeps_its_fragment(ui: Any) -> None:
    r = form_post(ui["client"], f"key={ui['keys']['ana']}&next=" +
                  urllib.parse.quote(f"/ui/users/{USER}#as_of=2024-03-01T00:00:00Z&axis=observed"))
    assert r.headers["location"] == f"/ui/users/{USER}#as_of=2024-03-01T00:00:00Z&axis=observed"


def test_an_unknown_user_is_404_saying_the_ledger_holds_nothing(ui: Any) -> None:
    r = signed_in(ui, "admin").get("/ui/users/Nobody")
    assert r.status_code == 404 and "holds nothing about &#x27;Nobody&#x27;" in r.text
    assert signed_in(ui, "ana").get("/ui/users/Nobody").status_code == 403  # not told whether it exists


def test_head_favicon_and_the_refusals_sign_in_link(ui: Any) -> None:
    c = signed_in(ui, "ana")
    assert c.head(f"/ui/users/{USER}").status_code == 200
    assert c.head("/ui/login").status_code == 200 and c.head("/ui/static/timeline.js").status_code == 200
    fav = ui["client"].get("/favicon.ico")
    assert fav.status_code == 204 and ui["client"].head("/favicon.ico").status_code == 204
    refused = c.get("/ui/users/bo")
    assert refused.status_code == 403 and 'href="/ui/login?next=/ui/users/bo"' in refused.text
    health = c.get("/ui/health")
    assert health.status_code == 403 and 'href="/ui/login?next=/ui/health"' in health.text


def test_the_log_names_the_ui_routes(ui: Any, caplog: pytest.LogCaptureFixture) -> None:
    c = signed_in(ui, "ana")
    with caplog.at_level(logging.INFO, logger="memledger.http"):
        c.get(f"/ui/users/{USER}")
        c.get("/ui/health")
        c.get("/ui/static/timeline.css")
    lines = [r.getMessage() for r in caplog.records if r.name == "memledger.http"]
    assert lines[0].startswith("GET /ui/users/{user_id:path} 200") and USER not in lines[0]
    assert lines[1].startswith("GET /ui/health 403") and lines[2].startswith("GET /ui/static/{name} 200")


def test_y_axis_figures_are_short() -> None:
    from memledger.ui.render import axis_figure

    assert [axis_figure(x) for x in (1.3514, 0.05, 1, 57.25, 1234.5)] == ["1.35", "0.05", "1", "57.2", "1234"]


def test_dot_user_ids_get_no_link_a_browser_would_resolve_away() -> None:
    from memledger.ui.render import health_page, user_path

    assert user_path(".") is None and user_path("..") is None and user_path("a/..") == "/ui/users/a%2F.."
    page = health_page({"generated_at": "2024-01-01T00:00:00Z", "users": 1, "series": [],
                        "top_conflicts": [{"user_id": "..", "contested_now": 1, "beliefs_now": 1,
                                           "contests_recorded": 1}]})
    assert '<th scope="row">.. <span class="none">(memledger timeline)</span></th>' in page
    assert 'href="/ui/users/.."' not in page
