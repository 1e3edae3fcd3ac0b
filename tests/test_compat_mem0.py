"""memledger.compat.mem0: mem0's Memory / AsyncMemory on the ledger (both backends where a store is opened).

A script written against mem0's API runs unchanged and its outputs have the shapes mem0 returns
(tests/data/mem0_shapes.json, read from mem0's source); the values are the ledger's: remember's decisions as mem0
events, updates as new versions, deletes as retractions, history from the log.
"""

from __future__ import annotations

import asyncio
import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import BadInput
from memledger.compat.mem0 import AsyncMemory, Memory, ResetRefused
from memledger.compat.mem0_shapes import memory_id, parse_memory_id

SHAPES = json.loads((Path(__file__).parent / "data" / "mem0_shapes.json").read_text())
OPTIONAL = set(SHAPES["memory_item"]["promoted_payload_keys"])


def config_of(store_args: dict[str, Any]) -> dict[str, Any]:
    return {"memledger": {k: str(v) for k, v in store_args.items()}}


def mem0_script(m: Any) -> tuple[dict[str, Any], str]:
    """What a mem0 2.x user writes (filters= scopes reads); nothing here knows it is not mem0."""
    out: dict[str, Any] = {}
    out["add"] = m.add([{"role": "user", "content": "I love iced americano"},
                        {"role": "assistant", "content": "Good to know!"}], user_id="alex",
                       metadata={"category": "drink"})
    mid = out["add"]["results"][0]["id"]
    out["add_update"] = m.add("I switched to hot lattes", user_id="alex")
    out["add_raw"] = m.add("Alex's dentist appointment is on Friday", user_id="alex", infer=False)
    out["search"] = m.search("which drink, lattes?", filters={"user_id": "alex"}, top_k=3)
    out["get_all"] = m.get_all(filters={"user_id": "alex"})
    out["get"] = m.get(mid)
    out["update"] = m.update(mid, "These days I drink green tea")
    out["history"] = m.history(mid)
    out["delete"] = m.delete(mid)
    out["history_after_delete"] = m.history(mid)
    out["get_after_delete"] = m.get(mid)
    out["delete_all"] = m.delete_all(user_id="alex")
    out["get_all_after"] = m.get_all(filters={"user_id": "alex"})
    return out, mid


def assert_item(it: dict[str, Any], required: list[str]) -> None:
    assert set(required) <= set(it), (required, it)
    assert set(it) - set(required) <= OPTIONAL | {"score_details"}, it
    assert isinstance(it["id"], str) and isinstance(it["memory"], str) and isinstance(it["hash"], str)
    assert it["metadata"] is None or isinstance(it["metadata"], dict)


