"""The timeline's view model and HTML (memledger/ui), on both backends: one entry per key, each version in the
category it is drawn in, the slider's rule equal to ``believed`` at every stop and between stops, stored markup
escaped, sensitive facts withheld unless allowed and each one shown recorded as a disclosure, an erased user
reduced to the erasure receipt, the health series; and ``memledger timeline`` (exit codes, nothing written on bad
input). No browser here: tests/test_ui_browser.py drives one."""

from __future__ import annotations

import html
import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger.timeutil import now_utc, parse_instant, to_micros
from memledger.ui import health_view, user_html, user_view
from memledger.ui.model import believed_at, iso
from memledger.ui.render import json_for_script, user_page
from tests.ui_seed import CORRECTION_REASON, DRINK_V2, USER, XSS_IMG, XSS_SCRIPT, seed


@pytest.fixture
def seeded(fresh_ledger: Any) -> Any:
    seed(fresh_ledger)
    return fresh_ledger


def _categories(view: dict[str, Any]) -> dict[tuple[str, int], str]:
    return {(k["key"], v["version"]): v["category"] for k in view["keys"] for v in k["versions"]}


def test_one_entry_per_key_and_each_version_in_its_category(seeded: Any) -> None:
    view = user_view(seeded, USER)
    keys = [k["key"] for k in view["keys"]]
    assert keys == sorted({r.key for r in seeded.history(USER)})
    assert len(keys) == len(set(keys)) == 8
    cats = _categories(view)
    assert cats[("preference.drink", 1)] == "superseded"
    assert cats[("preference.drink", 2)] == "corrected"
    assert cats[("preference.drink", 3)] == "current"
    assert cats[("pet.name", 1)] == "retracted"
    assert cats[("diet.type", 1)] == "contested"
    assert cats[("diet.type", 2)] == "contesting"
    assert cats[("residence.city", 1)] == "hedged"
    assert cats[("profile.age", 1)] == "quarantined"
    assert cats[("event.checkup", 1)] == "scheduled"
    # a range a correction emptied is drawn where it stood when first recorded, not as nothing
    coffee = next(v for k in view["keys"] if k["key"] == "preference.drink" for v in k["versions"]
                  if v["version"] == 2)
    assert coffee["bar_from"] == "2024-02-01T09:00:00.000000Z" and coffee["bar_to"] is None
    assert coffee["valid_from"] == coffee["valid_to"]  # as known now: empty
    assert {f: coffee[f] for f in DRINK_V2} == DRINK_V2
    espresso = next(v for k in view["keys"] if k["key"] == "preference.drink" for v in k["versions"]
                    if v["version"] == 3)
    assert espresso["reason"] == CORRECTION_REASON and espresso["replaces"] == 2
    # the retraction is an event of pet.name, not a bar
    pet = next(k for k in view["keys"] if k["key"] == "pet.name")
    assert [e["status"] for e in pet["events"]] == ["retracted", "retraction"] and len(pet["versions"]) == 1
    # sessions, messages and the disclosure lane
    assert [s["session_id"] for s in view["sessions"]] == ["s1"]
    assert [m["message_id"] for m in view["sessions"][0]["messages"]] == ["m1", "m2"]
    assert [(d["key"], d["version"], d["sensitivity"]) for d in view["disclosures"]] == [
        ("health.condition", 1, "health")]


def test_a_value_ending_in_the_future_is_current_and_a_closed_one_ended(fresh_ledger: Any) -> None:
    ml = fresh_ledger
    ml.assert_fact("u", "residence.city", "Paris", observed_at="2024-03-01T09:00:00Z")
    ml.assert_fact("u", "residence.city", "Berlin", valid_from="2099-06-01T00:00:00Z")
    ml.assert_fact("u", "pet.kind", "cat", observed_at="2024-03-01T09:00:00Z")
    ml.retract_fact("u", "pet.kind", valid_to="2024-05-01T00:00:00Z")
    view = user_view(ml, "u")
    drawn = {(k["key"], v["value"]): (v["category"], v["word"]) for k in view["keys"] for v in k["versions"]}
    assert drawn == {("residence.city", "Paris"): ("current", "current"),
                     ("residence.city", "Berlin"): ("scheduled", "scheduled"),
                     ("pet.kind", "cat"): ("superseded", "ended")}
    later = user_view(ml, "u", now="2099-07-01T00:00:00Z")  # once Berlin's time has come
    drawn = {(k["key"], v["value"]): v["category"] for k in later["keys"] for v in k["versions"]}
    assert drawn[("residence.city", "Paris")] == "superseded" and drawn[("residence.city", "Berlin")] == "current"


