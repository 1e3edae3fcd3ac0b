"""The options every face offers do on each face what they do in Python: ``min_confidence`` and ``also`` through HTTP
and MCP, a pinned MCP server refusing ``also`` for another user, the CLI's search and context options, an unknown
query parameter refused. That each face reaches every option at all is tests/test_request_models.py's.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi.testclient import TestClient

from memledger import MemoryLedger
from memledger.servers.http import create_app
from memledger.servers.mcp import build_mcp
from memledger.servers.keys import APIKeyStore
from memledger.servers.ops import Service


def test_min_confidence_and_also_through_http_and_mcp(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    ml.assert_fact("u1", "preference.drink", "tea", text="I drink green tea every morning")
    ml.assert_fact("u1", "preference.snack", "nuts", text="I guess I snack on nuts with my tea",
                   source="agent_inference", confidence=0.3)
    ml.assert_fact("u2", "preference.drink", "coffee", text="I drink black coffee with my breakfast tea")
    service = Service(ml)
    keys = APIKeyStore(ml)
    admin, only_u1 = keys.create([], admin=True).secret, keys.create(["u1"]).secret
    with TestClient(create_app(service), headers={"Authorization": f"Bearer {admin}"}) as http:
        refused = http.post("/v1/users/u1/search", json={"query": "tea", "also": ["u2"]},
                            headers={"Authorization": f"Bearer {only_u1}"})
        all_hits = http.post("/v1/users/u1/search", json={"query": "tea"}).json()
        sure = http.post("/v1/users/u1/search", json={"query": "tea", "min_confidence": 0.5}).json()
        got = http.get("/v1/users/u1/search", params={"query": "tea", "min_confidence": 0.5}).json()
        both = http.post("/v1/users/u1/search", json={"query": "tea", "also": ["u2"]}).json()
        bad = http.post("/v1/users/u1/search", json={"query": "tea", "min_confidence": 2})
        ctx = http.post("/v1/users/u1/context", json={"query": "tea", "min_confidence": 0.5}).json()
        ctx_all = http.get("/v1/users/u1/context", params={"query": "tea"}).json()
        bad_ctx = http.get("/v1/users/u1/context", params={"memories": -1})
    assert refused.status_code == 403 and "u2" in refused.text
    assert {h["key"] for h in all_hits} == {"preference.drink", "preference.snack"}
    assert [h["key"] for h in sure] == [h["key"] for h in got] == ["preference.drink"]
    # the ledger's own merge: each hit names its user, ranks renumbered in score order
    assert {(h["user_id"], h["key"]) for h in both} == {("u1", "preference.drink"), ("u1", "preference.snack"),
                                                       ("u2", "preference.drink")}
    assert [h["rank"] for h in both] == [1, 2, 3] and [h["score"] for h in both] == sorted(
        (h["score"] for h in both), reverse=True)
    assert bad.status_code == 422 and "min_confidence" in bad.text
    assert "nuts" not in ctx["text"] and "nuts" in ctx_all["text"]
    assert bad_ctx.status_code == 422 and "memories" in bad_ctx.text

    async def mcp_calls() -> tuple[Any, Any]:
        from mcp import Client

        async with Client(build_mcp(service)) as c:
            r = await c.call_tool("recall", {"user_id": "u1", "query": "tea", "min_confidence": 0.5,
                                             "also": ["u2"]})
            return r.structured_content, (await c.call_tool("context", {"user_id": "u1", "query": "tea",
                                                                        "min_confidence": 0.5})).structured_content

    hits, ctx_mcp = asyncio.run(mcp_calls())
    assert {(h["user_id"], h["key"]) for h in hits["hits"]} == {("u1", "preference.drink"), ("u2", "preference.drink")}
    assert "nuts" not in ctx_mcp["text"]


def test_mcp_pinned_server_refuses_also_for_another_user(fresh_ledger: MemoryLedger) -> None:
    fresh_ledger.assert_fact("u2", "preference.drink", "coffee", text="I drink coffee")

    async def call() -> Any:
        from mcp import Client

        async with Client(build_mcp(Service(fresh_ledger), user="u1")) as c:
            return await c.call_tool("recall", {"query": "coffee", "also": ["u2"]})

    r = asyncio.run(call())
    assert r.is_error and "also: this server is pinned to user 'u1' (fix: search the pinned user only" in (
        r.content[0].text)


def test_cli_search_and_context_take_the_new_options(cli) -> None:
    cli("assert", "u1", "session.topic", "taxes", "--text", "We talked about taxes")
    hits = cli.json("search", "u1", "taxes", "--half-life", "session.=60", "--role-bonus", "0.2", "--trace", "t-1")
    assert [h["key"] for h in hits] == ["session.topic"]
    code, _, err = cli("search", "u1", "taxes", "--half-life", "session.")
    assert code == 2 and "--half-life" in err and "PREFIX=SECONDS" in err
    code, _, err = cli("search", "u1", "taxes", "--role-bonus", "3")
    assert code == 2 and "role" in err and "0 to 1" in err
    ctx = cli.json("context", "u1", "--query", "taxes", "--memories", "0", "--recent-messages", "0")
    assert "taxes" in ctx["text"]  # the profile still shows it; no memories section
    assert all(s["name"] != "memories" or not s["lines"] for s in ctx["sections"])
    code, _, err = cli("context", "u1", "--memories", "-3")
    assert code == 2 and "memories" in err


def test_http_refuses_a_query_parameter_the_route_does_not_take(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    ml.assert_fact("u1", "preference.drink", "tea", text="I drink tea")
    admin = APIKeyStore(ml).create([], admin=True).secret
    with TestClient(create_app(Service(ml)), headers={"Authorization": f"Bearer {admin}"}) as http:
        kk = http.get("/v1/users/u1/search", params={"query": "tea", "kk": 5})
        recent = http.get("/v1/users/u1/context", params={"recent": 2})
        bogus = http.get("/v1/users/u1/profile", params={"bogus": 1})
        fine = http.get("/v1/users/u1/search", params={"query": "tea", "k": 1})
        also = http.post("/v1/users/u1/context", json={"also": ["u2"]})
    assert (kk.status_code, kk.json()["field"]) == (422, "kk") and "did you mean k?" in kk.json()["fix"]
    assert recent.status_code == 422 and "did you mean recent_messages?" in recent.json()["fix"]
    assert bogus.status_code == 422 and bogus.json()["fix"].endswith(
        "after, agent_id, allow_sensitive, purpose, run_id")
    assert fine.status_code == 200 and [h["key"] for h in fine.json()] == ["preference.drink"]
    # an unknown body field is answered with this route's fields only, never suggesting the same name
    assert also.status_code == 422 and "also" not in also.json()["fix"] and "recent_messages" in also.json()["fix"]