def test_a_mem0_script_runs_unchanged_with_mem0_shapes_and_ledger_values(store_args: dict[str, Any]):
    with Memory.from_config(config_of(store_args)) as m:
        out, mid = mem0_script(m)
        ledger_history = m.ledger.history("alex", parse_memory_id(mid)[1])

    events = SHAPES["add"]["events"]
    for name in ("add", "add_update", "add_raw"):
        assert list(out[name]) == SHAPES["add"]["envelope"]
    [added] = out["add"]["results"]  # the assistant's turn is not a memory about the user
    assert list(added) == events["ADD"] and added["event"] == "ADD" and added["memory"] == "I love iced americano"
    [updated] = out["add_update"]["results"]
    assert list(updated) == events["UPDATE"]
    assert updated == {"id": mid, "memory": "I switched to hot lattes", "event": "UPDATE",
                       "previous_memory": "I love iced americano"}
    [raw] = out["add_raw"]["results"]
    assert list(raw) == SHAPES["add"]["infer_false"]
    assert raw["event"] == "ADD" and raw["role"] == "user" and raw["actor_id"] is None and raw["id"] != mid

    hits = out["search"]["results"]
    for it in hits:
        assert_item(it, SHAPES["search"]["required"])
        assert 0 <= it["score"] <= 1
    assert hits[0]["id"] == mid and hits[0]["memory"] == "I switched to hot lattes"
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)

    listed = out["get_all"]["results"]
    for it in listed:
        assert_item(it, SHAPES["get_all"]["required"])
        assert "score" not in it and it["user_id"] == "alex"
    assert sorted(it["memory"] for it in listed) == ["Alex's dentist appointment is on Friday",
                                                     "I switched to hot lattes"]  # one memory per slot

    got = out["get"]
    assert_item(got, SHAPES["get"]["required"])
    assert got["score"] is None and got["memory"] == "I switched to hot lattes" and got["metadata"] is None
    assert got["created_at"] < got["updated_at"]  # created by the first statement, updated by the second

    assert out["update"] == SHAPES["messages"]["update"]
    assert out["delete"] == SHAPES["messages"]["delete"]
    assert out["delete_all"] == SHAPES["messages"]["delete_all"]
    rows = out["history_after_delete"]
    for row in rows:
        assert list(row) == SHAPES["history"]["row"] and row["memory_id"] == mid
    assert [(r["event"], r["old_memory"], r["new_memory"], r["is_deleted"]) for r in rows] == [
        ("ADD", None, "I love iced americano", False),
        ("UPDATE", "I love iced americano", "I switched to hot lattes", False),
        ("UPDATE", "I switched to hot lattes", "These days I drink green tea", False),
        ("DELETE", "These days I drink green tea", None, True)]
    assert rows[:3] == out["history"]
    assert {r["created_at"] for r in rows} == {rows[0]["updated_at"]}  # one life, begun by the ADD
    assert [r["id"] for r in rows] == [h.event_id for h in ledger_history]  # mem0 rows are the ledger's events
    assert out["get_after_delete"] is None and out["get_all_after"] == {"results": []}


def test_remember_decisions_map_to_mem0_events(fresh_ledger: Any):
    m = Memory(ledger=fresh_ledger)

    def add(text: str) -> list[tuple[str, str, str | None]]:
        res = m.add(text, user_id="bo")["results"]
        return [(r["event"], r["memory"], r.get("previous_memory")) for r in res]

    assert add("I work at Google") == [("ADD", "I work at Google", None)]
    assert add("I am a software engineer") == [("ADD", "I am a software engineer", None)]
    # a cessation supersedes the occupation and closes the employer: UPDATE one memory, DELETE the other
    assert add("I lost my job") == [("UPDATE", "I lost my job", "I am a software engineer"),
                                   ("DELETE", "I work at Google", None)]
    assert add("My gym locker number is 112") == [("ADD", "My gym locker number is 112", None)]
    assert add("Sorry, I meant my locker number is 246") == [  # a correction
        ("UPDATE", "Sorry, I meant my locker number is 246", "My gym locker number is 112")]
    assert add("Sorry, I meant my locker number is 246") == [  # said again: nothing changed
        ("NONE", "Sorry, I meant my locker number is 246", None)]
    assert add("I am 250 years old") == [("NONE", "I am 250 years old", None)]  # quarantined, not a memory
    assert add("I have two cats, Luna and Mochi") == [("ADD", "I have two cats, Luna and Mochi", None)]
    # a conflict: kept beside the memory it may replace, which the ledger marks contested ("to confirm")
    assert add("Luna passed away") == [("ADD", "Luna passed away", None)]
    assert fresh_ledger.profile("bo").facts["pet.1"].status == "contested"
    listed = {it["memory"] for it in m.get_all(filters={"user_id": "bo"})["results"]}
    assert listed == {"I lost my job", "Sorry, I meant my locker number is 246", "I have two cats, Luna and Mochi",
                      "Luna passed away"}
    employer = memory_id("bo", "work.employer")
    assert [r["event"] for r in m.history(employer)] == ["ADD", "DELETE"] and m.get(employer) is None
    # the ledger's own view is unchanged by the face: the misreport stays in its history (a locker is no hobby: its
    # key is a free-text one)
    locker = next(k for k, f in fresh_ledger.profile("bo").facts.items() if "locker" in (f.text or ""))
    assert not locker.startswith("hobby") and [h.status for h in fresh_ledger.history("bo", locker)] == [
        "misreported", "current", "reaffirmation"]


