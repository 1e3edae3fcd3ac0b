"""Entities and relations through the agent faces: the HTTP routes (same API keys as every route, problem+json
naming the field, labels held by the key) and the MCP tools ``relate``, ``relations``, ``entities``, whose answers
equal the Python verbs'. In process (FastAPI's TestClient, an in-memory MCP client), on both backends."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi.testclient import TestClient

from memledger import MemoryLedger
from memledger.servers.http import create_app
from memledger.servers.keys import APIKeyStore
from memledger.servers.mcp import build_mcp
from memledger.servers.ops import Service


def test_http_routes_relate_walk_and_gate_labels(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    keys = APIKeyStore(ml)
    u1, u2 = keys.create(["u1"]).secret, keys.create(["u2"]).secret
    health = keys.create(["u1"], allow_sensitive=["health"]).secret
    with TestClient(create_app(Service(ml), mcp=False), headers={"Authorization": f"Bearer {u1}"}) as http:
        r = http.post("/v1/users/u1/relations", json={"relation_type": "sister", "entity": "Anna",
                                                      "aliases": ["my sister"], "observed_at": "2024-01-05T00:00:00Z"})
        assert r.status_code == 201, r.text
        assert int(r.headers["X-Ledger-Position"]) == r.json()["position"]
        assert http.post("/v1/users/u1/relations", json={"relation_type": "lives_in", "entity": "Berlin",
                                                         "of": "my sister"}).status_code == 201
        assert http.post("/v1/users/u1/relations", json={"relation_type": "doctor_of", "entity": "Dr. Lee"}
                         ).status_code == 201
        walk = http.get("/v1/users/u1/relations", params={"hops": 2}).json()
        assert walk == ml.relations("u1", hops=2).model_dump(mode="json") | {"valid_at": walk["valid_at"]}
        assert sorted(((e["hops"], e["entity"]) for e in walk["relations"]), key=str) == [
            (1, "Anna"), (1, None), (2, "Berlin")]
        names = [e["name"] for e in http.get("/v1/users/u1/entities").json()["entities"]]
        assert names == ["Anna", "Berlin", None]

        refused = http.get("/v1/users/u1/relations", params={"allow_sensitive": "health"})
        assert refused.status_code == 403 and refused.json()["field"] == "allow_sensitive"
        shown = http.get("/v1/users/u1/relations", params={"allow_sensitive": "health", "purpose": "appointment"},
                         headers={"Authorization": f"Bearer {health}"}).json()
        assert "Dr. Lee" in [e["entity"] for e in shown["relations"]]
        assert [(d.key.split(".")[1], d.purpose) for d in ml.disclosures("u1")] == [("doctor_of", "appointment")]

        other = http.get("/v1/users/u1/relations", headers={"Authorization": f"Bearer {u2}"})
        assert other.status_code == 403
        assert http.get("/v1/users/u1/entities", headers={"Authorization": ""}).status_code == 401
        bad = http.get("/v1/users/u1/relations", params={"hops": 4})
        assert bad.status_code == 422 and bad.json()["field"] == "hops"
        head = ml.head()
        bad = http.post("/v1/users/u1/relations", json={"relation_type": "Best Friend", "entity": "Zoe"})
        assert bad.status_code == 422 and bad.json()["field"] == "relation_type" and "best_friend" in bad.json()["fix"]
        assert ml.head() == head


def test_mcp_tools_relate_relations_entities(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger

    async def run() -> dict[str, Any]:
        from mcp import Client

        async with Client(build_mcp(Service(ml), user="u1")) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert {"relate", "relations", "entities"} <= set(tools)
            assert tools["relations"].annotations.read_only_hint is True
            r = await c.call_tool("relate", {"relation_type": "manager_of", "entity": "Dana",
                                             "valid_from": "2023-01-01T00:00:00Z"})
            assert not r.is_error and r.structured_content["effect"] == "new"
            r = await c.call_tool("relate", {"relation_type": "manager_of", "entity": "Omar",
                                             "valid_from": "2024-04-01T00:00:00Z"})
            assert r.structured_content["effect"] == "supersede"
            then = await c.call_tool("relations", {"valid_at": "2024-03-01T00:00:00Z"})
            now = await c.call_tool("relations", {})
            ents = await c.call_tool("entities", {})
            bad = await c.call_tool("relations", {"hops": 9})
            return {"then": then.structured_content, "now": now.structured_content, "ents": ents.structured_content,
                    "bad": bad}

    out = asyncio.run(run())
    assert [e["entity"] for e in out["then"]["relations"]] == ["Dana"]
    assert [e["entity"] for e in out["now"]["relations"]] == ["Omar"]
    assert sorted(e["name"] for e in out["ents"]["entities"]) == ["Dana", "Omar"]
    assert out["bad"].is_error and "hops" in out["bad"].content[0].text


def test_http_corrects_and_ends_relations_as_the_python_verbs_do(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    u1 = APIKeyStore(ml).create(["u1"]).secret
    with TestClient(create_app(Service(ml), mcp=False), headers={"Authorization": f"Bearer {u1}"}) as http:
        assert http.post("/v1/users/u1/relations", json={"relation_type": "manager_of", "entity": "Dana",
                                                         "valid_from": "2023-01-01T00:00:00Z"}).status_code == 201
        r = http.post("/v1/users/u1/relations/corrections", json={"relation_type": "manager_of", "entity": "Dena",
                                                                  "was": "Dana", "reason": "misspelt"})
        assert r.status_code == 201, r.text
        assert int(r.headers["X-Ledger-Position"]) == r.json()["position"]
        assert [e.entity for e in ml.relations("u1").relations] == ["Dena"]
        # Dana never was: asked at a date inside the old valid range, nobody but Dena is the manager
        assert [e.entity for e in ml.relations("u1", valid_at="2023-06-01T00:00:00Z").relations] == ["Dena"]
        r = http.post("/v1/users/u1/relations/retractions", json={"relation_type": "manager_of",
                                                                  "valid_to": "2024-05-01T00:00:00Z"})
        assert r.status_code == 201, r.text
        assert ml.relations("u1").relations == []
        assert [e.entity for e in ml.relations("u1", valid_at="2024-04-01T00:00:00Z").relations] == ["Dena"]
        head = ml.head()
        bad = http.post("/v1/users/u1/relations/retractions", json={"relation_type": "sister"})
        assert bad.status_code == 422 and bad.json()["field"] and bad.json()["fix"], bad.text
        bad = http.post("/v1/users/u1/relations/corrections", json={"relation_type": "manager_of"})
        assert bad.status_code == 422 and bad.json()["field"] == "entity", bad.text
        assert ml.head() == head  # nothing written on bad input


def test_mcp_corrects_and_ends_relations(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger

    async def run() -> tuple[Any, Any, Any, set[str]]:
        from mcp import Client

        async with Client(build_mcp(Service(ml), user="u1")) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            await c.call_tool("relate", {"relation_type": "friend", "entity": "Zoe"})
            await c.call_tool("relate", {"relation_type": "friend", "entity": "Kim"})
            fixed = await c.call_tool("correct_relation", {"relation_type": "friend", "entity": "Kimi", "was": "Kim"})
            ended = await c.call_tool("unrelate", {"relation_type": "friend", "entity": "Zoe"})
            bad = await c.call_tool("unrelate", {"relation_type": "friend", "entity": "Nobody"})
            return fixed, ended, bad, names

    fixed, ended, bad, names = asyncio.run(run())
    assert {"correct_relation", "unrelate"} <= names
    assert not fixed.is_error and not ended.is_error, (fixed.content, ended.content)
    assert sorted(e.entity for e in ml.relations("u1").relations) == ["Kimi"]
    assert bad.is_error and "entity" in bad.content[0].text


def test_a_multi_valued_correction_takes_the_wrong_ones_valid_range(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    ml.relate("u1", "friend", "Bob", observed_at="2024-01-01T00:00:00Z")
    r = ml.correct_relation("u1", "friend", "Rob", was="Bob")
    assert [e.entity for e in ml.relations("u1", valid_at="2024-06-01T00:00:00Z").relations] == ["Rob"]
    assert [e.entity for e in ml.relations("u1").relations] == ["Rob"]
    assert r.position is not None


def test_relation_errors_over_http_name_fields_not_cli_commands(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    u1 = APIKeyStore(ml).create(["u1"]).secret
    ml.relate("u1", "friend", "Zoe")
    with TestClient(create_app(Service(ml), mcp=False), headers={"Authorization": f"Bearer {u1}"}) as http:
        for path, body in [("/v1/users/u1/relations", {"relation_type": "lives_in", "entity": "Oslo", "of": "Nobody"}),
                           ("/v1/users/u1/relations/corrections", {"relation_type": "friend", "entity": "Kim",
                                                                   "was": "Nobody"}),
                           ("/v1/users/u1/relations/corrections", {"relation_type": "friend", "entity": "Kim"}),
                           ("/v1/users/u1/relations/retractions", {"relation_type": "manager_of"})]:
            r = http.post(path, json=body)
            assert r.status_code == 422, r.text
            assert "memledger " not in r.json()["fix"] and "--" not in r.json()["fix"], r.json()
