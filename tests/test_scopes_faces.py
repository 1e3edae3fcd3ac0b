"""Scopes through every face: the CLI's --agent / --run, the MCP tools' and the HTTP routes' agent_id / run_id, and
LangGraph namespaces (memledger/scopes.py; docs/interfaces.md, "Scopes")."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from memledger import MemoryLedger
from memledger.servers.http import create_app
from memledger.servers.keys import APIKeyStore
from memledger.servers.mcp import build_mcp
from memledger.servers.ops import Service


def test_the_cli_writes_and_reads_by_scope(cli: Any) -> None:
    assert cli("remember", "u", "I drink green tea", "--agent", "a", "--run", "r1")[0] == 0
    assert cli("assert", "u", "home.city", "Berlin", "--text", "I live in Berlin", "--agent", "b", "--run", "r2")[0] == 0
    assert cli("assert", "v", "home.city", "Paris", "--text", "I live in Paris", "--agent", "a")[0] == 0
    hits = cli.json("search", "u", "tea Berlin", "--agent", "a")
    assert [(h["user_id"], h["key"]) for h in hits] == [("u", "preference.drink")]
    assert [h["key"] for h in cli.json("search", "u", "tea Berlin", "--run", "r2")] == ["home.city"]
    assert cli.json("search", "u", "tea Berlin", "--agent", "a", "--run", "r2") == []
    assert set(cli.json("profile", "u", "--agent", "b")["facts"]) == {"home.city"}
    assert set(cli.json("profile", "u")["facts"]) == {"home.city", "preference.drink"}
    assert [(r["key"], r["actor"], r["session_id"]) for r in cli.json("history", "u", "--run", "r1")] == [
        ("preference.drink", "a", "r1")]
    text = cli.json("context", "u", "--agent", "b")["text"]
    assert "Berlin" in text and "green tea" not in text and "Paris" not in text
    # two spellings of one field that differ, and an empty scope: exit 2 naming the flag, nothing written
    head = cli.json("profile", "u")
    code, out, err = cli("assert", "u", "pet.name", "Miso", "--actor", "a", "--agent", "b")
    assert (code, out) == (2, "") and err.startswith("error: --agent: 'b' differs from --actor 'a'") \
        and "give one of --agent and --actor" in err
    code, _, err = cli("remember", "u", "my cat is Miso", "--session", "s", "--run", "t", "--json")
    assert code == 2 and json.loads(err.strip().splitlines()[-1])["error"] == {
        "field": "run", "problem": "'t' differs from --session 's' (the same field, spelled twice)",
        "fix": "give one of --run and --session"}
    code, _, err = cli("search", "u", "tea", "--agent", " ")
    assert code == 2 and err.startswith("error: agent: is empty")
    code, _, err = cli("profile", "u", "--run", "")
    assert code == 2 and err.startswith("error: --run: is empty")
    assert cli.json("profile", "u") == head
    assert "--agent" in cli("search", "--help")[1] and "--run" in cli("remember", "--help")[1]


@pytest.fixture
def served(fresh_ledger: MemoryLedger) -> Any:
    ml = fresh_ledger
    keys = APIKeyStore(ml)
    return ml, Service(ml), keys.create(["u"]).secret


def test_http_takes_agent_id_and_run_id(served: Any) -> None:
    ml, service, secret = served
    ml.assert_fact("v", "home.city", "Paris", text="I live in Paris", agent_id="a", run_id="r1")
    with TestClient(create_app(service), headers={"Authorization": f"Bearer {secret}"}) as http:
        r = http.post("/v1/users/u/memories", json={"text": "I drink green tea", "agent_id": "a", "run_id": "r1"})
        assert r.status_code == 201, r.text
        r = http.post("/v1/users/u/facts/home.city", json={"value": "Berlin", "text": "I live in Berlin",
                                                           "agent_id": "b", "run_id": "r2"})
        assert r.status_code == 201, r.text
        by_a = http.post("/v1/users/u/search", json={"query": "tea Berlin Paris", "agent_id": "a"}).json()
        assert [(h["user_id"], h["key"]) for h in by_a] == [("u", "preference.drink")]
        by_r2 = http.get("/v1/users/u/search", params={"query": "tea Berlin", "run_id": "r2"}).json()
        assert [h["key"] for h in by_r2] == ["home.city"]
        assert set(http.get("/v1/users/u/profile", params={"agent_id": "b"}).json()["facts"]) == {"home.city"}
        assert set(http.get("/v1/users/u/profile").json()["facts"]) == {"home.city", "preference.drink"}
        rows = http.get("/v1/users/u/history", params={"agent_id": "a"}).json()
        assert [(x["key"], x["actor"], x["session_id"]) for x in rows] == [("preference.drink", "a", "r1")]
        text = http.post("/v1/users/u/context", json={"agent_id": "b"}).json()["text"]
        assert "Berlin" in text and "green tea" not in text
        assert "Berlin" in http.get("/v1/users/u/context", params={"run_id": "r2"}).json()["text"]
        head = http.get("/v1/health").json()
        # both spellings, different: 422 naming the field, nothing written
        bad = http.post("/v1/users/u/facts/pet.name", json={"value": "Miso", "actor": "a", "agent_id": "b"})
        assert bad.status_code == 422 and (bad.json()["field"], bad.json()["fix"]) == (
            "agent_id", "give one of agent_id and actor")
        bad = http.post("/v1/users/u/memories", json={"text": "my cat is Miso", "session_id": "s", "run_id": "t"})
        assert bad.status_code == 422 and (bad.json()["field"], bad.json()["fix"]) == (
            "run_id", "give one of run_id and session_id")
        bad = http.get("/v1/users/u/profile", params={"agent_id": ""})
        assert bad.status_code == 422 and bad.json()["field"] == "agent_id"
        assert http.get("/v1/health").json()["head"] == head["head"]
        # the user stays the boundary: a scope never opens another user's memories
        assert http.get("/v1/users/v/profile", params={"agent_id": "a"}).status_code == 403
        assert http.post("/v1/users/v/search", json={"query": "Paris", "agent_id": "a"}).status_code == 403


def test_mcp_tools_take_agent_id_and_run_id(served: Any) -> None:
    ml, service, _ = served

    async def run() -> dict[str, Any]:
        from mcp import Client

        async with Client(build_mcp(service, user="u")) as c:
            out = {}
            out["said"] = await c.call_tool("remember", {"text": "I drink green tea", "agent_id": "a", "run_id": "r1"})
            await c.call_tool("remember", {"text": "I live in Berlin", "agent_id": "b", "run_id": "r2"})
            out["recall"] = await c.call_tool("recall", {"query": "tea Berlin", "agent_id": "a"})
            out["run"] = await c.call_tool("recall", {"query": "tea Berlin", "run_id": "r2"})
            out["profile"] = await c.call_tool("profile", {"agent_id": "b"})
            out["history"] = await c.call_tool("history", {"run_id": "r1"})
            out["context"] = await c.call_tool("context", {"agent_id": "a"})
            out["bad"] = await c.call_tool("remember", {"text": "my cat is Miso", "actor": "a", "agent_id": "b"})
            out["other"] = await c.call_tool("profile", {"user_id": "v", "agent_id": "a"})
            return out

    out = asyncio.run(run())
    assert not out["said"].is_error
    assert [h["key"] for h in out["recall"].structured_content["hits"]] == ["preference.drink"]
    assert [h["key"] for h in out["run"].structured_content["hits"]] == ["residence.city"]
    assert set(out["profile"].structured_content["facts"]) == {"residence.city"}
    assert [(r["key"], r["actor"]) for r in out["history"].structured_content["rows"]] == [("preference.drink", "a")]
    assert "green tea" in out["context"].structured_content["text"]
    assert "Berlin" not in out["context"].structured_content["text"]
    assert out["bad"].is_error and out["bad"].content[0].text.endswith(
        "agent_id: 'b' differs from actor 'a' (the same field, spelled twice) (fix: give one of agent_id and actor)")
    assert out["other"].is_error  # the pinned user only, whatever the scope
    assert set(ml.profile("u").facts) == {"preference.drink", "residence.city"}


def test_langgraph_namespaces_name_the_agent_and_the_run(fresh_ledger: MemoryLedger) -> None:
    pytest.importorskip("langgraph")
    from memledger.integrations.langgraph import MemledgerStore, namespace_scope

    ml = fresh_ledger
    store = MemledgerStore(ml)
    store.put(("u", "agents", "planner"), "drink", {"text": "green tea"})
    store.put(("u", "agents", "planner", "runs", "r7"), "city", {"text": "lives in Berlin"})
    store.put(("u", "runs", "r8"), "pet", {"text": "a cat called Miso"})
    store.put(("u", "prefs"), "food", {"text": "likes ramen"})
    store.put(("v", "agents", "planner"), "drink", {"text": "black coffee"})
    # the namespaces address the items as before
    assert store.get(("u", "agents", "planner"), "drink").value == {"text": "green tea"}
    assert [i.key for i in store.search(("u", "agents", "planner"))] == ["drink", "city"]
    # and the ledger reads them by scope
    q = "tea Berlin cat ramen coffee"
    by_agent = ml.search("u", q, agent_id="planner")
    assert sorted(h.key for h in by_agent) == ["lg.agents.planner.drink", "lg.agents.planner.runs.r7.city"]
    assert [h.key for h in ml.search("u", q, run_id="r7")] == ["lg.agents.planner.runs.r7.city"]
    assert [h.key for h in ml.search("u", q, run_id="r8")] == ["lg.runs.r8.pet"]
    assert all(h.user_id == "u" for h in by_agent)
    assert namespace_scope(("u", "agents", "a", "runs", "r")) == {"actor": "a", "session_id": "r"}
    assert namespace_scope(("u", "prefs", "agents", "a")) == {}
    assert namespace_scope(("u", "agents", "")) == {}  # no identifier: no scope, the item stored as ever
    store.delete(("u", "agents", "planner"), "drink")
    assert [h.key for h in ml.search("u", q, agent_id="planner")] == ["lg.agents.planner.runs.r7.city"]


def test_session_end_closes_the_runs_memories_through_the_cli_and_http(cli: Any, fresh_ledger: MemoryLedger) -> None:
    assert cli("session", "start", "u", "r1")[0] == 0
    assert cli("remember", "u", "I drink green tea", "--run", "r1")[0] == 0
    assert cli("assert", "u", "home.city", "Berlin", "--run", "r2")[0] == 0
    code, out, _ = cli("session", "end", "u", "r1", "--close-memories")
    assert code == 0 and "closed 1 memories of run r1: preference.drink" in out
    assert set(cli.json("profile", "u")["facts"]) == {"home.city"}
    assert "--close-memories" in cli("session", "end", "--help")[1]
    # a run named only on its writes was never started: closing it starts and ends it
    code, out, _ = cli("session", "end", "u", "r2", "--close-memories")
    assert code == 0 and "closed 1 memories of run r2: home.city" in out, out
    assert cli.json("profile", "u")["facts"] == {}
    code, _, err = cli("session", "end", "u", "r9")  # without --close-memories a run never started is refused
    assert code == 2 and "was never started" in err

    ml = fresh_ledger  # the same store, through the HTTP route
    ml.session_start("w", "r5")
    ml.assert_fact("w", "pet.name", "Miso", run_id="r5")
    admin = APIKeyStore(ml).create(["w"]).secret
    with TestClient(create_app(Service(ml)), headers={"Authorization": f"Bearer {admin}"}) as http:
        r = http.post("/v1/users/w/sessions/r5/end", json={"close_memories": True})
        assert r.status_code == 201, r.text
        body = r.json()
        assert [c["key"] for c in body["closed_memories"]] == ["pet.name"]
        assert int(r.headers["X-Ledger-Position"]) == body["closed_memories"][-1]["position"]
    assert ml.profile("w").facts == {}


def test_time_travel_takes_the_scope_through_the_cli_and_http(cli: Any, fresh_ledger: MemoryLedger) -> None:
    assert cli("assert", "u", "preference.drink", "tea", "--agent", "a", "--observed-at", "2024-01-01T00:00:00Z")[0] == 0
    assert cli("assert", "u", "home.city", "Berlin", "--agent", "b", "--observed-at", "2024-01-01T00:00:00Z")[0] == 0
    got = cli.json("true-at", "u", "--valid-at", "2024-03-01T00:00:00Z", "--agent", "a")
    assert {k: f["value"] for k, f in got["facts"].items()} == {"preference.drink": "tea"}
    got = cli.json("believed", "u", "--as-of", "2100-01-01T00:00:00Z", "--agent", "b")
    assert set(got["facts"]) == {"home.city"}
    ml = fresh_ledger
    secret = APIKeyStore(ml).create(["u"]).secret
    with TestClient(create_app(Service(ml)), headers={"Authorization": f"Bearer {secret}"}) as http:
        r = http.get("/v1/users/u/true-at", params={"valid_at": "2024-03-01T00:00:00Z", "agent_id": "b"})
        assert r.status_code == 200 and set(r.json()["facts"]) == {"home.city"}
        r = http.get("/v1/users/u/believed", params={"as_of": "2100-01-01T00:00:00Z", "agent_id": "a"})
        assert r.status_code == 200 and set(r.json()["facts"]) == {"preference.drink"}