def test_a_forgotten_version_is_drawn_forgotten_without_its_value(fresh_ledger: Any) -> None:
    ml = fresh_ledger
    ml.assert_fact("u", "health.condition", "asthma", text="I have asthma", observed_at="2024-03-01T09:00:00Z")
    ml.assert_fact("u", "health.condition", "none", observed_at="2024-04-01T09:00:00Z")
    ml.forget("u", "health.condition", version=1)
    view = user_view(ml, "u")
    (k,) = view["keys"]
    assert [(v["version"], v["category"], v["value"]) for v in k["versions"]] == [
        (1, "forgotten", None), (2, "current", "none")]
    assert [e["effect"] for e in k["events"]][-1] == "forget"  # in the audit, not a bar
    page = user_page(view, inline=True)
    assert "asthma" not in page and "\u2205 forgotten (shredded): forgotten" in page
    for at in view["ticks"]:
        want = {key: (f.version, f.status) for key, f in ml.believed("u", as_of=at).facts.items()}
        assert {key: (x["version"], x["status"]) for key, x in believed_at(view, at).items()} == want


def test_the_slider_rule_equals_believed_at_every_stop_and_between(seeded: Any) -> None:
    """The rule the page's script applies (mirrored by ``believed_at``) against ``MemoryLedger.believed``: at every
    slider stop, 1 µs before it, and half-way to the next one."""
    view = user_view(seeded, USER)
    ticks = view["ticks"]
    assert len(ticks) >= 10 and ticks == sorted(ticks)
    instants = set(ticks)
    for a, b in zip(ticks, ticks[1:]):
        ua, ub = to_micros(parse_instant(a, "a")), to_micros(parse_instant(b, "b"))
        instants |= {iso(ua - 1), iso((ua + ub) // 2)}
    seen_values = set()
    for at in sorted(instants):
        want = {k: (f.version, f.status) for k, f in seeded.believed(USER, as_of=at).facts.items()}
        got = {k: (x["version"], x["status"]) for k, x in believed_at(view, at).items()}
        assert got == want, at
        seen_values.add(want.get("preference.drink"))
    # the slider passes through tea, coffee and espresso: the drink's three beliefs over system time
    assert {(1, "believed"), (2, "believed"), (3, "believed")} <= seen_values


def test_the_observed_axis_rule_equals_believed_axis_observed(seeded: Any) -> None:
    """The same on the observed axis (when it was said): ``believed --axis observed`` at every stop, 1 µs before it
    and half-way to the next one."""
    seeded.assert_fact(USER, "preference.snack", "nuts", observed_at="2024-06-01T09:00:00Z")
    seeded.assert_fact(USER, "preference.snack", "crisps", observed_at="2024-05-01T09:00:00Z")  # said earlier
    view = user_view(seeded, USER)
    ticks = view["observed_ticks"]
    assert ticks[0] == "2024-01-01T09:00:00.000000Z" and ticks == sorted(ticks)
    instants = set(ticks)
    for a, b in zip(ticks, ticks[1:]):
        ua, ub = to_micros(parse_instant(a, "a")), to_micros(parse_instant(b, "b"))
        instants |= {iso(ua - 1), iso((ua + ub) // 2)}
    drinks = set()
    for at in sorted(instants):
        want = {k: (f.version, f.status) for k, f in seeded.believed(USER, as_of=at, axis="observed").facts.items()}
        got = {k: (x["version"], x["status"]) for k, x in believed_at(view, at, "observed").items()}
        assert got == want, at
        drinks.add(want.get("preference.drink"))
    assert {(1, "believed"), (2, "believed")} <= drinks  # tea in January, coffee from February on


def test_stored_markup_is_escaped_in_the_page_and_its_data(seeded: Any) -> None:
    page, _ = user_html(seeded, USER, inline=True)
    for raw in (XSS_SCRIPT, XSS_IMG, "<b>bold?</b>"):
        assert raw not in page
    assert "&lt;script&gt;window.__xss = 1&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=&quot;window.__xss = 2&quot;&gt;" in page
    # the embedded data: no "<" at all inside the JSON script element, and it parses back to the same text
    data = re.search(r'<script type="application/json" id="ml-data">(.*?)</script>', page, re.S).group(1)
    assert "<" not in data and ">" not in data
    values = [v["value"] for k in json.loads(data)["keys"] for v in k["versions"]]
    assert XSS_SCRIPT in values and XSS_IMG in values
    # exactly two script elements: the data and the page's own script
    assert len(re.findall(r"<script\b", page)) == 2
    assert json_for_script({"t": "</script>\u2028"}) == '{"t":"\\u003c/script\\u003e\\u2028"}'


def test_the_export_fetches_nothing(seeded: Any) -> None:
    page, _ = user_html(seeded, USER, inline=True)
    csp = html.unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1))
    assert "default-src 'none'" in csp and "script-src 'sha256-" in csp and "style-src 'sha256-" in csp
    assert "unsafe" not in csp
    assert not re.search(r'\b(src|href)="(https?:)?//', page)  # no URL of any other place
    assert "/ui/static/" not in page  # script and style are inside the file


def test_sensitive_facts_are_withheld_unless_allowed_and_each_shown_is_a_disclosure(seeded: Any) -> None:
    before = len(seeded.disclosures(USER))
    page, view = user_html(seeded, USER, inline=True)
    asthma = next(v for k in view["keys"] if k["key"] == "health.condition" for v in k["versions"])
    assert asthma["value"] is None and asthma["text"] is None and asthma["withheld"] == "health"
    assert "asthma" not in page and "withheld (health)" in page
    assert len(seeded.disclosures(USER)) == before  # nothing shown, nothing recorded
    page, view = user_html(seeded, USER, allow_sensitive=["health"])
    assert "asthma" in page
    rows = seeded.disclosures(USER)
    assert len(rows) == before + 1
    assert (rows[-1].key, rows[-1].version, rows[-1].sensitivity) == ("health.condition", 1, "health")
    assert rows[-1].purpose == "timeline page (memledger serve http /ui)"


def test_the_page_writes_nothing_when_nothing_sensitive_is_shown(seeded: Any) -> None:
    head = seeded.head()
    user_html(seeded, USER)
    health_view(seeded, points=3)
    assert seeded.head() == head


def test_an_erased_user_shows_the_receipt_and_nothing_else(seeded: Any) -> None:
    receipt = seeded.erase(USER)
    view = user_view(seeded, USER)
    assert view["erased"] and view["keys"] == [] and view["sessions"] == [] and view["disclosures"] == []
    assert view["erasure"]["position"] == receipt.position
    page = user_page(view, inline=True)
    assert "Erasure receipt" in page and str(receipt.position) in page
    for word in ("espresso", "vegetarian", "Lisbon", "ml-data", "id=\"asof\"", "<script"):
        assert word not in page


def test_health_series_and_top_conflicts(seeded: Any) -> None:
    seeded.assert_fact("bo", "diet.type", "vegan", observed_at="2024-03-01T09:00:00Z")
    seeded.assert_fact("bo", "diet.type", "pescatarian", source="agent_inference")
    seeded.assert_fact("bo", "pet.kind", "cat", observed_at="2024-03-01T09:00:00Z")
    seeded.assert_fact("bo", "pet.kind", "dog", source="agent_inference")
    seeded.assert_fact("cy", "preference.drink", "water")
    view = health_view(seeded, points=5)
    series = view["series"]
    # from the first statement (tea, said 2024-01-01T09:00Z) to now, each point memledger stats --now at it
    assert len(series) == 5 and series[0]["at"] == "2024-01-01T09:00:00.000000Z"
    assert [p["at"] for p in series] == sorted(p["at"] for p in series)
    for point in (series[0], series[2], series[-1]):
        s = seeded.stats(now=point["at"])
        assert {k: point[k] for k in ("facts", "freshness_7d", "conflict_rate", "correction_rate_per_1k_messages",
                                      "quarantined", "due")} == {
            "facts": s.facts, "freshness_7d": s.freshness_7d, "conflict_rate": s.conflict_rate,
            "correction_rate_per_1k_messages": s.correction_rate_per_1k_messages, "quarantined": s.quarantined,
            "due": s.due}
    assert series[0]["facts"] == 1 and series[-1]["facts"] > series[0]["facts"]  # only tea had been said
    # at the end: bo holds 2 contested beliefs, ana 1; cy none (users not in conflict are not listed)
    assert [(r["user_id"], r["contested_now"], r["contests_recorded"]) for r in view["top_conflicts"]] == [
        ("bo", 2, 2), ("ana", 1, 1)]
    assert view["users"] == 3
    with pytest.raises(Exception, match="points"):
        health_view(seeded, points=1)


# -- the CLI ---------------------------------------------------------------------------------------------------
def test_cli_timeline_writes_one_self_contained_file(cli: Any, store_args: dict[str, Any], tmp_path: Path) -> None:
    from memledger import MemoryLedger

    with MemoryLedger(**store_args) as ml:
        seed(ml)
        head = ml.head()
    target = tmp_path / "ana.html"
    code, out, err = cli("timeline", USER, "--html", str(target))
    assert code == 0, err
    assert "8 keys" in out and target.is_file()
    page = target.read_text(encoding="utf-8")
    assert page.count('class="row" data-key=') == 8 and "withheld (health)" in page
    assert oct(target.stat().st_mode & 0o777) == "0o600"
    with MemoryLedger(**store_args) as ml:
        assert ml.head() == head  # nothing labelled shown: nothing recorded
    code, out, err = cli("timeline", USER, "--html", str(target), "--allow-sensitive", "health")
    assert code == 0, err
    assert "1 sensitive facts shown" in out and "asthma" in target.read_text(encoding="utf-8")
    with MemoryLedger(**store_args) as ml:
        rows = ml.disclosures(USER)
        assert rows[-1].purpose == "timeline export (memledger timeline --html)"


@pytest.mark.parametrize("args, field", [
    ((), "--html"),
    (("--html", "{missing}/x.html"), "--html"),
    (("--html", "{dir}"), "--html"),
    (("--html", "{file}", "--allow-sensitive", "Health"), "--allow-sensitive"),
    (("--html", "{file}", "--now", "2024-01-01T00:00:00"), "--now"),
])
def test_cli_timeline_bad_input_exits_2_and_writes_nothing(tmp_path: Path, args: tuple[str, ...],
                                                           field: str) -> None:
    """Refused before the store is opened, so one backend is enough."""
    from tests.conftest import CLI

    cli = CLI({"home": tmp_path / "ledger"})
    names = {"missing": str(tmp_path / "nope"), "dir": str(tmp_path), "file": str(tmp_path / "t.html")}
    code, out, err = cli("timeline", USER, *[a.format(**names) for a in args])
    assert code == 2, (out, err)
    assert field in err and "Traceback" not in err
    assert not (tmp_path / "t.html").exists() and not (tmp_path / "nope").exists()
    assert not list(tmp_path.glob(".timeline-*"))


def test_cli_timeline_refuses_a_bad_user(tmp_path: Path) -> None:
    from tests.conftest import CLI

    cli = CLI({"home": tmp_path / "ledger"})
    code, out, err = cli("timeline", "", "--html", str(tmp_path / "t.html"))
    assert code == 2 and "USER" in err and not (tmp_path / "t.html").exists()


def test_the_people_lane_draws_each_relation_over_its_valid_range(fresh_ledger: Any) -> None:
    ml = fresh_ledger
    ml.relate("u1", "manager_of", "Dana", valid_from="2023-01-01T00:00:00Z", observed_at="2023-01-02T00:00:00Z")
    ml.relate("u1", "manager_of", "Omar", valid_from="2024-02-01T00:00:00Z", observed_at="2024-02-02T00:00:00Z")
    ml.relate("u1", "doctor_of", "Dr. Lee", valid_from="2024-03-01T00:00:00Z")
    ml.relate("u1", "lives_in", "Berlin", of="Omar", valid_from="2024-02-01T00:00:00Z")
    view = user_view(ml, "u1")
    people = {(p["relation_type"], p["entity"]): p for p in view["people"]}
    dana, omar = people[("manager_of", "Dana")], people[("manager_of", "Omar")]
    assert (dana["status"], dana["valid_from"], dana["valid_to"]) == ("superseded", "2023-01-01T00:00:00.000000Z",
                                                                      "2024-02-01T00:00:00.000000Z")
    assert (omar["status"], omar["valid_to"]) == ("current", None)
    assert people[("lives_in", "Berlin")]["subject"] == "Omar"
    [doctor] = [p for p in view["people"] if p["relation_type"] == "doctor_of"]
    assert (doctor["entity"], doctor["text"], doctor["withheld"]) == (None, None, "health")
    assert not any(key.startswith("self.doctor_of") for key, _, _ in view["shown"])

    page = user_page(view)
    lane = page[page.index('data-lane-name="people"'):page.index('data-lane-name="disclosures"')]
    assert lane.count('class="bar person') == 4
    assert "manager_of Omar" in lane and "lives_in Berlin of Omar" in lane and "withheld (health)" in lane
    assert "Dr. Lee" not in page

    allowed = user_view(ml, "u1", allow_sensitive={"health"})
    assert [p["entity"] for p in allowed["people"] if p["relation_type"] == "doctor_of"] == ["Dr. Lee"]
    assert [(k.split(".")[1], label) for k, _, label in allowed["shown"]] == [("doctor_of", "health")]


def test_live_history_opens_on_system_time_and_an_imported_one_on_observed(fresh_ledger: Any) -> None:
    ml = fresh_ledger
    ml.assert_fact("live", "preference.drink", "tea")  # said now: recorded as it was said
    ml.assert_fact("live", "residence.city", "Oslo", observed_at=iso(now_utc() - timedelta(minutes=5)))
    assert user_view(ml, "live")["default_axis"] == "system"
    for day in ("2023-01-02", "2023-02-03"):  # said in 2023, imported today
        ml.assert_fact("old", f"note.d{day[-2:]}", day, observed_at=f"{day}T09:00:00Z")
    ml.assert_fact("old", "preference.drink", "coffee")
    view = user_view(ml, "old")
    assert view["default_axis"] == "observed"
    page = user_page(view)
    assert re.search(r'value="observed" checked', page) and not re.search(r'value="system" checked', page)
    assert f'id="asof-out" for="asof">{view["observed_ticks"][-1]}<' in page


def test_free_text_memories_are_named_by_their_words_and_rows_grouped_latest_first(fresh_ledger: Any) -> None:
    from memledger.ingest import content_key

    ml = fresh_ledger
    long_text = "Jon lost his job as a banker the day before the conversation."
    chinese = "我每天早上在公园跑步，然后去公司附近的咖啡馆吃早餐，再坐地铁去上班，晚上回家给女儿讲故事，周末和家人一起去西湖边散步喝茶"
    ml.assert_fact("u", content_key(long_text), long_text, text=long_text, observed_at="2023-01-20T16:04:00Z")
    ml.assert_fact("u", content_key(chinese), chinese, text=chinese, observed_at="2023-05-01T08:00:00Z")
    ml.assert_fact("u", "diet.type", "vegan", observed_at="2023-02-01T08:00:00Z")
    ml.assert_fact("u", "preference.drink", "tea", observed_at="2023-01-01T08:00:00Z")
    ml.assert_fact("u", "preference.food", "rice", observed_at="2023-03-01T08:00:00Z")
    view = user_view(ml, "u")
    names = {k["key"]: k["name"] for k in view["keys"]}
    assert names[content_key(long_text)] == "Jon lost his job as a banker the\u2026"
    assert names[content_key(chinese)] == chinese[:48] + "\u2026"
    assert names["diet.type"] == "diet.type"
    assert [(g["group"], g["keys"]) for g in view["groups"]] == [
        ("memory", [content_key(chinese), content_key(long_text)]),
        ("preference", ["preference.food", "preference.drink"]), ("diet", ["diet.type"])]
    page = user_page(view)
    assert page.index('data-key="preference.food"') < page.index('data-key="preference.drink"') < page.index(
        'data-key="diet.type"')
    assert f'title="{content_key(long_text)}">Jon lost his job as a banker the\u2026</span>' in page


def test_the_axis_fits_the_data_and_reaches_now_only_when_the_data_does() -> None:
    from memledger.ui.render import AXIS_MARGIN, Axis

    old = Axis(["2023-01-20T00:00:00.000000Z", "2023-07-23T00:00:00.000000Z", None,
                "2099-01-01T00:00:00.000000Z"], "2026-12-07T00:00:00.000000Z")
    span = (parse_instant("2023-07-23T00:00:00Z", "t") - parse_instant("2023-01-20T00:00:00Z", "t")).total_seconds()
    assert abs(old.hi_s - span * (1 + 2 * AXIS_MARGIN)) < 1
    assert 2 < old.pct("2023-01-20T00:00:00.000000Z") < 4 and 96 < old.pct("2023-07-23T00:00:00.000000Z") < 98
    assert old.pct("2026-12-07T00:00:00.000000Z") == 100.0 and old.pct(None) == 100.0
    assert [t for _, t in old.labels()][0].startswith("2023-01") and all(
        t.startswith("2023-") for _, t in old.labels())
    live = Axis(["2026-06-01T00:00:00.000000Z", "2026-11-30T00:00:00.000000Z"], "2026-12-07T00:00:00.000000Z")
    assert 96 < live.pct("2026-12-07T00:00:00.000000Z") < 98  # a live user's rows run to today
    burst = Axis(["2026-12-07T00:00:00.000000Z", "2026-12-07T00:00:05.000000Z"], "2026-12-07T00:00:06.000000Z")
    assert ":" in burst.labels()[0][1]  # seconds apart: the ticks tell the time of day
    minutes = Axis(["2026-12-07T10:00:00.000000Z", "2026-12-07T10:03:00.000000Z"], "2026-12-07T10:04:00.000000Z")
    shown = [t for _, t in minutes.labels()]
    assert len(set(shown)) == len(shown) and shown[1].count(":") == 2  # minutes apart: seconds, no two alike
    assert shown[0].startswith("2026-12-07 ")  # and the first tick says which day
    fast = Axis(["2026-12-07T10:00:00.000000Z", "2026-12-07T10:00:00.300000Z"], "2026-12-07T10:00:00.400000Z")
    shown = [t for _, t in fast.labels()]
    assert len(set(shown)) == len(shown) and "." in shown[1]  # versions 0.3 s apart: milliseconds
    days = Axis(["2026-12-06T00:00:00.000000Z", "2026-12-07T00:00:00.000000Z"], "2026-12-07T00:00:00.000000Z")
    assert [t for _, t in days.labels()][0].count(":") == 1  # hours apart: the minute is enough


def test_a_version_replaced_within_a_second_is_drawn_wide_enough_to_see() -> None:
    from memledger.ui.render import MIN_BAR, _lanes

    assert MIN_BAR >= 1.0
    assert _lanes([(10.0, 10.01), (10.5, 10.51)]) == [0, 1]  # two slivers that would overlap once widened


def test_health_ticks_are_round_and_every_user_is_listed(seeded: Any) -> None:
    from memledger.ui import health_html
    from memledger.ui.render import nice_ticks

    assert nice_ticks(0.37, False) == [0, 0.1, 0.2, 0.3, 0.4]
    assert nice_ticks(1.0, False) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(1, True) == [0, 1, 2] and nice_ticks(0, True) == [0, 1, 2]
    assert nice_ticks(1234, True) == [0, 500, 1000, 1500]
    seeded.assert_fact("Jon/Gina", "preference.drink", "tea")
    page = health_html(seeded, points=4)
    assert health_view(seeded, points=4)["user_ids"] == ["Jon/Gina", USER]
    assert '<ul class="users" id="user-links"><li><a href="/ui/users/Jon%2FGina">Jon/Gina</a></li><li><a ' \
           f'href="/ui/users/{USER}">{USER}</a></li></ul>' in page
    assert page.count('class="xtick"') >= 5 * 3 and page.count('class="ytick"') >= 5 * 3
