"""Erasing an agent's own memories over the servers: ``DELETE /v1/agents/{agent_id}`` (the user route's rules: an
admin key, ``Confirm-Erase`` repeating the agent id, the receipt with its signed certificate), the MCP ``erase``
tool with ``agent_id`` and no user (a real MCP client through ``/mcp``), and the ``/ui`` page of an agent's own
memories, the one page a key limited to that agent opens. What the agent wrote about a user is the user's and is
never touched. Bad input: problem+json naming the field (a tool error over MCP), nothing written. Both backends."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from memledger import MemoryLedger
from memledger.servers.http import create_app
from memledger.servers.keys import APIKeyStore
from memledger.servers.ops import Service

FORM = {"content-type": "application/x-www-form-urlencoded"}


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLEDGER_EMBEDDER", "hash")


def _seed(ml: MemoryLedger) -> None:
    ml.assert_fact(key="style.length", value="short", text="keep answers short", agent_id="a")    # a's own
    ml.assert_fact(key="style.tone", value="dry", text="answer drily", agent_id="a", run_id="r1")  # a's own
    ml.assert_fact(key="style.length", value="long", text="write long answers", agent_id="b")     # b's own
    ml.assert_fact("u", "preference.drink", "green tea", text="I drink green tea", agent_id="a")  # u's, by a
    ml.assert_fact("u", "home.city", "Berlin", text="I live in Berlin")


def _problem(r: httpx.Response, status: int, field: str) -> dict[str, Any]:
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"] == "application/problem+json", r.headers["content-type"]
    body = r.json()
    assert body["field"] == field and body["problem"] and body["fix"], body
    return body


def _users_memories_kept(ml: MemoryLedger) -> None:
    """u's memories, the one agent a wrote included, are all there and readable."""
    assert {k: f.value for k, f in ml.profile("u").facts.items()} == {"preference.drink": "green tea",
                                                                         "home.city": "Berlin"}
    assert [(h.value, h.actor) for h in ml.history("u", "preference.drink")] == [("green tea", "a")]
    assert {k: f.value for k, f in ml.profile("u", agent_id="a").facts.items()} == {"preference.drink": "green tea"}
    assert not ml.keystore.is_destroyed("u") and ml.profile("u").erased is False


