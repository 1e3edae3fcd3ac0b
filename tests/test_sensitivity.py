"""Sensitivity labels: context leaves labelled facts out unless the caller allows the label, and every
inclusion of one is recorded (``SensitiveFactIncluded``) and shown by ``export``."""

from __future__ import annotations

from typing import Any

import pytest

from memledger import MemoryLedger

NOW = "2024-05-01T00:00:00Z"


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLEDGER_EMBEDDER", "hash")


def populate(ml: MemoryLedger) -> None:
    ml.assert_fact("alice", "health.condition", "asthma", text="Alice has asthma", sensitivity="health",
                   observed_at="2024-01-01T00:00:00Z")
    ml.assert_fact("alice", "finance.salary", 90000, text="Alice earns 90000 a year", sensitivity="finance",
                   observed_at="2024-01-02T00:00:00Z")
    ml.assert_fact("alice", "preference.drink", "tea", text="Alice likes tea", observed_at="2024-01-03T00:00:00Z")


def profile_lines(ctx: Any) -> list[str]:
    return next(s.lines for s in ctx.sections if s.name == "profile")


def disclosures(ml: MemoryLedger, user: str = "alice") -> list[tuple[str, int, str, str | None]]:
    return [(d.key, d.version, d.sensitivity, d.purpose) for d in ml.disclosures(user)]


def test_labelled_facts_left_out_by_default(fresh_ledger: MemoryLedger) -> None:
    populate(fresh_ledger)
    ctx = fresh_ledger.context("alice", now=NOW)
    assert profile_lines(ctx) == ["- Alice likes tea (2024-01-03, the user said)"]
    assert "asthma" not in ctx.text and "90000" not in ctx.text
    assert disclosures(fresh_ledger) == []  # nothing labelled went in: nothing recorded


def test_allowed_label_goes_in_and_is_recorded(fresh_ledger: MemoryLedger) -> None:
    populate(fresh_ledger)
    ctx = fresh_ledger.context("alice", now=NOW, allow_sensitive=["health"], purpose="diet advice")
    assert profile_lines(ctx) == [  # health.*: unconfirmed for more than 30 days at NOW (docs/hygiene.md)
        "- Alice has asthma (2024-01-01, the user said) (unconfirmed since 2024-01-01; ask?)",
        "- Alice likes tea (2024-01-03, the user said)"]
    assert "90000" not in ctx.text
    assert disclosures(fresh_ledger) == [("health.condition", 1, "health", "diet advice")]
    # Each time is recorded: a second assembly, both labels, adds two more.
    fresh_ledger.context("alice", now=NOW, allow_sensitive="health,finance")
    assert disclosures(fresh_ledger) == [("health.condition", 1, "health", "diet advice"),
                                         ("finance.salary", 1, "finance", None),
                                         ("health.condition", 1, "health", None)]
    rows = fresh_ledger.history("alice", "health.condition")
    assert [r.sensitivity for r in rows] == ["health"]


def test_search_memories_respect_labels(fresh_ledger: MemoryLedger) -> None:
    fresh_ledger.assert_fact("alice", "memory.a1", "therapy", text="Alice sees a therapist on Mondays",
                             sensitivity="health", observed_at="2024-01-01T00:00:00Z")
    fresh_ledger.assert_fact("alice", "memory.a2", "chess", text="Alice plays chess on Mondays",
                             observed_at="2024-01-02T00:00:00Z")
    ctx = fresh_ledger.context("alice", now=NOW, query="what does Alice do on Mondays")
    memories = next(s.lines for s in ctx.sections if s.name == "memories")
    assert ctx.memories_from == "search"
    assert memories == ["- Alice plays chess on Mondays (2024-01-02, the user said)"]
    ctx = fresh_ledger.context("alice", now=NOW, query="what does Alice do on Mondays", allow_sensitive=["health"])
    memories = next(s.lines for s in ctx.sections if s.name == "memories")
    assert sorted(memories) == ["- Alice plays chess on Mondays (2024-01-02, the user said)",
                                "- Alice sees a therapist on Mondays (2024-01-01, the user said)"]
    assert disclosures(fresh_ledger) == [("memory.a1", 1, "health", None)]