def test_infer_false_stores_every_message_as_given_in_one_save(fresh_ledger: Any):
    m = Memory(ledger=fresh_ledger)
    res = m.add([{"role": "system", "content": "You are helpful."},
                 {"role": "user", "content": "  I might move to Berlin  ", "name": "bo"},
                 {"role": "assistant", "content": "Berlin is lovely in spring."}], user_id="bo", agent_id="planner",
                run_id="trip-1", metadata={"topic": "travel"}, infer=False)["results"]
    assert [(r["event"], r["memory"], r["actor_id"], r["role"]) for r in res] == [
        ("ADD", "  I might move to Berlin  ", "bo", "user"), ("ADD", "Berlin is lovely in spring.", None, "assistant")]
    prof = fresh_ledger.profile("bo").facts
    heads = {fresh_ledger.history("bo", k)[0].source: fresh_ledger.history("bo", k)[0] for k in prof}
    assert set(heads) == {"user_statement", "agent_inference"}  # the assistant's words are not the user's
    assert {(h.actor, h.session_id) for h in heads.values()} == {("planner", "trip-1")}
    got = m.get(res[0]["id"])
    assert got["metadata"] == {"topic": "travel"} and got["actor_id"] == "bo"
    assert (got["agent_id"], got["run_id"]) == ("planner", "trip-1")
    # a bad message anywhere: nothing is written
    with pytest.raises(BadInput, match=r"messages\[1\]\.content: is empty"):
        m.add([{"role": "user", "content": "fine"}, {"role": "user", "content": " "}], user_id="bo", infer=False)
    with pytest.raises(BadInput, match=r"messages\[1\]\.content: is empty"):
        m.add([{"role": "user", "content": "I drink tea"}, {"role": "user", "content": ""}], user_id="bo")
    assert len(fresh_ledger.profile("bo").facts) == 2


@pytest.mark.parametrize("call, field", [
    (lambda m: m.add("I like tea"), "user_id: is missing"),
    (lambda m: m.add("I like tea", run_id="r1"), "user_id: is missing: run_id alone"),
    (lambda m: m.search("tea", filters={"agent_id": "*"}), "user_id: is missing"),
    (lambda m: m.add("I like tea", user_id="~agent/a1"), "user_id: '~agent/a1' starts with '~agent/'"),
    (lambda m: m.add("I like tea", agent_id=" "), "agent_id: is empty"),
    (lambda m: m.get_all(), "user_id: is missing"),
    (lambda m: m.add("I like tea", user_id=" "), "user_id: is empty"),
    (lambda m: m.add(42, user_id="u"), "messages: is a int"),
    (lambda m: m.add([{"role": "robot", "content": "x"}], user_id="u"), r"messages\[0\]\.role"),
    (lambda m: m.add({"role": "user", "content": [{"type": "image_url"}]}, user_id="u"), "messages.content"),
    (lambda m: m.add("I like tea", user_id="u", metadata=["x"]), "metadata: is a list"),
    (lambda m: m.add("I like tea", user_id="u", metadata={"x": {1, 2}}), "metadata: is not a JSON value"),
    (lambda m: m.add("I like tea", user_id="u", infer="yes"), "infer: is a str"),
    (lambda m: m.add("I like tea", user_id="u", memory_type="procedural_memory"), "memory_type: is not supported"),
    (lambda m: m.add("I like tea", user_id="u", expiration_date="2030-01-01"), "expiration_date: is not supported"),
    (lambda m: m.get("not-an-id"), "memory_id: 'not-an-id' is not a memledger memory id"),
    (lambda m: m.get("mlm_%%%"), "memory_id: .* does not decode"),
    (lambda m: m.update(memory_id("u", "a.b"), "x"), "memory_id: .* names no current memory"),
    (lambda m: m.delete(memory_id("u", "a.b")), "memory_id: .* names no current memory"),
    (lambda m: m.update(memory_id("u", "a.b")), "text: is missing"),
    (lambda m: m.update(memory_id("u", "a.b"), "x", expiration_date="2030-01-01"), "expiration_date: is not supp"),
    (lambda m: m.search("tea", filters={"user_id": "u", "n": {"between": [1, 2]}}), "filters.n: 'between'"),
    (lambda m: m.search("tea", filters={"user_id": "u", "OR": {"a": 1}}), "filters.OR: must be a non-empty list"),
    (lambda m: m.search("tea", filters={"user_id": "u"}, top_k=-1), "top_k: -1"),
    (lambda m: m.search("tea", filters={"user_id": "u"}, threshold=1.5), "threshold: 1.5"),
    (lambda m: m.search("  ", filters={"user_id": "u"}), "query: is empty"),
    (lambda m: m.search("tea", user_id="u", filters={"user_id": "v"}), "user_id: 'u' differs"),
    (lambda m: m.delete_all(), "user_id: is missing"),
])
def test_bad_input_names_the_argument_and_writes_nothing(tmp_path: Path, call: Any, field: str):
    with Memory(home=tmp_path / "s") as m:
        with pytest.raises(ValueError, match=field) as info:
            call(m)
        assert isinstance(info.value, BadInput) and info.value.fix
        assert m.ledger.head() == 0


