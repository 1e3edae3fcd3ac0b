"""``memledger export USER [--json]``: everything held about a user in one document (right of access)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memledger import MemoryLedger
from memledger.erasure import UserExport


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLEDGER_EMBEDDER", "hash")


def populate(ml: MemoryLedger) -> None:
    ml.assert_fact("alice", "preference.drink", "tea", observed_at="2024-01-01T00:00:00Z", session_id="s1")
    ml.assert_fact("alice", "preference.drink", "coffee", observed_at="2024-02-01T00:00:00Z")
    ml.assert_fact("alice", "profile.birth_year", 1990, observed_at="2024-01-02T00:00:00Z")
    ml.correct_fact("alice", "profile.birth_year", 1995, reason="typo")
    ml.assert_fact("alice", "health.condition", "asthma", sensitivity="health", observed_at="2024-01-03T00:00:00Z")
    ml.retract_fact("alice", "health.condition", reason="misheard")
    ml.session_start("alice", "s1", task="plan a trip", observed_at="2024-01-01T00:00:00Z")
    ml.log_message("alice", "s1", role="user", message_id="m1", text="我想去杭州", observed_at="2024-01-01T00:01:00Z")
    ml.update_card("alice", "s1", progress="picked the city", add_decisions=["Hangzhou"])
    ml.summarize("alice", "s1", text="Alice plans a trip to Hangzhou")
    ml.record_disclosures("alice", [("preference.drink", 2, "none")], purpose="test")
    ml.assert_fact("bob", "preference.drink", "water")


def test_export_holds_everything_and_round_trips(fresh_ledger: MemoryLedger) -> None:
    populate(fresh_ledger)
    doc = fresh_ledger.export("alice")
    assert (doc.format, doc.user_id, doc.erased) == ("memledger.export/v1", "alice", False)
    assert {k: f.value for k, f in doc.profile.facts.items()} == {"preference.drink": "coffee",
                                                                  "profile.birth_year": 1995}
    assert [(h.key, h.version, h.kind, h.value, h.reason) for h in doc.history] == [
        ("preference.drink", 1, "asserted", "tea", None),
        ("preference.drink", 2, "asserted", "coffee", None),
        ("profile.birth_year", 1, "asserted", 1990, None),
        ("profile.birth_year", 2, "corrected", 1995, "typo"),
        ("health.condition", 1, "asserted", "asthma", None),
        ("health.condition", 2, "retracted", None, "misheard"),
    ]
    assert [(d.key, d.version, d.purpose) for d in doc.disclosures] == [("preference.drink", 2, "test")]
    [s] = doc.sessions
    assert (s["session_id"], s["task"], s["no_memory"]) == ("s1", "plan a trip", False)
    assert [m["text"] for m in s["messages"]] == ["我想去杭州"]
    assert (s["card"]["progress"], s["card"]["decisions"]) == ("picked the city", ["Hangzhou"])
    assert [x["text"] for x in s["summaries"]] == ["Alice plans a trip to Hangzhou"]
    # Round trip: the JSON document parses back into the same export, field for field.
    text = doc.model_dump_json()
    assert UserExport.model_validate_json(text) == doc
    assert UserExport.model_validate_json(text).model_dump_json() == text
    # Nothing of another user.
    assert "water" not in text and "bob" not in text


def test_cli_export(cli: Any, store_args: dict) -> None:
    cli.json("assert", "alice", "preference.drink", "tea", "--text", "Alice drinks tea")
    cli.json("assert", "bob", "preference.drink", "water")
    doc = cli.json("export", "alice")
    assert UserExport.model_validate(doc).model_dump(mode="json") == doc
    with MemoryLedger(**store_args) as ml:
        same = ml.export("alice").model_dump(mode="json")
    assert {k: v for k, v in doc.items() if k != "exported_at"} == {k: v for k, v in same.items()
                                                                    if k != "exported_at"}
    assert doc["profile"]["facts"]["preference.drink"]["text"] == "Alice drinks tea"
    code, out, _ = cli("export", "alice")
    assert code == 0 and "1 current facts, 1 history events" in out
    code, _, err = cli("export", " alice")
    assert code == 2 and "user_id" in err and "Traceback" not in err
    # a mistyped id is refused, as timeline and erase refuse it, rather than read as a user with an empty memory
    code, out, err = cli("export", "nobody", "--json")
    assert code == 2 and json.loads(err.splitlines()[-1])["error"]["field"] == "user_id" and "nothing is held" in err
    code, out, err = cli("export", "nobody")
    assert code == 2 and "nothing is held about 'nobody'" in err and "Traceback" not in err
