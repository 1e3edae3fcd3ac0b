"""An agent's own memories (``agent_id`` and no user, kept under ``~agent/A``) through the faces other than the
Python API and the CLI (tests/test_scopes_agent_own.py): MCP tools called by a real MCP client, the
mem0-compatible API, the mem0 importer and HTTP. Both backends."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ledger.errors import BadInput
from memledger import MemoryLedger
from memledger.servers.keys import Principal
from memledger.servers.mcp import UserPolicy, build_mcp
from memledger.servers.ops import Service


def _mcp(ml: MemoryLedger, calls: list[tuple[str, dict[str, Any]]], **opts: Any) -> list[Any]:
    async def run() -> list[Any]:
        from mcp import Client

        async with Client(build_mcp(Service(ml), **opts)) as c:
            return [await c.call_tool(name, args) for name, args in calls]

    return asyncio.run(run())


def test_mcp_tools_with_agent_id_alone_use_the_agents_own_memories(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    ml.assert_fact("u", "style.length", "medium", text="keep it medium", agent_id="planner")
    ml.assert_fact(key="style.length", value="long", agent_id="planner")
    said, corrected, told, retracted, recall, profile, history, context, believed, passed_back = _mcp(ml, [
        ("remember", {"text": "I answer in French", "agent_id": "planner"}),
        ("correct", {"key": "style.length", "value": "short", "agent_id": "planner"}),
        ("remember", {"text": "I drink green tea", "actor": "planner"}),   # a write's actor is its agent
        ("retract", {"key": "preference.drink", "agent_id": "planner", "reason": "not mine"}),
        ("recall", {"query": "French", "agent_id": "planner"}),
        ("profile", {"agent_id": "planner"}),
        ("history", {"agent_id": "planner", "key": "style.length"}),
        ("context", {"agent_id": "planner", "query": "language"}),
        ("believed", {"agent_id": "planner", "as_of": "2100-01-01T00:00:00Z"}),
        ("profile", {"user_id": "~agent/planner", "agent_id": "planner"}),  # a receipt's user_id, passed back
    ])
    for out in (said, corrected, told, retracted, recall, profile, history, context, believed, passed_back):
        assert not out.is_error, out.content[0].text
    assert said.structured_content["user_id"] == "~agent/planner"
    assert corrected.structured_content["user_id"] == "~agent/planner"
    assert told.structured_content["user_id"] == "~agent/planner"
    hits = recall.structured_content["hits"]
    assert hits and {h["user_id"] for h in hits} == {"~agent/planner"} and hits[0]["text"] == "I answer in French"
    facts = profile.structured_content["facts"]
    assert profile.structured_content["user_id"] == "~agent/planner"
    assert sorted(f["value"] for f in facts.values()) == ["I answer in French", "short"]
    assert [(r["value"], r["actor"]) for r in history.structured_content["rows"]] == [("long", "planner"),
                                                                                           ("short", "planner")]
    assert "French" in context.structured_content["text"] and "medium" not in context.structured_content["text"]
    assert set(believed.structured_content["facts"]) == set(facts)
    assert passed_back.structured_content["facts"] == facts
    # the user the planner wrote about is untouched, and the agent's own memories are not the user's
    assert {k: f.value for k, f in ml.profile("u").facts.items()} == {"style.length": "medium"}
    assert sorted(f.value for f in ml.profile(agent_id="planner").facts.values()) == ["I answer in French", "short"]


def test_mcp_time_travel_audit_and_forget_scope_take_an_agent_alone(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    ml.assert_fact(key="style.length", value="short", agent_id="planner", observed_at="2024-01-01T00:00:00Z")
    ml.assert_fact("u", "style.length", "medium", agent_id="planner")
    true_at, diff, audit, forgot = _mcp(ml, [
        ("true_at", {"agent_id": "planner", "valid_at": "2024-06-01T00:00:00Z"}),
        ("diff", {"agent_id": "planner", "from_as_of": "2000-01-01T00:00:00Z", "to_as_of": "2100-01-01T00:00:00Z"}),
        ("audit", {"agent_id": "planner"}),
        ("forget_scope", {"agent_id": "planner", "confirm": "planner"}),
    ], allow_destructive=True)
    for out in (true_at, diff, audit, forgot):
        assert not out.is_error, out.content[0].text
    assert {k: f["value"] for k, f in true_at.structured_content["facts"].items()} == {"style.length": "short"}
    assert diff.structured_content["user_id"] == "~agent/planner"
    assert diff.structured_content["added"]["style.length"]["after"]["value"] == "short"
    assert audit.structured_content["user_id"] == "~agent/planner"
    assert audit.structured_content["facts"]["style.length"]["belief"]["value"] == "short"
    assert ml.profile(agent_id="planner").facts == {}
    assert ml.profile("u").facts["style.length"].value == "medium"  # the user's, by the same agent, kept


def test_mcp_refuses_an_agents_own_id_as_a_user_and_a_call_naming_nobody(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    ml.remember(text="I answer in French", agent_id="planner")
    head = ml.head()
    typed, other, nobody, bad_agent, also = _mcp(ml, [
        ("remember", {"user_id": "~agent/planner", "text": "my cat is Miso"}),
        ("profile", {"user_id": "~agent/planner", "agent_id": "writer"}),
        ("profile", {}),
        ("remember", {"text": "my cat is Miso", "agent_id": " "}),
        ("recall", {"query": "French", "agent_id": "writer", "also": ["~agent/planner"]}),
    ])
    assert typed.is_error and "user_id: '~agent/planner' starts with '~agent/'" in typed.content[0].text
    assert "leave the user out and give agent_id='planner'" in typed.content[0].text
    assert other.is_error and "user_id: '~agent/planner' starts with '~agent/'" in other.content[0].text
    assert nobody.is_error and "user_id: missing" in nobody.content[0].text
    assert bad_agent.is_error and "agent_id: is empty" in bad_agent.content[0].text
    assert also.is_error and "kept for agents' own memories" in also.content[0].text
    assert ml.head() == head


def test_mcp_pinned_or_keyed_to_users_keeps_agent_id_a_scope_within_the_user(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    (said,) = _mcp(ml, [("remember", {"text": "I drink green tea", "agent_id": "planner"})], user="u")
    assert said.structured_content["user_id"] == "u"  # pinned: the pinned user, written by the planner
    assert ml.profile(agent_id="planner").facts == {}
    policy = UserPolicy()
    one = Principal("k1", users=frozenset({"u"}))
    assert policy.resolve(None, one, "planner") == "u"                   # the key's one user
    assert policy.resolve(None, Principal("k2", all_users=True, admin=True), "planner") == "~agent/planner"
    with pytest.raises(BadInput) as e:
        policy.resolve(None, Principal("k3", users=frozenset({"u", "v"})), "planner")
    assert e.value.field == "user_id"
    with pytest.raises(PermissionError):
        UserPolicy(require_key=True).resolve(None, None, "planner")


def test_http_agent_routes_remember_read_and_search_an_agents_own_memories(fresh_ledger: MemoryLedger) -> None:
    from fastapi.testclient import TestClient

    from memledger.servers.http import create_app
    from memledger.servers.keys import APIKeyStore

    ml = fresh_ledger
    ml.assert_fact("u", "style.length", "medium", text="keep it medium", agent_id="planner")
    keys = APIKeyStore(ml)
    admin, users_admin = keys.create([], admin=True).secret, keys.create(["u"], admin=True).secret
    with TestClient(create_app(Service(ml), mcp=False), headers={"Authorization": f"Bearer {admin}"}) as http:
        r = http.post("/v1/agents/planner/memories", json={"text": "I answer in French", "run_id": "r1"})
        assert r.status_code == 201, r.text
        assert r.json()["user_id"] == "~agent/planner" and int(r.headers["X-Ledger-Position"]) > 0
        prof = http.get("/v1/agents/planner/profile").json()
        assert prof["user_id"] == "~agent/planner"
        assert [f["value"] for f in prof["facts"].values()] == ["I answer in French"]
        assert http.get("/v1/agents/planner/profile", params={"run_id": "r2"}).json()["facts"] == {}
        rows = http.get("/v1/agents/planner/history").json()
        assert [(x["value"], x["actor"], x["session_id"]) for x in rows] == [("I answer in French", "planner", "r1")]
        hits = http.post("/v1/agents/planner/search", json={"query": "answer in French"}).json()
        assert [(h["user_id"], h["text"]) for h in hits] == [("~agent/planner", "I answer in French")]
        assert http.get("/v1/agents/writer/profile").json()["facts"] == {}  # another agent's own: empty
        head = http.get("/v1/health").json()["head"]
        # refusals: the field and the fix, nothing written
        bad = http.post("/v1/agents/planner/memories", json={"text": "my cat is Miso", "agent_id": "writer"})
        assert bad.status_code == 422 and bad.json()["field"] == "agent_id" and "leave agent_id out" in bad.json()["fix"]
        bad = http.post("/v1/agents/planner/search", json={"query": "French", "also": ["u"]})
        assert bad.status_code == 422 and bad.json()["field"] == "also"
        bad = http.get("/v1/agents/%20/profile")
        assert bad.status_code == 422 and bad.json()["field"] == "agent_id"
        bad = http.get("/v1/agents/planner/profile", headers={"Authorization": f"Bearer {users_admin}"})
        assert bad.status_code == 403 and bad.json()["field"] == "agent_id"
        assert "admin key created without --user" in bad.json()["fix"]
        assert http.get("/v1/health").json()["head"] == head
        ml.erase(agent_id="planner")
        gone = http.get("/v1/agents/planner/profile")
        assert gone.status_code == 410 and gone.json()["field"] == "agent_id"
        spec = http.get("/openapi.json").json()["paths"]["/v1/agents/{agent_id}/memories"]["post"]["responses"]
        assert {"201", "403", "410", "422"} <= set(spec)
    assert {k: f.value for k, f in ml.profile("u").facts.items()} == {"style.length": "medium"}