def test_ids_are_stable_reversible_and_survive_reopening(store_args: dict[str, Any]):
    with Memory(**store_args) as m:
        mid = m.add("Mi color favorito es el azul", user_id="José Ñ 用户")["results"][0]["id"]
    assert mid.startswith("mlm_") and parse_memory_id(mid)[0] == "José Ñ 用户"
    assert memory_id(*parse_memory_id(mid)) == mid
    with Memory(**store_args) as again:  # another process, a later day: the same id finds the same memory
        assert again.get(mid)["memory"] == "Mi color favorito es el azul"
        again.update(mid, "Mi color favorito es el verde")
        assert [r["event"] for r in again.history(mid)] == ["ADD", "UPDATE"]
        assert again.get_all(filters={"user_id": "José Ñ 用户"})["results"][0]["id"] == mid


def test_agent_and_run_scope_memories_within_a_user(fresh_ledger: Any):
    m = Memory(ledger=fresh_ledger)
    a = m.add("I have a cat named Luna", user_id="cy", agent_id="pets", run_id="r1")["results"][0]["id"]
    b = m.add("I live in Lisbon", user_id="cy", agent_id="travel")["results"][0]["id"]
    c = m.add("I play the cello", user_id="cy")["results"][0]["id"]

    def ids(**scope: Any) -> set[str]:
        return {it["id"] for it in m.get_all(filters={"user_id": "cy", **scope})["results"]}

    assert ids() == {a, b, c} and ids(agent_id="pets") == {a} and ids(run_id="r1") == {a}
    assert ids(agent_id="travel", run_id="r1") == set()
    assert {it["id"] for it in m.search("where does she live", user_id="cy", agent_id="travel")["results"]} == {b}
    m.update(a, "I have a cat named Luna and a dog named Rex")
    assert (m.get(a)["agent_id"], m.get(a)["run_id"]) == ("pets", "r1")  # an update keeps its scope
    m.delete_all(user_id="cy", agent_id="pets")
    assert ids() == {b, c}


def test_agent_id_alone_adds_and_reads_the_agents_own_memories(fresh_ledger: Any):
    m = Memory(ledger=fresh_ledger)
    own = m.add("I answer in French", agent_id="planner")["results"]
    raw = m.add("Keep answers short", agent_id="planner", run_id="r1", infer=False)["results"][0]["id"]
    users = m.add("I answer in German", user_id="cy", agent_id="planner")["results"][0]["id"]
    mid = own[0]["id"]
    assert own[0]["event"] == "ADD" and parse_memory_id(mid)[0] == "~agent/planner"
    got = m.get(mid)
    assert (got["memory"], got["agent_id"]) == ("I answer in French", "planner") and "user_id" not in got
    listed = m.get_all(agent_id="planner")["results"]
    assert {it["id"] for it in listed} == {mid, raw}  # never the user's memory written by the same agent
    assert {it["id"] for it in m.get_all(filters={"agent_id": "planner", "run_id": "r1"})["results"]} == {raw}
    hits = m.search("answer in French", filters={"agent_id": "planner"})["results"]
    assert hits[0]["id"] == mid and users not in {h["id"] for h in hits}
    assert {it["id"] for it in m.get_all(filters={"user_id": "cy"})["results"]} == {users}
    m.update(mid, "I answer in Spanish")
    assert [r["event"] for r in m.history(mid)] == ["ADD", "UPDATE"] and m.get(mid)["agent_id"] == "planner"
    m.delete(raw)
    assert {it["id"] for it in m.get_all(agent_id="planner")["results"]} == {mid}
    # the ledger keeps them as the agent's own, as every face reads them
    assert [f.value for f in fresh_ledger.profile(agent_id="planner").facts.values()] == ["I answer in Spanish"]
    m.delete_all(agent_id="planner")
    assert m.get_all(agent_id="planner")["results"] == [] and m.get(users)["memory"] == "I answer in German"