def test_cli_context_allow_sensitive(cli: Any) -> None:
    cli.json("assert", "alice", "health.condition", "asthma", "--text", "Alice has asthma", "--sensitivity", "health")
    cli.json("assert", "alice", "preference.drink", "tea", "--text", "Alice likes tea")
    assert "asthma" not in cli.json("context", "alice", "--now", NOW)["text"]
    out = cli.json("context", "alice", "--now", NOW, "--allow-sensitive", "health", "--purpose", "care")
    assert "- Alice has asthma (" in out["text"]
    code, _, err = cli("context", "alice", "--allow-sensitive", "health,,finance")
    assert code == 2 and "allow_sensitive" in err and "Traceback" not in err
    export = cli.json("export", "alice")
    assert [(d["key"], d["sensitivity"], d["purpose"]) for d in export["disclosures"]] == [
        ("health.condition", "health", "care")]


def test_audit_shows_each_inclusion(fresh_ledger: MemoryLedger, cli: Any) -> None:
    populate(fresh_ledger)
    fresh_ledger.context("alice", now=NOW, allow_sensitive=["health"], purpose="first")
    fresh_ledger.context("alice", now=NOW)  # not allowed: not included, not recorded
    fresh_ledger.context("alice", now=NOW, allow_sensitive=["health"], purpose="second")
    audit = fresh_ledger.audit("alice")
    assert [(d.version, d.sensitivity, d.purpose) for d in audit.facts["health.condition"].disclosures] == [
        (1, "health", "first"), (1, "health", "second")]
    assert audit.facts["finance.salary"].disclosures == [] and audit.facts["preference.drink"].disclosures == []
    first_at = audit.facts["health.condition"].disclosures[0].recorded_at
    then = fresh_ledger.audit("alice", "health.condition", as_of=first_at.isoformat())
    assert [d.purpose for d in then.facts["health.condition"].disclosures] == ["first"]
    got = cli.json("audit", "alice", "health.condition")
    assert [d["purpose"] for d in got["facts"]["health.condition"]["disclosures"]] == ["first", "second"]


def test_a_label_sticks_to_the_fact_through_corrections_and_changes(cli):
    """Correcting (or superseding) a labelled fact without repeating the label used to drop it, and the new value
    came back from search and context."""
    cli("assert", "alice", "medical.condition", "type 2 diabetes", "--text", "Alice has type 2 diabetes",
        "--sensitivity", "health")
    cli("correct", "alice", "medical.condition", "type 1 diabetes", "--text", "Alice has type 1 diabetes",
        "--reason", "misheard")
    cli("assert", "alice", "medical.condition", "in remission", "--text", "Alice's diabetes is in remission")
    assert [r["sensitivity"] for r in cli.json("history", "alice", "medical.condition")] == ["health"] * 3
    assert cli.json("search", "alice", "diabetes") == []
    assert "diabetes" not in cli.json("context", "alice", "--query", "diabetes")["text"]
    assert cli.json("export", "alice")["disclosures"] == []
    # another label can be given explicitly, and then sticks in turn
    cli("correct", "alice", "medical.condition", "in remission", "--text", "Alice's diabetes is in remission",
        "--sensitivity", "medical", "--reason", "relabelled")
    assert cli.json("history", "alice", "medical.condition")[-1]["sensitivity"] == "medical"
    assert [h["key"] for h in cli.json("search", "alice", "diabetes", "--allow-sensitive", "medical")] == [
        "medical.condition"]


def test_an_agent_cannot_retract_what_the_user_said(cli):
    cli("assert", "g", "pref.color", "blue")
    code, _out, err = cli("retract", "g", "pref.color", "--source", "agent_inference", "--reason", "agent says no")
    assert code == 2
    assert err.startswith("error: source: an agent_inference cannot retract what the user said ('pref.color' v1 is "
                          "a user_statement)")
    code, _out, err = cli("retract", "g", "pref.color", "--source", "external_import")
    assert code == 2
    assert cli.json("profile", "g")["facts"]["pref.color"]["value"] == "blue"
    assert cli("retract", "g", "pref.color", "--reason", "the user asked")[0] == 0  # the user may
    assert cli.json("profile", "g")["facts"] == {}


def test_remember_does_not_show_labelled_memories_among_its_related(fresh_ledger):
    ml = fresh_ledger
    ml.assert_fact("u", "health.condition", "HIV positive", text="I am HIV positive", sensitivity="health")
    ml.assert_fact("u", "preference.drink", "tea", text="I am a tea drinker")
    r = ml.remember("u", "I am positive I like tea more than coffee")
    by_key = {m.key: m.text for m in r.related}
    assert by_key["health.condition"] == "(withheld: labelled health)"  # weighed, but its text not shown
    assert "HIV" not in r.model_dump_json()
    assert ml.export("u").disclosures == []
