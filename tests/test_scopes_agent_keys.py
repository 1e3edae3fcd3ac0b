"""A key limited to an agent (``memledger keys create --agent A``, with or without ``--user``) reaches that agent's
own memories over HTTP (``/v1/agents/A/...``) and MCP (``/mcp`` of ``serve http``, a real MCP client), and nothing
else outside its limits: another agent's own memories and a user the key does not hold are refused, 403
problem+json naming the field over HTTP, a tool error over MCP, with nothing written. Both backends."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from memledger import MemoryLedger
from memledger.servers.http import create_app
from memledger.servers.ops import Service

NEVER = "2100-01-01T00:00:00Z"


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLEDGER_EMBEDDER", "hash")


def _seed(ml: MemoryLedger) -> None:
    ml.assert_fact(key="style.length", value="short", text="keep answers short", agent_id="a")    # a's own
    ml.assert_fact(key="style.length", value="long", text="write long answers", agent_id="b")     # b's own
    ml.assert_fact("u", "preference.drink", "green tea", text="I drink green tea", agent_id="a")
    ml.assert_fact("u", "home.city", "Berlin", text="I live in Berlin", agent_id="b")
    ml.assert_fact("v", "pet.name", "Miso", text="my cat is Miso", agent_id="a")


def _refused(r: httpx.Response, field: str) -> dict[str, Any]:
    assert r.status_code == 403 and r.headers["content-type"] == "application/problem+json", r.text
    assert r.json()["field"] == field, r.json()
    return r.json()


def test_a_key_limited_to_an_agent_reaches_its_own_memories_over_http(fresh_ledger: MemoryLedger,
                                                                      cli: Any) -> None:
    ml = fresh_ledger
    _seed(ml)
    only = cli.json("keys", "create", "--agent", "a")  # no user: the agent's own memories alone
    assert (only["users"], only["agent"], only["admin"]) == ([], "a", False)
    code, _, err = cli("keys", "create", "--agent", "a")
    assert code == 0 and "for no user as agent a" in err
    with_user = cli.json("keys", "create", "--user", "u", "--agent", "a")
    plain = cli.json("keys", "create", "--user", "u")
    code, out, err = cli("keys", "create")
    assert (code, out) == (2, "") and err.startswith("error: --user: no user given") and "--agent A alone" in err
    app = create_app(Service(ml), mcp=False)
    with TestClient(app, headers={"Authorization": f"Bearer {only['secret']}"}) as http:
        prof = http.get("/v1/agents/a/profile")
        assert prof.status_code == 200, prof.text
        assert {k: f["value"] for k, f in prof.json()["facts"].items()} == {"style.length": "short"}
        r = http.post("/v1/agents/a/memories", json={"text": "I answer in French"})
        assert r.status_code == 201 and r.json()["user_id"] == "~agent/a", r.text
        r = http.post("/v1/agents/a/facts/style.length/corrections", json={"value": "brief"})
        assert r.status_code == 201 and r.json()["version"] == 2, r.text
        assert http.get("/v1/agents/a/audit").json()["facts"]["style.length"]["belief"]["value"] == "brief"
        assert http.get("/v1/agents/a/diff", params={"from": "2000-01-01T00:00:00Z", "to": NEVER}).status_code == 200
        hits = http.post("/v1/agents/a/search", json={"query": "answer in French"}).json()
        assert [(h["user_id"], h["text"]) for h in hits][:1] == [("~agent/a", "I answer in French")]
        assert http.get("/v1/agents/a/export").json()["user_id"] == "~agent/a"
        head = http.get("/v1/health").json()["head"]
        # another agent's own memories: 403 naming agent_id, nothing written
        body = _refused(http.get("/v1/agents/b/profile"), "agent_id")
        assert body["problem"] == "this API key is limited to agent 'a', not 'b'"
        assert body["fix"] == "use /v1/agents/a/..., or a key for agent 'b'"
        _refused(http.post("/v1/agents/b/memories", json={"text": "I like jazz"}), "agent_id")
        _refused(http.post("/v1/agents/b/facts/style.length/retractions", json={}), "agent_id")
        # no user's memories: the key holds none
        _refused(http.get("/v1/users/u/profile"), "user_id")
        _refused(http.post("/v1/users/u/memories", json={"text": "I drink coffee"}), "user_id")
        # a body naming another agent on the key's own path: 422 naming the field
        bad = http.post("/v1/agents/a/memories", json={"text": "I like jazz", "agent_id": "b"})
        assert bad.status_code == 422 and bad.json()["field"] == "agent_id"
        assert http.get("/v1/health").json()["head"] == head
    with TestClient(app, headers={"Authorization": f"Bearer {with_user['secret']}"}) as http:
        assert {k: f["value"] for k, f in http.get("/v1/agents/a/profile").json()["facts"].items()} == {
            "style.length": "brief", next(k for k in ml.profile(agent_id="a").facts if k.startswith("memory.")):
                "I answer in French"}
        assert set(http.get("/v1/users/u/profile").json()["facts"]) == {"preference.drink"}  # narrowed to a
        _refused(http.get("/v1/agents/b/history"), "agent_id")
        _refused(http.get("/v1/users/v/profile"), "user_id")  # the user stays the boundary
    with TestClient(app, headers={"Authorization": f"Bearer {plain['secret']}"}) as http:
        body = _refused(http.get("/v1/agents/a/profile"), "agent_id")  # a key of users and no agent, as before
        assert "keys create --agent a" in body["fix"]
    assert ml.profile(agent_id="b").facts["style.length"].value == "long"


def _mcp(ml: MemoryLedger, secret: str, calls: list[tuple[str, dict[str, Any]]],
         resource: str | None = None) -> tuple[list[Any], Any]:
    """Each call made by a real MCP client through ``/mcp`` of the HTTP app with ``secret``; then ``resource`` read
    (its error, or None)."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    app = create_app(Service(ml))
    base = "http://127.0.0.1:8765"  # the MCP endpoint checks the Host header as it would on a loopback server

    async def run() -> tuple[list[Any], Any]:
        async with app.router.lifespan_context(app):
            hc = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base, timeout=30,
                                   headers={"Authorization": f"Bearer {secret}"})
            async with Client(streamable_http_client(base + "/mcp", http_client=hc)) as c:
                out = [await c.call_tool(name, args) for name, args in calls]
                error = None
                if resource is not None:
                    try:
                        await c.read_resource(resource)
                    except Exception as exc:  # noqa: BLE001 - the refusal is what is checked
                        error = exc
                return out, error

    return asyncio.run(asyncio.wait_for(run(), 60))