def test_metadata_is_kept_merged_and_filtered(fresh_ledger: Any):
    m = Memory(ledger=fresh_ledger)
    add = lambda text, meta: m.add(text, user_id="di", metadata=meta, infer=False)["results"][0]["id"]  # noqa: E731
    tea = add("Drinks tea every morning", {"category": "food", "priority": 3, "tags": ["daily"]})
    run = add("Runs 5k on Sundays", {"category": "sport", "priority": 5})
    add("Reads sci-fi novels", {"category": "hobby", "user_id": "intruder"})  # identity keys are dropped

    def found(flt: dict[str, Any]) -> set[str]:
        return {it["memory"] for it in m.get_all(filters={"user_id": "di", **flt})["results"]}

    assert found({"category": "food"}) == {"Drinks tea every morning"}
    assert found({"priority": {"gte": 4}}) == {"Runs 5k on Sundays"}
    assert found({"category": {"in": ["food", "sport"]}}) == {"Drinks tea every morning", "Runs 5k on Sundays"}
    assert found({"category": {"nin": ["food", "sport"]}}) == {"Reads sci-fi novels"}
    assert found({"tags": {"contains": "daily"}}) == {"Drinks tea every morning"}
    assert found({"priority": "*"}) == {"Drinks tea every morning", "Runs 5k on Sundays"}
    assert found({"OR": [{"category": "hobby"}, {"priority": 5}]}) == {"Reads sci-fi novels", "Runs 5k on Sundays"}
    assert found({"NOT": [{"category": "food"}], "AND": [{"priority": {"lt": 9}}]}) == {"Runs 5k on Sundays"}
    assert {it["memory"] for it in m.search("sunday running", filters={"user_id": "di", "category": "sport"},
                                            threshold=0)["results"]} == {"Runs 5k on Sundays"}
    assert all(it["user_id"] == "di" for it in m.get_all(filters={"user_id": "di"})["results"])
    m.update(tea, metadata={"priority": 1})  # metadata alone: merged, the text kept
    assert m.get(tea)["metadata"] == {"category": "food", "priority": 1, "tags": ["daily"]}
    assert m.get(tea)["memory"] == "Drinks tea every morning"
    m.update(run, "Runs 10k on Sundays")
    assert m.get(run)["metadata"] == {"category": "sport", "priority": 5}


def test_metadata_given_to_remember_is_kept_with_the_new_version(fresh_ledger: Any):
    m = Memory(ledger=fresh_ledger)
    mid = m.add("I love iced americano", user_id="ed", metadata={"src": "chat-1"})["results"][0]["id"]
    m.add("I switched to hot lattes", user_id="ed", metadata={"src": "chat-2"})
    assert m.get(mid)["metadata"] == {"src": "chat-2"} and m.get(mid)["memory"] == "I switched to hot lattes"
    fact = fresh_ledger.profile("ed").facts["preference.drink"]
    assert fact.text == "I switched to hot lattes"  # the ledger still reads and searches the sentence
    assert fact.value == {"memory": "I switched to hot lattes", "metadata": {"src": "chat-2"}}


