"""Every branch of the belief policy (ledger/domain.py), with exact values through the Python API."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from ledger import BadInput

T1 = "2024-01-01T00:00:00Z"
T2 = "2024-06-01T00:00:00Z"
T3 = "2024-09-01T00:00:00Z"


def dt(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).astimezone(timezone.utc)


def test_first_assert_is_new(fresh_ledger):
    r = fresh_ledger.assert_fact("u1", "preference.drink", "tea", observed_at=T1)
    assert (r.version, r.kind, r.effect, r.position, r.replayed) == (1, "asserted", "new", 1, False)
    f = fresh_ledger.profile("u1").facts["preference.drink"]
    assert (f.value, f.version, f.valid_from, f.valid_to, f.status) == ("tea", 1, dt(T1), None, "current")
    assert f.text == "preference.drink: tea"


def test_supersede_closes_old_range_at_new_valid_from(fresh_ledger):
    fresh_ledger.assert_fact("u1", "preference.drink", "blue", observed_at=T1)
    r = fresh_ledger.assert_fact("u1", "preference.drink", "green", observed_at=T2)
    assert (r.version, r.kind, r.effect) == (2, "asserted", "supersede")
    prof = fresh_ledger.profile("u1")
    assert prof.facts["preference.drink"].value == "green"
    assert prof.facts["preference.drink"].valid_from == dt(T2)
    rows = fresh_ledger.history("u1", "preference.drink")
    assert [(h.version, h.value, h.kind, h.status, h.valid_from, h.valid_to) for h in rows] == [
        (1, "blue", "asserted", "superseded", dt(T1), dt(T2)),
        (2, "green", "asserted", "current", dt(T2), None),
    ]
    assert rows[0].replaced_by == 2 and rows[1].replaces == 1


def test_same_value_reaffirms_without_changing_belief(fresh_ledger):
    fresh_ledger.assert_fact("u1", "preference.drink", "tea", observed_at=T1)
    r = fresh_ledger.assert_fact("u1", "preference.drink", "tea", observed_at=T2)
    assert (r.version, r.kind, r.effect) == (2, "reaffirmed", "reaffirm")
    f = fresh_ledger.profile("u1").facts["preference.drink"]
    assert (f.value, f.version, f.valid_from) == ("tea", 1, dt(T1))
    assert [h.kind for h in fresh_ledger.history("u1")] == ["asserted", "reaffirmed"]


def test_correct_replaces_whole_valid_time_and_keeps_misreport(fresh_ledger):
    fresh_ledger.assert_fact("u1", "profile.birth_year", 1990, observed_at=T1, valid_from="1990-01-01T00:00:00Z")
    r = fresh_ledger.correct_fact("u1", "profile.birth_year", 1995, reason="typo: 1995 not 1990", observed_at=T2)
    assert (r.version, r.kind, r.effect) == (2, "corrected", "correct")
    f = fresh_ledger.profile("u1").facts["profile.birth_year"]
    assert (f.value, f.valid_from, f.valid_to) == (1995, dt("1990-01-01T00:00:00Z"), None)
    rows = fresh_ledger.history("u1", "profile.birth_year")
    assert [(h.value, h.kind, h.status, h.valid_from, h.valid_to, h.reason) for h in rows] == [
        (1990, "asserted", "misreported", dt("1990-01-01T00:00:00Z"), dt("1990-01-01T00:00:00Z"), None),
        (1995, "corrected", "current", dt("1990-01-01T00:00:00Z"), None, "typo: 1995 not 1990"),
    ]


def test_retract_without_valid_to_withdraws(fresh_ledger):
    fresh_ledger.assert_fact("u1", "preference.drink", "tea", observed_at=T1)
    r = fresh_ledger.retract_fact("u1", "preference.drink", reason="misunderstood")
    assert (r.version, r.kind, r.effect) == (2, "retracted", "retract")
    assert fresh_ledger.profile("u1").facts == {}
    rows = fresh_ledger.history("u1")
    assert [(h.kind, h.status, h.value, h.reason) for h in rows] == [
        ("asserted", "retracted", "tea", None), ("retracted", "retraction", None, "misunderstood"),
    ]
    assert rows[0].valid_to == rows[0].valid_from == dt(T1)


def test_retract_with_valid_to_closes_range(fresh_ledger):
    fresh_ledger.assert_fact("u1", "home.city", "Paris", observed_at=T1)
    fresh_ledger.retract_fact("u1", "home.city", valid_to=T2, reason="moved away")
    assert fresh_ledger.profile("u1").facts == {}
    first = fresh_ledger.history("u1", "home.city")[0]
    assert (first.status, first.valid_from, first.valid_to) == ("closed", dt(T1), dt(T2))


def test_contest_lower_confidence_inference_does_not_supersede(fresh_ledger):
    fresh_ledger.assert_fact("u1", "preference.drink", "tea", observed_at=T1)
    r = fresh_ledger.assert_fact("u1", "preference.drink", "coffee", source="agent_inference", confidence=0.4)
    assert (r.version, r.kind, r.effect) == (2, "asserted", "contest")
    f = fresh_ledger.profile("u1").facts["preference.drink"]
    assert (f.value, f.status, f.version) == ("tea", "contested", 1)
    assert [h.status for h in fresh_ledger.history("u1")] == ["contested", "contesting"]
    # The user saying it again settles the contest.
    fresh_ledger.assert_fact("u1", "preference.drink", "tea")
    assert fresh_ledger.profile("u1").facts["preference.drink"].status == "current"


def test_higher_confidence_inference_supersedes_inference(fresh_ledger):
    fresh_ledger.assert_fact("u1", "mood", "calm", source="agent_inference", confidence=0.5, observed_at=T1)
    r = fresh_ledger.assert_fact("u1", "mood", "tense", source="agent_inference", confidence=0.3, observed_at=T2)
    # Inference over inference is an ordinary change, whatever the confidence: only user statements are guarded.
    assert r.effect == "supersede"
    assert fresh_ledger.profile("u1").facts["mood"].value == "tense"


def test_backfill_older_value_does_not_displace_head(fresh_ledger):
    fresh_ledger.assert_fact("u1", "home.city", "Berlin", observed_at=T3)
    r = fresh_ledger.assert_fact("u1", "home.city", "Paris", observed_at=T1, source="external_import")
    assert (r.kind, r.effect) == ("asserted", "backfill")
    assert fresh_ledger.profile("u1").facts["home.city"].value == "Berlin"
    rows = fresh_ledger.history("u1", "home.city")
    assert [(h.value, h.status, h.valid_from, h.valid_to) for h in rows] == [
        ("Berlin", "current", dt(T3), None),
        ("Paris", "superseded", dt(T1), dt(T3)),
    ]


@pytest.mark.parametrize("op", ["correct", "retract"])
def test_correct_or_retract_without_current_value_is_bad_input(fresh_ledger, op):
    with pytest.raises(BadInput) as exc:
        if op == "correct":
            fresh_ledger.correct_fact("u1", "profile.name", "Ann")
        else:
            fresh_ledger.retract_fact("u1", "profile.name")
    assert exc.value.field == "key"
    assert fresh_ledger.history("u1") == []


def test_batch_record_is_one_save_and_all_or_nothing(fresh_ledger):
    receipts = fresh_ledger.record([
        {"user_id": "u1", "key": "a.x", "value": 1, "observed_at": T1},
        {"user_id": "u1", "key": "a.y", "value": 2, "observed_at": T1},
        {"user_id": "u1", "key": "a.x", "value": 3, "observed_at": T2},
    ])
    assert [(r.key, r.version, r.effect, r.position) for r in receipts] == [
        ("a.x", 1, "new", 1), ("a.y", 1, "new", 2), ("a.x", 2, "supersede", 3),
    ]
    with pytest.raises(BadInput) as exc:
        fresh_ledger.record([
            {"user_id": "u1", "key": "a.z", "value": 1},
            {"op": "retract", "user_id": "u1", "key": "a.nothing"},
        ])
    assert exc.value.field == "commands[1].key"  # the policy's refusal names the command, as validation does
    assert sorted(fresh_ledger.profile("u1").facts) == ["a.x", "a.y"]
    assert len(fresh_ledger.history("u1")) == 3


def test_users_are_isolated(fresh_ledger):
    fresh_ledger.assert_fact("alice", "preference.drink", "tea")
    fresh_ledger.assert_fact("bob", "preference.drink", "coffee")
    assert fresh_ledger.profile("alice").facts["preference.drink"].value == "tea"
    assert fresh_ledger.profile("bob").facts["preference.drink"].value == "coffee"
    assert [h.value for h in fresh_ledger.history("alice")] == ["tea"]


def test_same_instant_in_different_offsets_is_the_same(fresh_ledger):
    fresh_ledger.assert_fact("u1", "k.a", 1, observed_at="2024-05-01T09:00:00+08:00")
    fresh_ledger.assert_fact("u1", "k.b", 1, observed_at="2024-05-01T01:00:00Z")
    facts = fresh_ledger.profile("u1").facts
    assert facts["k.a"].valid_from == facts["k.b"].valid_from == dt("2024-05-01T01:00:00Z")
