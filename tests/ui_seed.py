"""A user whose memory holds every kind of version the timeline draws, for the UI tests (tests/test_ui_*.py) and
scripts/ui_screenshot.py: superseded, corrected (misreported), retracted, contested, hedged, quarantined and
scheduled versions, a labelled (health) fact, a session with messages, a disclosure, and stored text that is
markup (``<script>``, an ``<img onerror>``), which every page must show as text."""

from __future__ import annotations

from typing import Any

USER = "ana"
XSS_SCRIPT = "<script>window.__xss = 1</script>"
XSS_IMG = '<img src=x onerror="window.__xss = 2">'
XSS_SESSION_TEXT = "<b>bold?</b> <script>window.__xss = 3</script> I had tea"
#: the audit fields of preference.drink v2 (coffee), checked in the audit panel
DRINK_V2 = {"source_ref": "chat-7:turn-3", "session_id": "s1", "actor": "agent-demo", "trace_id": "trace-42"}
CORRECTION_REASON = "misheard: espresso, not coffee"


def seed(ml: Any, user: str = USER) -> dict[str, Any]:
    """Record the demo memory of ``user`` in ``ml``; returns the receipts by name."""
    r: dict[str, Any] = {}
    ml.session_start(user, "s1", task="breakfast planning", observed_at="2024-02-01T08:55:00Z")
    ml.log_message(user, "s1", role="user", message_id="m1", text="These days I drink coffee",
                   observed_at="2024-02-01T09:00:00Z")
    ml.log_message(user, "s1", role="assistant", message_id="m2", text=XSS_SESSION_TEXT,
                   observed_at="2024-02-01T09:00:30Z")
    r["tea"] = ml.assert_fact(user, "preference.drink", "tea", text="I drink tea", observed_at="2024-01-01T09:00:00Z",
                              source_ref="chat-1:turn-1")
    r["coffee"] = ml.assert_fact(user, "preference.drink", "coffee", text="These days I drink coffee",
                                 observed_at="2024-02-01T09:00:00Z", session_id="s1", actor="agent-demo",
                                 trace_id="trace-42", source_ref="chat-7:turn-3")
    r["espresso"] = ml.correct_fact(user, "preference.drink", "espresso", reason=CORRECTION_REASON)
    r["veg"] = ml.assert_fact(user, "diet.type", "vegetarian", text="I am vegetarian",
                              observed_at="2024-03-01T09:00:00Z")
    r["omni"] = ml.assert_fact(user, "diet.type", "omnivore", source="agent_inference",
                               observed_at="2024-03-05T09:00:00Z")
    r["pet"] = ml.assert_fact(user, "pet.name", XSS_SCRIPT, observed_at="2024-01-07T09:00:00Z")
    r["nick"] = ml.assert_fact(user, "profile.nickname", XSS_IMG, observed_at="2024-01-08T09:00:00Z")
    r["pet_retract"] = ml.retract_fact(user, "pet.name", reason="the user asked to forget it")
    r["age"] = ml.assert_fact(user, "profile.age", 130, observed_at="2024-01-09T09:00:00Z")
    r["city"] = ml.assert_fact(user, "residence.city", "Lisbon", text="I think I live in Lisbon now",
                               observed_at="2024-01-10T09:00:00Z")
    r["checkup"] = ml.assert_fact(user, "event.checkup", "dentist", text="Dentist check-up on 9 January 2099",
                                  valid_from="2099-01-09T09:00:00Z")
    r["asthma"] = ml.assert_fact(user, "health.condition", "asthma", text="I have asthma", sensitivity="health")
    ml.record_disclosures(user, [("health.condition", 1, "health")], purpose="test: context for a doctor visit",
                          session_id="s1")
    return r
