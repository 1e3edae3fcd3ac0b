"""The timeline in a real browser: Playwright driving Debian's Chromium (``/usr/bin/chromium``, headless,
``--no-sandbox``; Playwright's own browser download is never used) against ``memledger serve http`` in a
subprocess, and against the file ``memledger timeline --html`` writes, opened with the network off.

One browser per module, a few pages. Screenshots go to ``$MEMLEDGER_TEST_ARTIFACTS/ui`` (default
``tests/.artifacts/ui``, ignored by git). SQLite only: the view model is tested on both backends
(tests/test_ui_model.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from ledger.timeutil import from_micros, parse_instant, to_micros
from memledger import MemoryLedger
from memledger.servers.keys import APIKeyStore
from memledger.ui.model import iso, user_view
from memledger.ui.render import value_text
from tests.serve_util import ROOT, Server, memledger
from tests.ui_seed import CORRECTION_REASON, DRINK_V2, USER, XSS_IMG, XSS_SCRIPT, XSS_SESSION_TEXT, seed

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(os.environ.get("MEMLEDGER_TEST_ARTIFACTS") or ROOT / "tests" / ".artifacts") / "ui"

#: the page's text against its background, WCAG 2 contrast of every visible text node (the worst ones returned)
CONTRAST_JS = """() => {
  const parse = c => { const m = /rgba?\\(([^)]+)\\)/.exec(c); if (!m) return null;
    const p = m[1].split(',').map(parseFloat); return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1}; };
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); };
  const bg = el => { for (let e = el; e; e = e.parentElement) { const s = getComputedStyle(e);
      const c = parse(s.backgroundColor); if (c && c.a >= 0.99) return c;
      if (c && c.a > 0.01) return null; if (s.backgroundImage !== 'none') return null; }
    return {r: 255, g: 255, b: 255, a: 1}; };
  const out = {checked: 0, low: [], unknown: []};
  const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = w.nextNode(); n; n = w.nextNode()) {
    const el = n.parentElement; if (!n.textContent.trim() || !el) continue;
    const r = el.getBoundingClientRect(); if (!r.width || !r.height) continue;
    if (getComputedStyle(el).visibility === 'hidden') continue;
    const fg = parse(getComputedStyle(el).color), b = bg(el);
    if (!b) { out.unknown.push(n.textContent.slice(0, 40)); continue; }
    const l1 = lum(fg), l2 = lum(b), ratio = (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05);
    out.checked++; if (ratio < 4.5) out.low.push([n.textContent.slice(0, 40), Math.round(ratio * 100) / 100]);
  }
  return out; }"""
CELLS_JS = """() => Object.fromEntries(Array.from(document.querySelectorAll('[data-believed]'))
  .map(c => [c.dataset.believed, c.textContent]))"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Any:
    if not Path(CHROMIUM).exists():
        why = f"{CHROMIUM} is not installed (apt-get install chromium; .ci/run installs it)"
        if os.environ.get("MEMLEDGER_REQUIRE_BROWSER") == "1":  # CI (.ci/run): a missing browser is a failure
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    home = tmp_path_factory.mktemp("ui-browser") / "h"
    with MemoryLedger(home=home, embedder="none") as ml:
        receipts = seed(ml)
        keys = APIKeyStore(ml)
        secret = keys.create([USER]).secret
        admin = keys.create([], admin=True).secret
    server = Server(home, "http")
    pw = sync_playwright().start()
    browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
    try:
        server.wait_ready()
        yield {"home": home, "server": server, "browser": browser, "secret": secret, "admin": admin,
               "receipts": receipts}
    finally:
        browser.close()
        pw.stop()
        server.stop()