def test_sensitive_memories_are_withheld_unless_granted(fresh_ledger: Any):
    m = Memory(ledger=fresh_ledger)
    mid = m.add("I have diabetes", user_id="fa")["results"][0]["id"]
    m.add("I live in Porto", user_id="fa")
    assert [it["memory"] for it in m.get_all(filters={"user_id": "fa"})["results"]] == ["I live in Porto"]
    assert m.get(mid) is None
    assert [h["memory"] for h in m.search("diabetes", filters={"user_id": "fa"}, threshold=0)["results"]] == [
        "I live in Porto"]
    assert m.history(mid)[0]["new_memory"] is None  # the version is listed, its text withheld
    care = Memory(ledger=fresh_ledger, allow_sensitive=["health"], purpose="care plan")
    assert care.get(mid)["memory"] == "I have diabetes"
    care.update(mid, "I have type 2 diabetes")
    assert m.get(mid) is None  # the label stays with the new version
    assert fresh_ledger.history("fa", parse_memory_id(mid)[1])[-1].sensitivity == "health"
    assert fresh_ledger.disclosures("fa")  # what care read was recorded
    m.delete_all(user_id="fa")  # withheld ones are deleted too
    assert care.get_all(filters={"user_id": "fa"})["results"] == []


def test_reset_empties_a_store_it_created_and_refuses_any_other(store_args: dict[str, Any], tmp_path: Path):
    with Memory(**store_args) as m:
        m.add("I like tea", user_id="u1")
        m.reset()
        assert m.get_all(filters={"user_id": "u1"})["results"] == []
        assert m.ledger.head() == 0
        m.add("I like coffee", user_id="u1")  # usable again: nobody was erased
        assert [it["memory"] for it in m.get_all(filters={"user_id": "u1"})["results"]] == ["I like coffee"]
    with Memory(**store_args) as other:  # opened on an existing store: never emptied
        with pytest.raises(ResetRefused, match="not created by this Memory"):
            other.reset()
        assert other.get_all(filters={"user_id": "u1"})["results"][0]["memory"] == "I like coffee"
    home = tmp_path / "mine"
    home.mkdir()
    (home / "notes.txt").write_text("mine")
    with Memory(home=home) as m:
        m.add("I like tea", user_id="u1")
        m.reset()
        assert (home / "notes.txt").read_text() == "mine"  # what was there before stays
        assert m.get_all(filters={"user_id": "u1"})["results"] == []


