"""``remember`` (issue 13): free text lands in a slot; the decision, key, related memories and evidence are exact.

Hash embedder (conftest): no model loads. The rules themselves are in ledger/resolution.py and ledger/slots.py.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from ledger import BadInput

T1 = "2024-01-01T09:00:00Z"
T2 = "2024-03-01T09:00:00Z"
T3 = "2024-05-01T09:00:00Z"


def current(ml, user):
    return {k: (f.value, f.version, f.status) for k, f in ml.profile(user).facts.items()}


def test_change_of_mind_in_plain_words_supersedes(fresh_ledger):
    ml = fresh_ledger
    a = ml.remember("u", "I love iced americano", observed_at=T1)
    assert (a.decision, a.key, a.version, a.effect, a.related) == ("new", "preference.drink", 1, "new", [])
    b = ml.remember("u", "I switched to hot lattes", observed_at=T2)
    assert (b.decision, b.key, b.version, b.effect) == ("supersede", "preference.drink", 2, "supersede")
    assert [(r.key, r.version, r.text, r.relation) for r in b.related] == [
        ("preference.drink", 1, "I love iced americano", "target")]
    assert b.explanation.startswith("supersede by rule same_slot: slot preference.drink (single), subject self")
    assert "catalogue slots/1" in b.explanation and "embedder hash:" in b.explanation
    assert current(ml, "u") == {"preference.drink": ("I switched to hot lattes", 2, "current")}
    rows = ml.history("u", "preference.drink")
    assert [(h.version, h.status, h.valid_to) for h in rows][0][:2] == (1, "superseded")
    assert rows[0].valid_to.isoformat() == "2024-03-01T09:00:00+00:00"
    # the evidence is in the event: audit answers "why did you drop my old preference?"
    assert rows[1].reason.startswith("remember: supersede -> preference.drink by rule same_slot")
    assert "candidates: preference.drink v1 target" in rows[1].reason


def test_chinese_change_of_mind_supersedes(fresh_ledger):
    ml = fresh_ledger
    assert ml.remember("u", "我喜欢喝冰美式", observed_at=T1).decision == "new"
    r = ml.remember("u", "我现在改喝热拿铁了", observed_at=T2)
    assert (r.decision, r.key, r.version) == ("supersede", "preference.drink", 2)
    assert current(ml, "u") == {"preference.drink": ("我现在改喝热拿铁了", 2, "current")}


def test_multi_valued_slot_adds_siblings_and_other_subject_is_another_slot(fresh_ledger):
    ml = fresh_ledger
    assert (ml.remember("u", "My cat Miso sleeps on the sofa", observed_at=T1).decision) == "add"
    r = ml.remember("u", "We also adopted a dog called Biscuit", observed_at=T2)
    assert (r.decision, r.key) == ("add", "pet.2")
    assert [(m.key, m.relation) for m in r.related] == [("pet.1", "sibling")]
    b = ml.remember("u", "My brother drinks green tea", observed_at=T2)
    assert (b.decision, b.key) == ("new", "family.brother.preference.drink")
    assert sorted(current(ml, "u")) == ["family.brother.preference.drink", "pet.1", "pet.2"]


def test_new_memory_key_is_not_derived_from_text(fresh_ledger):
    ml = fresh_ledger
    text = "The meeting on Friday was moved to the big room"
    r = ml.remember("u", text, observed_at=T1)
    digest = hashlib.sha256(text.encode()).hexdigest()
    assert r.decision == "new" and r.key.startswith("memory.r") and len(r.key) == len("memory.r") + 12
    assert digest[:12] not in r.key


def test_explicit_key_skips_resolution(fresh_ledger):
    ml = fresh_ledger
    r = ml.remember("u", "I drink tea", key="custom.note", observed_at=T1)
    assert (r.decision, r.key, r.effect, r.related) == ("new", "custom.note", "new", [])
    assert current(ml, "u") == {"custom.note": ("I drink tea", 1, "current")}


def test_paraphrase_reaffirms(fresh_ledger):
    ml = fresh_ledger
    ml.remember("u", "I am vegan", observed_at=T1)
    r = ml.remember("u", "I'm still vegan", observed_at=T2)
    assert (r.decision, r.key, r.effect, r.version) == ("reaffirm", "diet", "reaffirm", 2)  # the event; belief stays v1
    assert current(ml, "u") == {"diet": ("I am vegan", 1, "current")}


def test_idempotent_retry(fresh_ledger):
    ml = fresh_ledger
    a = ml.remember("u", "My phone number is 555 0100", observed_at=T1, idempotency_key="conv1:t3")
    b = ml.remember("u", "My phone number is 555 0100", observed_at=T1, idempotency_key="conv1:t3")
    assert (b.key, b.version, b.event_id, b.replayed) == (a.key, 1, a.event_id, True)
    assert len(ml.history("u")) == 1


@pytest.mark.parametrize("bad, field", [
    (dict(text=""), "text"), (dict(text=5), "text"), (dict(user_id=""), "user_id"),
    (dict(observed_at="2024-01-01T00:00:00"), "observed_at"), (dict(confidence=2.0), "confidence"),
    (dict(source="rumour"), "source"), (dict(key="not a key"), "key"),
])
def test_bad_input_names_field_and_writes_nothing(fresh_ledger, bad, field):
    ml = fresh_ledger
    args = {"user_id": "u", "text": "I drink tea", **bad}
    user, text = args.pop("user_id"), args.pop("text")
    with pytest.raises(BadInput) as exc:
        ml.remember(user, text, **args)
    assert exc.value.field == field and exc.value.fix
    assert ml.history("u") == []


def test_cli_remember_json_and_exit_2(cli):
    r = cli.json("remember", "Jon", "Jon works as a banker", "--observed-at", "2023-01-20T16:04:00Z",
                 "--source-ref", "D1:1", "--session", "s1")
    assert {k: r[k] for k in ("user_id", "key", "version", "position", "kind", "effect", "decision", "replayed")} == {
        "user_id": "Jon", "key": "work.occupation", "version": 1, "position": 1, "kind": "asserted",
        "effect": "new", "decision": "new", "replayed": False}
    assert set(r) == {"event_id", "user_id", "key", "version", "position", "kind", "effect", "replayed", "decision",
                      "related", "explanation", "extra"}
    r = cli.json("remember", "Jon", "Jon lost his job as a banker", "--observed-at", "2023-02-01T00:00:00Z")
    assert (r["decision"], r["key"], r["version"]) == ("retire", "work.occupation", 2)
    assert r["related"][0] == {"key": "work.occupation", "version": 1, "text": "Jon works as a banker",
                               "score": r["related"][0]["score"], "relation": "target"}
    prof = cli.json("profile", "Jon")["facts"]
    assert list(prof) == ["work.occupation"] and prof["work.occupation"]["value"] == "Jon lost his job as a banker"
    code, out, err = cli("remember", "Jon", "I like tea", "--confidence", "1.5")
    assert code == 2 and "confidence" in err and out == ""
    code, out, err = cli("remember", "Jon", "   ")
    assert code == 2 and "text: is empty" in err
    assert len(cli.json("history", "Jon")) == 2


def test_agent_inference_never_supersedes_user_statement_through_cli(cli):
    """Issue 13, item 4: --source agent_inference --confidence 1.0 used to supersede the user's "vegan"."""
    cli.json("assert", "u", "diet", "vegan", "--observed-at", "2024-01-01T00:00:00Z")
    r = cli.json("assert", "u", "diet", "eats fish", "--source", "agent_inference", "--confidence", "1.0",
                 "--observed-at", "2024-02-01T00:00:00Z")
    assert (r["kind"], r["effect"], r["version"]) == ("asserted", "contest", 2)
    r = cli.json("correct", "u", "diet", "pescatarian", "--source", "external_import", "--confidence", "1.0")
    assert (r["kind"], r["effect"], r["version"]) == ("asserted", "contest", 3)
    fact = cli.json("profile", "u")["facts"]["diet"]
    assert (fact["value"], fact["version"], fact["status"], fact["source"]) == ("vegan", 1, "contested",
                                                                                "user_statement")
    # the same through remember: recorded, contesting, decision conflict
    r = cli.json("remember", "u", "The user is vegetarian now", "--source", "agent_inference", "--confidence", "1.0",
                 "--observed-at", "2024-03-01T00:00:00Z")
    assert (r["decision"], r["key"], r["effect"]) == ("conflict", "diet", "contest")
    assert cli.json("profile", "u")["facts"]["diet"]["value"] == "vegan"
    # the user repeating the value clears the contest; a new user statement supersedes as usual
    assert cli.json("assert", "u", "diet", "vegan")["effect"] == "reaffirm"
    assert cli.json("profile", "u")["facts"]["diet"]["status"] == "current"
    r = cli.json("remember", "u", "I am vegetarian now", "--observed-at", "2024-04-01T00:00:00Z")
    assert (r["decision"], r["key"], r["effect"]) == ("supersede", "diet", "supersede")


def test_external_import_of_earlier_history_still_backfills(fresh_ledger):
    ml = fresh_ledger
    ml.assert_fact("u", "residence.city", "Berlin", observed_at="2024-01-01T00:00:00Z")
    r = ml.assert_fact("u", "residence.city", "Paris", valid_from="2019-01-01T00:00:00Z",
                       observed_at="2019-01-01T00:00:00Z", source="external_import")
    assert r.effect == "backfill"
    assert ml.profile("u").facts["residence.city"].value == "Berlin"