def expected_cells(home: Path, at: str, axis: str = "system") -> dict[str, str]:
    """What each row's believed cell must say at ``at``: ``memledger believed`` through the Python API."""
    with MemoryLedger(home=home, embedder="none") as ml:
        facts = ml.believed(USER, as_of=at, axis=axis).facts
        keys = sorted({r.key for r in ml.history(USER)})
        labels = {(r.key, r.version): r.sensitivity for r in ml.history(USER)}
        hedged = {(k["key"], v["version"]) for k in user_view(ml, USER)["keys"] for v in k["versions"]
                  if (v.get("hygiene") or {}).get("hedged")}
    out = {}
    for key in keys:
        f = facts.get(key)
        if f is None:
            out[key] = "nothing believed"
            continue
        label = labels.get((key, f.version))
        shown = value_text({"value": f.value, "withheld": label})
        notes = (", contested" if f.status == "contested" else "") + (
            ", uncertain (hedged)" if (key, f.version) in hedged else "")
        out[key] = f"{shown} (v{f.version}{notes})"
    return out


def open_page(site: Any, fragment: str = "", height: int = 900) -> Any:
    """A fresh context; sign in through the form; the user's page (``fragment``: opened as ``...#fragment``)."""
    context = site["browser"].new_context(viewport={"width": 1280, "height": height})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)  # a 401 favicon, say
    page.goto(site["server"].base + f"/ui/users/{USER}" + (f"#{fragment}" if fragment else ""))
    assert "/ui/login" in page.url
    page.fill("#key", site["secret"])
    page.click("button[type=submit]")
    page.wait_for_url(f"**/ui/users/{USER}" + (f"#{fragment}" if fragment else ""))
    page.errors = errors  # type: ignore[attr-defined]
    return page