def test_config_maps_the_store_and_warns_about_what_it_ignores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cfg = {"vector_store": {"provider": "qdrant", "config": {"path": "/tmp/q"}}, "llm": {"provider": "openai"},
           "version": "v1.1", "memledger": {"home": str(tmp_path / "s")}}
    with pytest.warns(UserWarning) as caught:
        m = Memory.from_config(cfg)
    assert sorted(str(w.message).split("'")[1] for w in caught) == ["llm", "vector_store"]
    assert m.ledger.settings.home == tmp_path / "s"
    m.close()
    with pytest.raises(BadInput, match=r"config\.vectorstore: is not a mem0 or memledger setting"):
        Memory.from_config({"vectorstore": {}})
    with pytest.raises(BadInput, match=r"config\.memledger\.path: is not a memledger setting"):
        Memory.from_config({"memledger": {"path": "/x"}})
    with pytest.raises(BadInput, match="home: is given both in config and as an argument"):
        Memory({"memledger": {"home": str(tmp_path / "a")}}, home=tmp_path / "b")
    from pydantic import BaseModel

    class MemoryConfig(BaseModel):  # mem0's config object: only the fields the caller set are read
        vector_store: dict[str, Any] = {"provider": "qdrant"}
        memledger: dict[str, Any] | None = None

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Memory(MemoryConfig(memledger={"home": str(tmp_path / "t")})) as from_object:
            assert from_object.ledger.settings.home == tmp_path / "t"
    monkeypatch.setenv("MEMLEDGER_HOME", str(tmp_path / "cli-default"))
    monkeypatch.delenv("MEMLEDGER_DSN", raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Memory() as default:  # the CLI's store
            assert default.ledger.settings.home == tmp_path / "cli-default"
    monkeypatch.setenv("MEMLEDGER_SHARDS", str(tmp_path / "shards.toml"))
    with pytest.raises(BadInput, match="MEMLEDGER_SHARDS"):
        Memory()


def test_async_memory_serves_concurrent_tasks(store_args: dict[str, Any]):
    async def main() -> list[Any]:
        async with AsyncMemory(config_of(store_args)) as m:
            adds = await asyncio.gather(*[m.add(f"I have a pet named Pet{i}", user_id=f"user{i}") for i in range(12)])
            lists = await asyncio.gather(*[m.get_all(filters={"user_id": f"user{i}"}) for i in range(12)])
            mid = adds[0]["results"][0]["id"]
            await m.update(mid, "I have a pet named Rex")
            return [adds, lists, await m.history(mid), await m.search("pet", filters={"user_id": "user0"})]

    adds, lists, hist, found = asyncio.run(main())
    assert [a["results"][0]["event"] for a in adds] == ["ADD"] * 12
    assert [[it["memory"] for it in lst["results"]] for lst in lists] == [[f"I have a pet named Pet{i}"]
                                                                        for i in range(12)]
    assert [r["event"] for r in hist] == ["ADD", "UPDATE"] and found["results"][0]["memory"] == "I have a pet named Rex"
    for name in ("add", "get", "get_all", "search", "update", "delete", "delete_all", "history", "reset"):
        assert asyncio.iscoroutinefunction(getattr(AsyncMemory, name)), name


def test_memory_from_env_default_home_is_relative_to_the_working_directory(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("MEMLEDGER_HOME", raising=False)
    monkeypatch.delenv("MEMLEDGER_DSN", raising=False)
    monkeypatch.delenv("MEMLEDGER_SHARDS", raising=False)
    monkeypatch.chdir(tmp_path)
    with Memory() as m:
        assert Path(m.ledger.settings.home).resolve() == (tmp_path / ".memledger").resolve()
    assert os.path.isdir(tmp_path / ".memledger")


def test_a_message_of_several_statements_keeps_each_one(fresh_ledger: Any):
    m = Memory(ledger=fresh_ledger)
    first = m.add("Hi, I'm Alex. I love iced americano and I live in Lisbon.", user_id="alex")["results"]
    assert [r["memory"] for r in first] == ["Hi, I'm Alex.", "I love iced americano", "I live in Lisbon."]
    changed = m.add("I switched to hot lattes", user_id="alex")["results"]
    assert [(r["event"], r.get("previous_memory")) for r in changed] == [("UPDATE", "I love iced americano")]
    assert sorted(r["memory"] for r in m.get_all(user_id="alex")["results"]) == [
        "Hi, I'm Alex.", "I live in Lisbon.", "I switched to hot lattes"]


def test_statements_split_at_sentences_and_clauses_not_abbreviations():
    from memledger.compat.mem0 import statements

    assert statements("Dr. Lee is my doctor") == ["Dr. Lee is my doctor"]
    assert statements("I moved to St. Louis and my wife loves it") == ["I moved to St. Louis", "my wife loves it"]
    assert statements("我喜欢喝咖啡，我住在杭州。我有一只猫") == ["我喜欢喝咖啡", "我住在杭州。", "我有一只猫"]


def test_a_star_scope_filter_means_any_agent_or_run_and_never_every_user(fresh_ledger: Any):
    m = Memory(ledger=fresh_ledger)
    m.add("I like green tea", user_id="bob", agent_id="travel", infer=False)
    m.add("I like black coffee", user_id="bob", infer=False)
    with_agent = m.get_all(filters={"user_id": "bob", "agent_id": "*"})["results"]
    assert [r["memory"] for r in with_agent] == ["I like green tea"]
    hits = m.search("tea", filters={"user_id": "bob", "agent_id": "*"})["results"]
    assert [r["memory"] for r in hits] == ["I like green tea"]
    assert m.get_all(filters={"user_id": "bob", "run_id": "*"})["results"] == []
    head = fresh_ledger.head()
    with pytest.raises(BadInput) as exc:
        m.get_all(filters={"user_id": "*"})
    assert exc.value.field == "filters.user_id" and "never crosses users" in exc.value.fix
    assert fresh_ledger.head() == head