def test_a_key_limited_to_an_agent_reaches_its_own_memories_over_mcp(fresh_ledger: MemoryLedger) -> None:
    from memledger.servers.keys import APIKeyStore

    ml = fresh_ledger
    _seed(ml)
    keys = APIKeyStore(ml)
    only, with_user = keys.create([], agent="a").secret, keys.create(["u"], agent="a").secret
    head = ml.head()
    (profile, said, corrected, diff, audit, other, other_actor, user, log), res = _mcp(ml, only, [
        ("profile", {}),                                                   # no user: the agent's own
        ("remember", {"text": "I answer in French"}),
        ("correct", {"key": "style.length", "value": "brief", "reason": "misheard"}),
        ("diff", {"from_as_of": "2000-01-01T00:00:00Z", "to_as_of": NEVER}),
        ("audit", {}),
        ("profile", {"agent_id": "b"}),
        ("remember", {"text": "I like jazz", "actor": "b"}),
        ("profile", {"user_id": "u"}),
        ("log_message", {"user_id": "u", "session_id": "s1", "role": "user", "message_id": "m1", "text": "hi"}),
    ], resource="memledger://users/u/profile")
    for out in (profile, said, corrected, diff, audit):
        assert not out.is_error, out.content[0].text
    assert profile.structured_content["user_id"] == "~agent/a"
    assert {k: f["value"] for k, f in profile.structured_content["facts"].items()} == {"style.length": "short"}
    assert said.structured_content["user_id"] == "~agent/a" and corrected.structured_content["version"] == 2
    assert diff.structured_content["user_id"] == "~agent/a"
    assert audit.structured_content["facts"]["style.length"]["belief"]["value"] == "brief"
    assert other.is_error and "refused: agent_id: 'b' is not the agent this API key is limited to ('a')" in \
        other.content[0].text
    assert other_actor.is_error and "actor: 'b' is not the agent" in other_actor.content[0].text
    assert user.is_error and "user_id: this API key does not hold user 'u'" in user.content[0].text
    assert log.is_error and "the tool log_message cannot be limited to an agent" in log.content[0].text
    assert res is not None and "limited to agent 'a'" in str(res)
    assert ml.head() == head + 2  # the remember and the correction; nothing refused was written
    assert ml.profile(agent_id="b").facts["style.length"].value == "long" and ml.messages("u") == []
    # a key holding a user as well: no user is that user (narrowed to a); the agent's own by its id passed back
    (u_profile, own, diff_u, own_diff, v_profile), _ = _mcp(ml, with_user, [
        ("profile", {}),
        ("profile", {"user_id": "~agent/a"}),
        ("diff", {"from_as_of": "2000-01-01T00:00:00Z", "to_as_of": NEVER}),
        ("diff", {"user_id": "~agent/a", "from_as_of": "2000-01-01T00:00:00Z", "to_as_of": NEVER}),
        ("profile", {"user_id": "v"}),
    ])
    assert not u_profile.is_error and u_profile.structured_content["user_id"] == "u"
    assert set(u_profile.structured_content["facts"]) == {"preference.drink"}
    assert not own.is_error and own.structured_content["facts"]["style.length"]["value"] == "brief"
    assert diff_u.is_error and "diff of a user cannot be limited to an agent" in diff_u.content[0].text
    assert not own_diff.is_error and own_diff.structured_content["user_id"] == "~agent/a"
    assert v_profile.is_error and "does not hold user 'v'" in v_profile.content[0].text
    # a key limited to another agent reaches neither a's own memories nor u
    (not_mine,), _ = _mcp(ml, keys.create([], agent="b").secret, [("profile", {"user_id": "~agent/a"})])
    assert not_mine.is_error and "'~agent/a' starts with '~agent/'" in not_mine.content[0].text