def test_delete_agent_erases_its_own_memories_as_the_user_route_does(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    _seed(ml)
    keys = APIKeyStore(ml)
    admin = keys.create([], admin=True).secret
    secrets = {"admin of u": keys.create(["u"], admin=True).secret, "agent a": keys.create([], agent="a").secret,
               "agent a and u": keys.create(["u"], agent="a").secret, "user u": keys.create(["u"]).secret,
               "admin of agent b": keys.create([], admin=True, agent="b").secret}
    app = create_app(Service(ml), mcp=False)
    with TestClient(app, headers={"Authorization": f"Bearer {admin}"}) as http:
        head = http.get("/v1/health").json()["head"]
        # refused: 403 naming what the key lacks, before anything is looked at
        for who, field in (("admin of u", "agent_id"), ("user u", "agent_id"), ("agent a", "Authorization"),
                           ("agent a and u", "Authorization"), ("admin of agent b", "agent_id")):
            r = http.delete("/v1/agents/a", headers={"Authorization": f"Bearer {secrets[who]}",
                                                     "Confirm-Erase": "a"})
            body = _problem(r, 403, field)
            assert ("admin" in body["problem"]) == (field == "Authorization"), (who, body)
        # bad input: 422 naming the field
        _problem(http.delete("/v1/agents/a"), 422, "Confirm-Erase")
        body = _problem(http.delete("/v1/agents/a", headers={"Confirm-Erase": "~agent/a"}), 422, "Confirm-Erase")
        assert body["fix"] == "send Confirm-Erase: a"
        _problem(http.delete("/v1/agents/%20", headers={"Confirm-Erase": " "}), 422, "agent_id")
        body = _problem(http.delete("/v1/agents/nobody", headers={"Confirm-Erase": "nobody"}), 422, "agent_id")
        assert body["problem"].startswith("agent 'nobody' has no own memories")
        assert http.get("/v1/health").json()["head"] == head  # nothing written by any refusal
        assert ml.profile(agent_id="a").erased is False and not ml.keystore.is_destroyed("~agent/a")

        r = http.delete("/v1/agents/a", headers={"Confirm-Erase": "a"})
        assert r.status_code == 200, r.text
        receipt = r.json()
        assert (receipt["user_id"], receipt["key_destroyed"], receipt["facts"], receipt["already_erased"]) == (
            "~agent/a", True, 2, False)
        assert int(r.headers["X-Ledger-Position"]) == receipt["position"] == head + 1
        cert = receipt["certificate"]
        assert (cert["user_id"], cert["key_ids"], cert["rows_purged"]["profile.facts"]) == (
            "~agent/a", ["user_keys:~agent/a"], 2)
        assert ml.verify_certificate(cert) is None  # signed with the store's key
        # the agent's own memories are gone from every route; again is idempotent, as for a user
        body = _problem(http.get("/v1/agents/a/profile"), 410, "agent_id")
        assert body["problem"] == "agent 'a''s own memories were erased"
        _problem(http.post("/v1/agents/a/memories", json={"text": "I answer in French"}), 410, "agent_id")
        again = http.delete("/v1/agents/a", headers={"Confirm-Erase": "a"})
        assert again.status_code == 200 and again.json()["already_erased"] is True
        # what agent a wrote about u, b's own memories: untouched
        assert http.get("/v1/users/u/profile", params={"agent_id": "a"}).json()["facts"]["preference.drink"][
            "value"] == "green tea"
        assert http.get("/v1/agents/b/profile").json()["facts"]["style.length"]["value"] == "long"
        # an admin key limited to an agent erases that agent's own memories, as an admin key holding a user erases it
        r = http.delete("/v1/agents/b", headers={"Authorization": f"Bearer {secrets['admin of agent b']}",
                                                 "Confirm-Erase": "b"})
        assert r.status_code == 200 and r.json()["user_id"] == "~agent/b", r.text
        spec = http.get("/openapi.json").json()["paths"]
        user_route, agent_route = spec["/v1/users/{user_id}"]["delete"], spec["/v1/agents/{agent_id}"]["delete"]
        assert set(agent_route["responses"]) == set(user_route["responses"]) >= {"200", "403", "409", "410", "422"}
        assert agent_route["responses"]["410"]["content"] == {
            "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
        assert any(p["name"] == "Confirm-Erase" and p["in"] == "header" for p in agent_route["parameters"])
    _users_memories_kept(ml)
    assert ml.profile(agent_id="a").erased is True and ml.profile(agent_id="a").facts == {}


def _mcp(ml: MemoryLedger, calls: list[tuple[str, str, dict[str, Any]]]) -> list[Any]:
    """Each (key, tool, arguments) called by a real MCP client through ``/mcp`` of the HTTP app served with
    ``--allow-destructive``, one client per call."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    app = create_app(Service(ml), allow_destructive=True)  # an app's MCP session manager runs once
    base = "http://127.0.0.1:8765"  # the MCP endpoint checks the Host header as it would on a loopback server

    async def run() -> list[Any]:
        out: list[Any] = []
        async with app.router.lifespan_context(app):
            for secret, name, args in calls:
                hc = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base, timeout=30,
                                       headers={"Authorization": f"Bearer {secret}"})
                async with Client(streamable_http_client(base + "/mcp", http_client=hc)) as c:
                    if not out:
                        tools = {t.name: t for t in (await c.list_tools()).tools}
                        assert "agent_id" in tools["erase"].input_schema["properties"]
                    out.append(await c.call_tool(name, args))
        return out

    return asyncio.run(asyncio.wait_for(run(), 60))


def test_mcp_erase_takes_agent_id_with_an_admin_key(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    _seed(ml)
    keys = APIKeyStore(ml)
    admin, of_u = keys.create([], admin=True).secret, keys.create(["u"], admin=True).secret
    agent_a, agent_a_u = keys.create([], agent="a").secret, keys.create(["u"], agent="a").secret
    head = ml.head()
    refused = _mcp(ml, [
        (agent_a, "erase", {"confirm": "a"}),                                  # a key limited to the agent
        (agent_a, "erase", {"agent_id": "a", "confirm": "a"}),
        (agent_a_u, "erase", {"user_id": "u", "confirm": "u"}),
        (admin, "erase", {"agent_id": "a", "confirm": "~agent/a"}),            # confirm repeats the agent id
        (admin, "erase", {"agent_id": "a", "confirm": "b"}),
        (admin, "erase", {"agent_id": "a", "user_id": "u", "confirm": "u"}),  # erasure is whole-user
        (of_u, "erase", {"agent_id": "a", "confirm": "a"}),                    # its one user is u: not a's own
        (admin, "erase", {"agent_id": "nobody", "confirm": "nobody"}),
        (admin, "erase", {"agent_id": " ", "confirm": " "}),
    ])
    texts = [r.content[0].text for r in refused]
    assert all(r.is_error for r in refused), texts
    for text in texts[:3]:
        assert "refused: erase needs an admin API key" in text, text
    assert "confirm: '~agent/a' is not the agent whose own memories are being erased (fix: pass confirm='a'" in \
        texts[3]
    assert "confirm: 'b' is not the agent" in texts[4]
    for text in texts[5:7]:
        assert "agent_id: erase destroys a whole user (here 'u') and cannot be limited to an agent" in text, text
    assert "agent_id: agent 'nobody' has no own memories" in texts[7]
    assert "agent_id:" in texts[8]
    assert ml.head() == head and not ml.keystore.is_destroyed("~agent/a")  # nothing written, nothing destroyed

    (done, again, read) = _mcp(ml, [(admin, "erase", {"agent_id": "a", "confirm": "a"}),
                                     (admin, "erase", {"agent_id": "a", "confirm": "a"}),
                                     (admin, "profile", {"agent_id": "a"})])
    assert not done.is_error, done.content[0].text
    receipt = done.structured_content
    assert (receipt["user_id"], receipt["key_destroyed"], receipt["facts"]) == ("~agent/a", True, 2)
    assert ml.verify_certificate(receipt["certificate"]) is None
    assert not again.is_error and again.structured_content["already_erased"] is True
    assert read.structured_content["erased"] is True and read.structured_content["facts"] == {}
    _users_memories_kept(ml)
    assert ml.profile(agent_id="b").facts["style.length"].value == "long"


def test_a_key_limited_to_an_agent_opens_its_own_memories_page_alone(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    _seed(ml)
    keys = APIKeyStore(ml)
    secrets = {"agent a": keys.create(["u"], agent="a").secret, "agent b": keys.create([], agent="b").secret,
               "user u": keys.create(["u"]).secret, "admin": keys.create([], admin=True).secret}
    app = create_app(Service(ml), mcp=False)
    with TestClient(app, base_url="http://127.0.0.1") as http:
        # signing in with it is allowed now, and lands on its agent's own page (not the health page it may not see)
        r = http.post("/ui/login", content=f"key={secrets['agent a']}&next=/ui/health", headers=FORM,
                      follow_redirects=False)
        assert (r.status_code, r.headers["location"]) == (303, "/ui/users/~agent%2Fa")
        r = http.post("/ui/login", content=f"key={secrets['agent a']}&next=/ui/users/~agent/a%23as_of%3D2030",
                      headers=FORM, follow_redirects=False)
        assert (r.status_code, r.headers["location"]) == (303, "/ui/users/~agent/a#as_of=2030")  # its own: kept
        head = ml.head()
        for path in ("/ui/users/~agent%2Fa", "/ui/users/~agent/a"):
            page = http.get(path)
            assert page.status_code == 200, page.text
            assert "keep answers short" in page.text and "answer drily" in page.text
            assert "write long answers" not in page.text and "green tea" not in page.text
        scoped = http.get("/ui/users/~agent/a", params={"run_id": "r1"})
        assert scoped.status_code == 200 and "answer drily" in scoped.text and "keep answers short" not in scoped.text
        # nothing else: another agent's own, the user the key holds (the page shows every agent's), the health page
        for path, said in (("/ui/users/~agent/b", "limited to agent &#x27;a&#x27;, not &#x27;b&#x27;"),
                           ("/ui/users/u", "it opens that agent&#x27;s own memories&#x27; page alone "
                                           "(/ui/users/~agent%2Fa)"),
                           ("/ui/health", "own memories&#x27; page alone")):
            page = http.get(path)
            assert page.status_code == 403 and said in page.text, (path, page.text)
            assert "write long answers" not in page.text and "Berlin" not in page.text
        bad = http.get("/ui/users/~agent/a", params={"agent_id": "b"})
        assert bad.status_code == 422 and "agent_id: &#x27;b&#x27; is not the page&#x27;s agent" in bad.text
        bad = http.get("/ui/users/~agent/")
        assert bad.status_code == 422 and "agent_id:" in bad.text
        assert ml.head() == head  # the pages are read-only

        def page_for(who: str, path: str) -> httpx.Response:
            http.cookies.set("memledger_ui", secrets[who])
            return http.get(path)

        assert page_for("user u", "/ui/users/~agent/a").status_code == 403  # a's own belong to none of u's
        assert page_for("agent b", "/ui/users/~agent/a").status_code == 403
        admin = page_for("admin", "/ui/users/~agent/b")
        assert admin.status_code == 200 and "write long answers" in admin.text
        ml.erase(agent_id="a")
        gone = page_for("agent a", "/ui/users/~agent/a")
        assert gone.status_code == 410 and "keep answers short" not in gone.text
    _users_memories_kept(ml)