def test_rows_slider_audit_and_keyboard(site: Any) -> None:
    page = open_page(site, "axis=system")  # the demo was said in 2024 and recorded now: it opens on observed time
    home = site["home"]
    with MemoryLedger(home=home, embedder="none") as ml:
        keys = sorted({r.key for r in ml.history(USER)})
        order = [key for g in user_view(ml, USER)["groups"] for key in g["keys"]]
    # one row per key, grouped by attribute, the group said to last first
    assert sorted(order) == keys
    assert page.eval_on_selector_all(".row[data-key]", "rs => rs.map(r => r.dataset.key)") == order
    assert page.evaluate("document.cookie") == ""  # HttpOnly: no script reads the key
    page.screenshot(path=str(ARTIFACTS / "timeline-now.png"), full_page=True)

    # the slider from the keyboard: Home, then ArrowRight through every stop; each row equals `believed`
    ticks = json.loads(page.text_content("#ml-data"))["ticks"]
    page.focus("#asof")
    page.keyboard.press("Home")
    drink_seen = []
    for i, at in enumerate(ticks):
        if i:
            page.keyboard.press("ArrowRight")
        assert page.text_content("#asof-out") == at
        cells = page.evaluate(CELLS_JS)
        assert cells == expected_cells(home, at), at
        drink_seen.append(cells["preference.drink"])
    assert {"tea (v1)", "coffee (v2)", "espresso (v3)"} <= set(drink_seen)

    # an exact instant between two versions: half-way between coffee (v2) and its correction (v3)
    r = site["receipts"]
    with MemoryLedger(home=home, embedder="none") as ml:
        rec = {row.version: row.recorded_at for row in ml.history(USER, "preference.drink")}
    mid = iso(from_micros((to_micros(rec[2]) + to_micros(rec[3])) // 2))
    assert r["coffee"].version == 2 and rec[2] < parse_instant(mid, "mid") < rec[3]
    page.fill("#asof-text", mid)
    page.press("#asof-text", "Enter")
    cells = page.evaluate(CELLS_JS)
    assert cells == expected_cells(home, mid)
    assert cells["preference.drink"] == "coffee (v2)"
    assert page.get_attribute('.bar[data-key="preference.drink"][data-version="2"]', "class").split().count("held") == 1
    assert "unrecorded" in page.get_attribute('.bar[data-key="preference.drink"][data-version="3"]', "class")
    contrast = page.evaluate(CONTRAST_JS)
    page.screenshot(path=str(ARTIFACTS / "timeline-between-versions.png"), full_page=True)

    # the bars follow the instant: before coffee was recorded, tea's range was open (to the axis' right edge);
    # now a change of mind has closed it where coffee starts
    def edges(version: int) -> tuple[float, float, float]:
        return page.evaluate("""v => { const b = document.querySelector(
            `.bar[data-key="preference.drink"][data-version="${v}"]`).getBoundingClientRect();
            const t = document.querySelector('.row[data-key="preference.drink"] .track').getBoundingClientRect();
            return [b.left, b.right, t.right]; }""", version)

    page.fill("#asof-text", iso(from_micros(to_micros(rec[2]) - 1)))
    page.press("#asof-text", "Enter")
    assert page.evaluate(CELLS_JS)["preference.drink"] == "tea (v1)"
    _, tea_right, track_right = edges(1)
    assert abs(tea_right - track_right) < 2
    page.fill("#asof-text", iso(rec[3]))
    page.press("#asof-text", "Enter")
    assert page.evaluate(CELLS_JS)["preference.drink"] == "espresso (v3)"
    (_, tea_right, track_right), (coffee_left, _, _) = edges(1), edges(2)
    assert tea_right < track_right - 100 and abs(tea_right - coffee_left) < 25

    # click a version: its audit
    page.click('.bar[data-key="preference.drink"][data-version="2"]')
    audit = page.text_content("#audit-body")
    for value in (*DRINK_V2.values(), "user_statement", "v1: tea", "v3: espresso", CORRECTION_REASON,
                  "2024-02-01T09:00:00.000000Z"):
        assert value in audit, value
    page.screenshot(path=str(ARTIFACTS / "timeline-audit.png"), full_page=True)

    # the bars from the keyboard: Tab to pet.name's version, Enter opens its audit; stored markup is text
    page.focus("#asof-text")
    for _ in range(80):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.dataset.key") == "pet.name":
            break
    else:
        pytest.fail("Tab never reached the pet.name bar")
    page.keyboard.press("Enter")
    assert XSS_SCRIPT in page.text_content("#audit-body")
    assert XSS_IMG in page.text_content('.bar[data-key="profile.nickname"]')
    # the session lane: its messages, markup shown as text
    page.click(".bar.session")
    assert XSS_SESSION_TEXT in page.text_content("#audit-body")
    page.click(".bar.disclosure")
    assert "test: context for a doctor visit" in page.text_content("#audit-body")
    # the observed axis (when it was said), chosen from the keyboard: every stop equals believed --axis observed
    page.focus('input[name="axis"][value="system"]')
    page.keyboard.press("ArrowRight")  # a radio group: the arrow key selects the next choice
    assert page.is_checked('input[name="axis"][value="observed"]')
    observed = json.loads(page.text_content("#ml-data"))["observed_ticks"]
    page.focus("#asof")
    page.keyboard.press("Home")
    for i, at in enumerate(observed):
        if i:
            page.keyboard.press("ArrowRight")
        assert page.text_content("#asof-out") == at
        assert page.evaluate(CELLS_JS) == expected_cells(home, at, "observed"), at
    page.fill("#asof-text", "2024-01-15T00:00:00+01:00")
    page.press("#asof-text", "Enter")
    assert page.evaluate(CELLS_JS)["preference.drink"] == "tea (v1)"
    assert "unsaid" in page.get_attribute('.bar[data-key="preference.drink"][data-version="2"]', "class")
    assert page.evaluate("window.__xss") is None  # no stored markup ever ran
    assert page.errors == []  # type: ignore[attr-defined]
    # WCAG AA: every visible text at least 4.5:1 against its background (bars' stripes are behind opaque labels)
    for result in (contrast, page.evaluate(CONTRAST_JS)):
        assert result["checked"] > 50 and result["low"] == [] and result["unknown"] == [], result
    page.context.close()


def test_the_export_opens_offline_with_the_same_content(site: Any, tmp_path: Path) -> None:
    target = tmp_path / "ana.html"
    proc = memledger(site["home"], "timeline", USER, "--html", str(target))
    assert proc.returncode == 0, proc.stderr
    served = open_page(site)
    offline = open_export(site, target)
    assert offline.requests == [target.as_uri()]  # the file itself; no script, style or font fetched
    rows = ".row[data-key]"
    assert offline.eval_on_selector_all(rows, "rs => rs.map(r => r.dataset.key)") == \
        served.eval_on_selector_all(rows, "rs => rs.map(r => r.dataset.key)")
    with MemoryLedger(home=site["home"], embedder="none") as ml:
        rec = [row.recorded_at for row in ml.history(USER)]
    for p in (offline, served):  # both open on observed time (the demo was said before it was recorded)
        assert p.is_checked('input[name="axis"][value="observed"]')
        p.check('input[name="axis"][value="system"]')
    for at in (iso(rec[1]), iso(from_micros((to_micros(rec[3]) + to_micros(rec[4])) // 2)), iso(rec[-1])):
        for p in (offline, served):
            p.fill("#asof-text", at)
            p.press("#asof-text", "Enter")
        assert offline.evaluate(CELLS_JS) == served.evaluate(CELLS_JS) == expected_cells(site["home"], at)
    for p in (offline, served):
        p.click('.bar[data-key="diet.type"][data-version="1"]')
    assert offline.text_content("#audit-body") == served.text_content("#audit-body")
    assert "contested" in offline.text_content("#audit-body")
    assert offline.evaluate("window.__xss") is None and offline.errors == []
    offline.screenshot(path=str(ARTIFACTS / "timeline-export-offline.png"), full_page=True)
    offline.context.close()
    served.context.close()


def test_health_page(site: Any) -> None:
    context = site["browser"].new_context(viewport={"width": 1000, "height": 900})
    page = context.new_page()
    page.goto(site["server"].base + "/ui/health")
    page.fill("#key", site["admin"])
    page.click("button[type=submit]")
    page.wait_for_url("**/ui/health")
    assert page.locator("svg.spark").count() == 5
    assert page.text_content("#top-conflicts tbody th") == USER
    # every figure and title lies inside its chart (a long one was clipped at the left edge)
    boxes = page.evaluate("""() => Array.from(document.querySelectorAll('svg.spark')).map(svg => {
        const s = svg.getBoundingClientRect();
        return Array.from(svg.querySelectorAll('text')).map(t => { const b = t.getBoundingClientRect();
            return [t.textContent, b.left - s.left, s.right - b.right]; }); }).flat()""")
    assert len(boxes) >= 5 * 8 and all(left >= 0 and right >= 0 for _, left, right in boxes), boxes
    # full width: each chart as wide as the page's main column, not a third of it
    widths = page.evaluate("""() => [document.querySelector('main').clientWidth,
        ...Array.from(document.querySelectorAll('svg.spark')).map(s => s.getBoundingClientRect().width)]""")
    assert all(w >= 0.9 * (widths[0] - 40) for w in widths[1:]), widths
    # ticks on both axes: at least 3 dated instants under each chart and 3 figures beside it, and axis titles
    ticks = page.evaluate("""() => Array.from(document.querySelectorAll('svg.spark')).map(svg => [
        Array.from(svg.querySelectorAll('text.xtick')).map(t => t.textContent),
        Array.from(svg.querySelectorAll('text.ytick')).map(t => t.textContent),
        svg.querySelector('text.xtitle').textContent, svg.querySelector('text.ytitle').textContent])""")
    for xs, ys, xtitle, ytitle in ticks:
        assert len(set(xs)) >= 3 and all(x[:2] == "20" for x in xs), xs
        assert len(ys) >= 3 and ys[0] == "0" and ytitle and xtitle == "when (UTC)", (ys, ytitle)
    assert ticks[0][1][-1] in ("1", "0.2", "0.4", "0.5", "0.6", "0.8")  # a share runs to a round figure
    # a link to each user's timeline, which opens it
    links = page.eval_on_selector_all("#user-links a", "as => as.map(a => [a.textContent, a.getAttribute('href')])")
    assert links == [[USER, f"/ui/users/{USER}"]]
    result = page.evaluate(CONTRAST_JS)
    assert result["checked"] > 10 and result["low"] == [], result
    page.screenshot(path=str(ARTIFACTS / "health.png"), full_page=True)
    page.click("#user-links a")
    page.wait_for_url(f"**/ui/users/{USER}")
    assert page.locator(".row[data-key]").count() == 8
    context.close()



def test_the_view_lives_in_the_address_and_focus_stays_in_sight(site: Any) -> None:
    """``#as_of=...&axis=...`` survives signing in, follows a hash changed on the open page, and is written back
    when the slider moves; a bar focused with Shift+Tab while scrolled is never under the sticky slider panel."""
    ticks_at = "2024-01-15T00:00:00.000000Z"
    page = open_page(site, f"as_of={ticks_at}&axis=observed", height=520)
    assert page.text_content("#asof-out") == ticks_at and page.is_checked('input[name="axis"][value="observed"]')
    assert page.text_content("#axis-word").startswith("observed time")
    assert page.evaluate(CELLS_JS) == expected_cells(site["home"], ticks_at, "observed")
    assert page.evaluate(CELLS_JS)["residence.city"] == "Lisbon (v1, uncertain (hedged))"
    # only the hash changes on the open page: the view follows it
    later = "2024-02-15T00:00:00.000000Z"
    page.evaluate("h => { window.location.hash = h; }", f"as_of={later}&axis=observed")
    page.wait_for_function("at => document.getElementById('asof-out').textContent === at", arg=later)
    assert page.evaluate(CELLS_JS)["preference.drink"] == expected_cells(site["home"], later, "observed")[
        "preference.drink"]
    page.evaluate("() => { window.location.hash = 'axis=system'; }")
    page.wait_for_function("() => document.querySelector('input[value=system]').checked")
    assert page.text_content("#axis-word").startswith("system time")
    # the slider writes the view into the address
    page.focus("#asof")
    page.keyboard.press("End")
    last = json.loads(page.text_content("#ml-data"))["ticks"][-1]
    assert page.evaluate("window.location.hash") == f"#as_of={last}&axis=system"

    # scrolled to the end, Shift+Tab back through every bar: each focused bar is below the sticky panel
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    page.focus(".bar.disclosure")
    assert page.evaluate("window.scrollY") > 200
    seen = 0
    for _ in range(60):
        page.keyboard.press("Shift+Tab")
        where = page.evaluate("""() => { const e = document.activeElement;
            return [e.classList.contains('bar'), e.getBoundingClientRect().top,
                    document.querySelector('.slider').getBoundingClientRect().bottom, e.dataset.key || '',
                    getComputedStyle(e).outlineColor, window.scrollY]; }""")
        if not where[0]:
            break
        seen += 1
        assert where[1] >= where[2], where
        assert where[4] == "rgb(179, 71, 0)"  # the focus ring, not the black ring of the held version
    assert seen >= 10, (seen, where)
    assert page.errors == []  # type: ignore[attr-defined]
    page.context.close()


# -- imported histories: the shipped LoCoMo sample (Jon, said in 2023) and a Chinese user -------------------------
SAMPLE = ROOT / "samples" / "locomo_conv30.json"
CJK_USER = "li"
CJK_MEMORIES = ("我每天早上在公园跑步，然后去公司附近的咖啡馆吃早餐", "周末我常和女儿一起去图书馆看书",
                "我对花生过敏，所以不吃含花生的点心")
#: the timeline's row names: a free-text memory's key is a digest and is never shown as its name
HEX_NAME = r"^(?:\w+\.)*memory\.[0-9a-f]{12}$"
BAR_BOXES_JS = """sel => Array.from(document.querySelectorAll(sel)).map(b => { const r = b.getBoundingClientRect(),
    t = b.closest('.track').getBoundingClientRect(), l = b.querySelector('.t');
    return {left: r.left - t.left, right: r.right - t.left, top: r.top, bottom: r.bottom, track: t.width,
            text: b.textContent, label: b.getAttribute('aria-label'), title: b.getAttribute('title'),
            clipped: l.getBoundingClientRect().right > r.right - 2}; })"""


@pytest.fixture(scope="module")
def imported(site: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The shipped sample ingested as scripts/main_job.sh does it (then Jon's drink: a change of mind and a
    correction), and a Chinese user whose history was said in 2023; both pages written as the export."""
    from memledger.ingest import content_key
    from memledger.ui import user_html

    out = tmp_path_factory.mktemp("ui-imported")
    with MemoryLedger(home=out / "h", embedder="none") as ml:
        ml.ingest(SAMPLE)
        ml.assert_fact("Jon", "preference.drink", "tea", observed_at="2023-01-20T16:04:00Z", source_ref="D1:1")
        ml.assert_fact("Jon", "preference.drink", "coffee", observed_at="2023-03-01T10:00:00Z")
        ml.correct_fact("Jon", "preference.drink", "espresso", reason="misheard: espresso, not coffee")
        ml.session_start(CJK_USER, "微信:2023-05-02", observed_at="2023-05-02T08:00:00Z")
        for i, text in enumerate(CJK_MEMORIES):
            at = f"2023-05-0{2 + 3 * i}T08:0{i}:00Z"
            ml.log_message(CJK_USER, "微信:2023-05-02", role="user", message_id=f"m{i}", text=text, observed_at=at)
            ml.assert_fact(CJK_USER, content_key(text), text, text=text, observed_at=at)
        ml.assert_fact(CJK_USER, "preference.drink", "乌龙茶", text="我只喝乌龙茶", observed_at="2023-04-01T09:00:00Z")
        ml.assert_fact(CJK_USER, "residence.city", "杭州", text="我住在杭州", observed_at="2023-03-01T09:00:00Z")
        pages = {}
        for user in ("Jon", CJK_USER):
            html_text, view = user_html(ml, user, inline=True)
            (out / f"{user}.html").write_text(html_text, encoding="utf-8")
            pages[user] = (out / f"{user}.html", view)
    return pages


def open_export(site: Any, path: Path, height: int = 900) -> Any:
    """The exported page in a fresh offline context; ``page.requests`` lists every request it made."""
    context = site["browser"].new_context(viewport={"width": 1280, "height": height}, offline=True)
    requests: list[str] = []
    context.on("request", lambda req: requests.append(req.url))
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(path.as_uri())
    page.errors = errors  # type: ignore[attr-defined]
    page.requests = requests  # type: ignore[attr-defined]
    return page


def test_an_imported_history_reads_on_an_axis_fitted_to_it(site: Any, imported: Any) -> None:
    path, view = imported["Jon"]
    page = open_export(site, path)
    assert page.requests == [path.as_uri()]  # nothing fetched, the export as ever
    # observed time is the default axis: most of Jon's history was said in 2023 and recorded now
    assert view["default_axis"] == "observed"
    assert page.is_checked('input[name="axis"][value="observed"]')
    assert page.text_content("#axis-word").startswith("observed time")
    assert page.text_content("#asof-out") == view["observed_ticks"][-1]
    assert len(view["observed_ticks"]) > 15  # the stops of 2023, not 5 instants seconds apart
    assert page.get_attribute("#asof", "max") == str(len(view["observed_ticks"]) - 1)
    # the axis spans 2023, where the data is, not up to now and three months on
    labels = page.eval_on_selector_all(".axis-track .tick", "ts => ts.map(t => t.textContent)")
    assert len(labels) == 6 and all(t.startswith("2023-") for t in labels), labels
    data = json.loads(page.text_content("#ml-data"))
    assert data["axis"]["from"].startswith("2023-01") and data["axis"]["span_seconds"] < 200 * 86400
    # the first thing said (2023-01-20) starts near the left edge, the last (2023-07-23) near the right edge
    firsts = sorted((v["bar_from"], k["key"]) for k in view["keys"] for v in k["versions"])
    first_key, last_key = firsts[0][1], firsts[-1][1]
    first = page.evaluate(BAR_BOXES_JS, f'.bar[data-key="{first_key}"][data-version="1"]')[0]
    last = page.evaluate(BAR_BOXES_JS, f'.bar[data-key="{last_key}"][data-version="1"]')[0]
    assert first["left"] < 0.05 * first["track"] and last["left"] > 0.9 * last["track"], (first, last)
    # every bar says what it is to a pointer (title) and to a screen reader (aria-label)
    bars = page.evaluate(BAR_BOXES_JS, ".row[data-key] .bar")
    assert len(bars) == 89 and all(b["label"] and b["title"] == b["label"] for b in bars)
    # a short bar (its words cut off) shows them in a tooltip on hover and on keyboard focus; Escape hides it
    short = next(i for i, b in enumerate(bars) if b["clipped"])
    bar = page.locator(".row[data-key] .bar").nth(short)
    bar.hover()
    assert page.is_visible("#bar-tip") and page.text_content("#bar-tip") == bars[short]["label"]
    tip = page.evaluate("() => document.getElementById('bar-tip').getBoundingClientRect().width")
    assert tip > 200  # readable, not a stub
    page.mouse.move(5, 5)
    assert not page.is_visible("#bar-tip")
    page.focus("#row-filter")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")  # past the filter, through the preference.drink versions, to a short one
    for _ in range(20):
        if page.evaluate("document.activeElement.classList.contains('bar')") and page.evaluate(
                "document.activeElement.getAttribute('aria-describedby') === 'bar-tip'"):
            break
        page.keyboard.press("Tab")
    assert page.is_visible("#bar-tip")
    assert page.text_content("#bar-tip") == page.evaluate("document.activeElement.getAttribute('aria-label')")
    page.keyboard.press("Escape")
    assert not page.is_visible("#bar-tip")
    # the note that observed time is shown first speaks of the default: it goes once the other axis is picked
    assert page.is_visible("#axis-default-note")
    page.check('input[name="axis"][value="system"]')
    assert not page.is_visible("#axis-default-note")
    page.check('input[name="axis"][value="observed"]')
    assert page.is_visible("#axis-default-note")
    page.screenshot(path=str(ARTIFACTS / "imported-jon.png"))
    assert page.errors == []  # type: ignore[attr-defined]
    page.context.close()


def test_an_imported_history_groups_names_and_filters_its_rows(site: Any, imported: Any) -> None:
    import re

    path, view = imported["Jon"]
    page = open_export(site, path)
    rows = page.eval_on_selector_all(".row[data-key]", "rs => rs.map(r => [r.dataset.key, "
                                     "r.querySelector('.key').textContent])")
    assert len(rows) == 87
    # the drink Jon changed his mind about comes first: the latest said; then the free-text memories, latest first
    assert rows[0] == ["preference.drink", "preference.drink"]
    groups = page.eval_on_selector_all(".group", "gs => gs.map(g => [g.dataset.group, g.querySelectorAll("
                                       "'.row[data-key]').length, g.querySelector('h3').textContent])")
    assert groups == [["preference", 1, "preference (1 row)"], ["memory", 86, "free-text memories (86 rows)"]]
    said = {k["key"]: k["last_activity"] for k in view["keys"]}
    assert [said[k] for k, _ in rows[1:]] == sorted((said[k] for k, _ in rows[1:]), reverse=True)
    # named by their words, never by the digest in their key
    assert not [n for _, n in rows if re.match(HEX_NAME, n)]
    banker = next(k["key"] for k in view["keys"] if (k["versions"][0]["text"] or "").startswith(
        "Jon lost his job as a banker"))
    assert dict(rows)[banker] == "Jon lost his job as a banker the\u2026"  # its first 8 words
    # the filter box: a text match on name or value, rows and empty groups hidden, a count said aloud
    page.fill("#row-filter", "ESPRESSO")
    assert page.eval_on_selector_all(".row[data-key]:not([hidden])", "rs => rs.map(r => r.dataset.key)") == [
        "preference.drink"]
    assert page.text_content("#filter-count") == "1 of 87 rows"
    assert page.is_hidden('.group[data-group="memory"]') and page.is_visible('.group[data-group="preference"]')
    page.fill("#row-filter", "dance studio")
    visible = page.eval_on_selector_all(".row[data-key] .key", "ks => ks.filter(k => k.getBoundingClientRect()"
                                        ".height > 0).map(k => k.title)")  # drawn, not only marked hidden
    # every word typed, anywhere in the row (its key, its name, a version's value or text), in any case
    wanted = [k["key"] for k in view["keys"] if all(w in " ".join([k["key"], k["name"]] + [
        f"{v['value']} {v['text']}" for v in k["versions"]]).lower() for w in ("dance", "studio"))]
    assert sorted(visible) == sorted(wanted) and 5 < len(wanted) < 87
    assert page.is_hidden('.group[data-group="preference"]')
    page.screenshot(path=str(ARTIFACTS / "imported-jon-filtered.png"))
    page.fill("#row-filter", "")
    assert page.locator(".row[data-key]:not([hidden])").count() == 87
    assert page.text_content("#filter-count") == "87 of 87 rows"
    # the sessions lane: 19 sessions, each labelled with its short id and its message count, none hiding another
    sessions = page.evaluate(BAR_BOXES_JS, ".bar.session")
    assert len(sessions) == 19
    for s, data in zip(sessions, view["sessions"]):
        n = len(data["messages"])
        assert s["text"] == f"\u25a4 {data['session_id'].split(':')[-1]} \u00b7 {n} messages", s
        assert not s["clipped"] and f"{n} messages" in s["label"] and data["session_id"] in s["label"]
        assert 0 <= s["left"] and s["right"] <= s["track"] + 1
    for i, a in enumerate(sessions):
        for b in sessions[i + 1:]:
            assert a["right"] <= b["left"] or b["right"] <= a["left"] or a["bottom"] <= b["top"] \
                or b["bottom"] <= a["top"], (a["text"], b["text"])
    page.evaluate("document.querySelector('[data-lane-name=sessions]').scrollIntoView()")
    page.screenshot(path=str(ARTIFACTS / "imported-jon-sessions.png"))
    page.click(".bar.session >> nth=0")
    assert page.text_content("#audit-body").startswith("Session conv-30:session_1")
    assert page.errors == []  # type: ignore[attr-defined]
    page.context.close()


def test_a_chinese_history_names_its_rows_in_chinese_on_a_cjk_font_stack(site: Any, imported: Any) -> None:
    path, view = imported[CJK_USER]
    page = open_export(site, path)
    assert view["default_axis"] == "observed" and page.is_checked('input[name="axis"][value="observed"]')
    names = page.eval_on_selector_all(".row[data-key] .key", "ks => ks.map(k => k.textContent)")
    assert set(names) == {"preference.drink", "residence.city", *(t[:48] for t in CJK_MEMORIES)}, names
    assert page.text_content(".bar.session .t") == "\u25a4 2023-05-02 \u00b7 3 messages"
    # the CJK font stack, in every text of the page (a system without any shows boxes: docs/timeline.md)
    stack = ('"Noto Sans CJK SC", "Source Han Sans SC", "PingFang SC", "Microsoft YaHei", "WenQuanYi Micro Hei"')
    for sel in ("body", ".row[data-key] .key.name", ".bar .t", ".row[data-key] .key:not(.name)"):
        assert stack in page.eval_on_selector(sel, "e => getComputedStyle(e).fontFamily"), sel
    page.fill("#row-filter", "乌龙")
    assert page.eval_on_selector_all(".row[data-key]:not([hidden])", "rs => rs.map(r => r.dataset.key)") == [
        "preference.drink"]
    page.fill("#row-filter", "")
    labels = page.eval_on_selector_all(".axis-track .tick", "ts => ts.map(t => t.textContent)")
    assert all(t.startswith("2023-") for t in labels), labels
    contrast = page.evaluate(CONTRAST_JS)
    assert contrast["low"] == [] and contrast["unknown"] == [], contrast
    page.screenshot(path=str(ARTIFACTS / "imported-chinese.png"), full_page=True)
    assert page.errors == []  # type: ignore[attr-defined]
    page.context.close()
