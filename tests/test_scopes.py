"""Scopes: a memory carries the agent and the run it was written with (its actor and session_id) beside its user;
a read names the user and may name an agent and a run, all of which must match, the others free
(memledger/scopes.py). Both backends."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.errors import BadInput
from memledger import MemoryLedger


def _seed(ml: MemoryLedger) -> None:
    ml.assert_fact("u", "preference.drink", "green tea", text="I drink green tea", agent_id="a", run_id="r1")
    ml.assert_fact("u", "pet.name", "Miso", text="my cat is called Miso", agent_id="a", run_id="r2")
    ml.assert_fact("u", "home.city", "Berlin", text="I live in Berlin", agent_id="b", run_id="r2")
    ml.assert_fact("u", "work.employer", "Acme", text="I work at Acme")  # no agent, no run
    # another user, written by the same agent in the same run: never read through u
    ml.assert_fact("v", "preference.drink", "black coffee", text="I drink black coffee", agent_id="a", run_id="r1")


def _keys(hits: list[Any]) -> set[tuple[str | None, str | None]]:
    return {(h.user_id, h.key) for h in hits}


def test_a_memory_is_found_by_every_scope_it_was_written_with(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    _seed(ml)
    q = "drink cat city work"
    assert _keys(ml.search("u", q)) == {("u", "preference.drink"), ("u", "pet.name"), ("u", "home.city"),
                                        ("u", "work.employer")}
    assert _keys(ml.search("u", q, agent_id="a")) == {("u", "preference.drink"), ("u", "pet.name")}
    assert _keys(ml.search("u", q, agent_id="b")) == {("u", "home.city")}
    assert ml.search("u", q, agent_id="c") == []
    assert _keys(ml.search("u", q, run_id="r2")) == {("u", "pet.name"), ("u", "home.city")}
    assert _keys(ml.search("u", q, agent_id="a", run_id="r2")) == {("u", "pet.name")}
    assert ml.search("u", q, agent_id="b", run_id="r1") == []
    # the profile and the history narrow the same way
    assert set(ml.profile("u").facts) == {"preference.drink", "pet.name", "home.city", "work.employer"}
    assert set(ml.profile("u", agent_id="a").facts) == {"preference.drink", "pet.name"}
    assert set(ml.profile("u", run_id="r2").facts) == {"pet.name", "home.city"}
    assert set(ml.profile("u", agent_id="a", run_id="r1").facts) == {"preference.drink"}
    assert ml.profile("u", agent_id="a").facts["preference.drink"].value == "green tea"
    assert [(r.key, r.actor, r.session_id) for r in ml.history("u", agent_id="b")] == [("home.city", "b", "r2")]
    # the scopes are recorded as the fact's actor and session_id: the same fields
    (row,) = ml.history("u", "pet.name")
    assert (row.actor, row.session_id) == ("a", "r2")


def test_no_read_crosses_users(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    _seed(ml)
    hits = ml.search("u", "black coffee drink", k=10, agent_id="a", run_id="r1")
    assert _keys(hits) == {("u", "preference.drink")} and hits[0].text == "I drink green tea"
    assert ml.profile("u", agent_id="a").facts["preference.drink"].value == "green tea"
    assert set(ml.profile("v", agent_id="a").facts) == {"preference.drink"}
    assert ml.profile("v", agent_id="b").facts == {}
    assert "coffee" not in ml.context("u", query="coffee", agent_id="a").text


def test_the_current_version_carries_the_scope(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    ml.assert_fact("u", "preference.drink", "tea", agent_id="a")
    ml.assert_fact("u", "preference.drink", "coffee", agent_id="b")  # agent b changed it: now b's memory
    assert ml.profile("u", agent_id="a").facts == {}
    assert ml.profile("u", agent_id="b").facts["preference.drink"].value == "coffee"
    assert [h.value for h in ml.search("u", "coffee tea", agent_id="b")] == ["coffee"]
    assert ml.search("u", "coffee tea", agent_id="a") == []
    # what agent a believed before b's change, as of then
    first = ml.history("u", "preference.drink")[0].recorded_at
    assert [h.value for h in ml.search("u", "coffee tea", as_of=first, agent_id="a")] == ["tea"]
    assert ml.search("u", "coffee tea", as_of=first, agent_id="b") == []


def test_a_scope_filter_still_fills_the_page(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    # 120 close matches by agent b rank ahead of agent a's 4 weaker ones: the pool grows until k of a's are found
    ml.record([{"user_id": "u", "key": f"note.b{i}", "value": f"coffee coffee coffee note {i}",
                "text": f"coffee coffee coffee note {i}", "actor": "b"} for i in range(120)])
    ml.record([{"user_id": "u", "key": f"note.a{i}", "value": f"coffee and other things {i}",
                "text": f"coffee and other things, said once {i}", "actor": "a"} for i in range(4)])
    top = ml.search("u", "coffee coffee coffee", k=3)
    assert all(h.key.startswith("note.b") for h in top)
    hits = ml.search("u", "coffee coffee coffee", k=3, agent_id="a")
    assert len(hits) == 3 and all(h.key.startswith("note.a") for h in hits) and [h.rank for h in hits] == [1, 2, 3]
    assert len(ml.search("u", "coffee coffee coffee", k=10, agent_id="a")) == 4


def test_both_spellings_given_and_different_are_refused_and_nothing_is_written(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    head = ml.head()
    with pytest.raises(BadInput) as e:
        ml.assert_fact("u", "pet.name", "Miso", actor="a", agent_id="b")
    assert (e.value.field, e.value.problem, e.value.fix) == (
        "agent_id", "'b' differs from actor 'a' (the same field, spelled twice)", "give one of agent_id and actor")
    with pytest.raises(BadInput) as e:
        ml.remember("u", "I drink green tea", session_id="s1", run_id="s2")
    assert (e.value.field, e.value.fix) == ("run_id", "give one of run_id and session_id")
    with pytest.raises(BadInput) as e:
        ml.search("u", "tea", agent_id=" ")
    assert e.value.field == "agent_id"
    with pytest.raises(BadInput) as e:
        ml.profile("u", run_id="")
    assert e.value.field == "run_id"
    assert ml.head() == head
    # the same value under both spellings is one field
    r = ml.remember("u", "I drink green tea", actor="a", agent_id="a", run_id="s1")
    (row,) = ml.history("u", r.key)
    assert (row.actor, row.session_id) == ("a", "s1")


def test_context_keeps_the_scope(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    _seed(ml)
    text = ml.context("u", agent_id="b").text
    assert "Berlin" in text and "green tea" not in text and "Miso" not in text and "Acme" not in text
    text = ml.context("u", run_id="r2", query="cat city").text
    assert "Berlin" in text and "Miso" in text and "green tea" not in text
    assert "Acme" in ml.context("u").text


def test_messages_keep_the_run_and_have_no_agent(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    ml.log_message("u", "r1", role="user", message_id="m1", text="we talked about the garden shed")
    ml.log_message("u", "r2", role="user", message_id="m2", text="the garden shed needs paint")
    hits = ml.search("u", "garden shed", within="all", run_id="r1")
    assert [(h.kind, h.session_id) for h in hits] == [("message", "r1")]
    assert ml.search("u", "garden shed", within="all", run_id="r9") == []
    assert ml.search("u", "garden shed", within="all", agent_id="a") == []
    with pytest.raises(BadInput) as e:
        ml.search("u", "garden shed", within="messages", agent_id="a")
    assert e.value.field == "within" and "record no agent" in e.value.problem


def test_a_runs_memories_close_with_the_run(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    ml.session_start("u", "r1", observed_at="2024-05-01T09:00:00Z")
    ml.remember("u", "I drink green tea", run_id="r1", observed_at="2024-05-01T09:01:00Z")
    ml.assert_fact("u", "pet.name", "Miso", session_id="r1", agent_id="a", observed_at="2024-05-01T09:02:00Z")
    ml.assert_fact("u", "home.city", "Berlin", run_id="r2", observed_at="2024-05-01T09:03:00Z")
    ml.assert_fact("v", "home.city", "Paris", run_id="r1", observed_at="2024-05-01T09:03:00Z")  # another user's r1
    ml.session_start("u", "r2", observed_at="2024-05-01T09:00:00Z")
    plain = ml.end_session("u", "r2", observed_at="2024-05-01T09:04:00Z")  # without the option: nothing retired
    assert plain.closed_memories is None and "closed_memories" not in plain.model_dump(mode="json")
    r = ml.end_session("u", "r1", observed_at="2024-05-01T10:00:00Z", close_memories=True)
    assert r.event == "SessionEnded"
    assert [(c.key, c.kind) for c in r.closed_memories] == [("pet.name", "retracted"), ("preference.drink", "retracted")]
    assert set(ml.profile("u").facts) == {"home.city"}
    assert set(ml.profile("v").facts) == {"home.city"}
    last = ml.history("u", "pet.name")[-1]
    assert (last.kind, last.reason, last.session_id, last.source, last.observed_at.isoformat()) == (
        "retracted", "closed with run r1", "r1", "system_feedback", "2024-05-01T10:00:00+00:00")
    # history keeps them: what was believed while the run was open
    said = ml.history("u", "pet.name")[0].recorded_at
    assert ml.believed("u", as_of=said).facts["pet.name"].value == "Miso"
    ml.session_start("u", "r3")
    with pytest.raises(BadInput):
        ml.end_session("u", "r3", close_memories="yes")  # type: ignore[arg-type]
    assert set(ml.profile("u").facts) == {"home.city"}


def test_time_travel_keeps_the_scope(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    ml.assert_fact("u", "preference.drink", "tea", agent_id="a", run_id="r1", observed_at="2024-01-01T00:00:00Z")
    ml.assert_fact("u", "home.city", "Berlin", agent_id="b", observed_at="2024-01-01T00:00:00Z")
    then = ml.history("u", "home.city")[0].recorded_at
    ml.assert_fact("u", "preference.drink", "coffee", agent_id="b", observed_at="2024-06-01T00:00:00Z")
    # as of then, agent a's tea was believed; now the drink is b's coffee
    assert {k: f.value for k, f in ml.believed("u", as_of=then, agent_id="a").facts.items()} == {
        "preference.drink": "tea"}
    assert set(ml.believed("u", as_of=then, agent_id="b").facts) == {"home.city"}
    assert set(ml.believed("u", as_of=then, run_id="r1").facts) == {"preference.drink"}
    assert ml.true_at("u", "2024-07-01T00:00:00Z", agent_id="a").facts == {}
    assert {k: f.value for k, f in ml.true_at("u", "2024-07-01T00:00:00Z", agent_id="b").facts.items()} == {
        "preference.drink": "coffee", "home.city": "Berlin"}
    assert {k: f.value for k, f in ml.true_at("u", "2024-03-01T00:00:00Z", agent_id="a").facts.items()} == {
        "preference.drink": "tea"}
    with pytest.raises(BadInput) as e:
        ml.true_at("u", "2024-03-01T00:00:00Z", run_id=" ")
    assert e.value.field == "run_id"
