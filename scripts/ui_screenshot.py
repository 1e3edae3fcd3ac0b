"""Take the screenshot of docs/timeline.md: a demo user's timeline, written by ``memledger timeline --html`` and
opened offline in the browser the tests use (Debian's /usr/bin/chromium through Playwright, headless).

    .venv/bin/python scripts/ui_screenshot.py [--out docs/timeline.png]

The demo: Maria said she was vegetarian in January; an agent inferred otherwise (contested); in April she said she
eats fish now (a change of mind); a drink was misheard and corrected; a guess, an outlier, a scheduled check-up, a
retracted pet name and a health fact (withheld: no --allow-sensitive) complete the picture. The slider is set to
an instant in March, between two versions, and the March belief's audit is open.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
USER = "maria"


def seed(home: Path) -> str:
    """Record the demo; returns an instant (system time) after everything but the April change of mind, and
    before it."""
    from ledger.timeutil import from_micros, to_micros
    from memledger import MemoryLedger

    with MemoryLedger(home=home, embedder="none") as ml:
        ml.session_start(USER, "chat-12", task="meal planning", observed_at="2024-01-10T18:00:00Z")
        ml.log_message(USER, "chat-12", role="user", message_id="m1", text="I'm vegetarian, no meat please",
                       observed_at="2024-01-10T18:01:00Z")
        ml.log_message(USER, "chat-12", role="assistant", message_id="m2", text="Noted: vegetarian recipes only.",
                       observed_at="2024-01-10T18:01:30Z")
        ml.assert_fact(USER, "diet.type", "vegetarian", text="I'm vegetarian, no meat please",
                       observed_at="2024-01-10T18:01:00Z", session_id="chat-12", source_ref="chat-12:m1",
                       actor="meal-agent", trace_id="trace-7f3a")
        ml.assert_fact(USER, "diet.type", "omnivore", source="agent_inference", observed_at="2024-02-02T12:00:00Z",
                       actor="shopping-agent", reason="bought chicken in a basket")
        ml.assert_fact(USER, "preference.drink", "tea", text="I drink tea", observed_at="2024-01-05T08:00:00Z")
        ml.assert_fact(USER, "preference.drink", "coffee", text="Coffee in the morning",
                       observed_at="2024-02-15T08:00:00Z")
        ml.correct_fact(USER, "preference.drink", "decaf coffee", reason="misheard: decaf, not coffee")
        ml.assert_fact(USER, "residence.city", "Porto", text="I think I'll stay in Porto",
                       observed_at="2024-01-20T10:00:00Z")
        ml.assert_fact(USER, "profile.age", 130, observed_at="2024-01-21T10:00:00Z")
        ml.assert_fact(USER, "pet.name", "Miso", observed_at="2024-01-25T10:00:00Z")
        ml.retract_fact(USER, "pet.name", reason="the user asked to forget it")
        ml.assert_fact(USER, "health.allergy", "penicillin", text="Allergic to penicillin", sensitivity="health",
                       observed_at="2024-01-30T10:00:00Z")
        ml.assert_fact(USER, "event.checkup", "dentist", text="Dentist on 9 January 2099",
                       valid_from="2099-01-09T09:00:00Z")
        march = max(r.recorded_at for r in ml.history(USER))  # everything recorded so far: the March state
        ml.assert_fact(USER, "diet.type", "pescatarian", text="I eat fish now", observed_at="2024-04-03T19:00:00Z",
                       source_ref="chat-31:m4")
        april = ml.history(USER, "diet.type")[-1].recorded_at
        mid = from_micros((to_micros(march) + to_micros(april)) // 2)
    return mid.isoformat(timespec="microseconds").replace("+00:00", "Z")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "timeline.png"))
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "ledger"
        at = seed(home)
        page_file = Path(tmp) / "maria.html"
        env = {**os.environ, "MEMLEDGER_EMBEDDER": "none"}
        subprocess.run([sys.executable, "-m", "memledger", "--home", str(home), "timeline", USER, "--html",
                        str(page_file)], check=True, cwd=ROOT, env=env)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            context = browser.new_context(viewport={"width": 1280, "height": 1180}, offline=True)
            page = context.new_page()
            # the demo was said in early 2024 and is recorded now, so the page would open on observed time; the
            # instant below is one of system time (between two recordings)
            page.goto(page_file.as_uri() + "#axis=system")
            page.fill("#asof-text", at)
            page.press("#asof-text", "Enter")
            page.click('.bar[data-key="diet.type"][data-version="1"]')
            page.evaluate("window.scrollTo(0, 0)")
            page.screenshot(path=args.out)
            browser.close()
    print(f"wrote {args.out} (as believed at {at})")


if __name__ == "__main__":
    main()
