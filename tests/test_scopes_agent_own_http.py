"""An agent's own memories over HTTP beyond remember, profile, history and search (tests/test_scopes_agent_own_faces.py):
assert, correct, retract, one key's history, time travel on both axes, diff, audit and export under
``/v1/agents/{agent_id}/...``, each the user route of the same name and shape. Both backends."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from memledger import MemoryLedger
from memledger.servers.http import create_app
from memledger.servers.keys import APIKeyStore
from memledger.servers.ops import Service


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLEDGER_EMBEDDER", "hash")


def _client(ml: MemoryLedger, secret: str) -> TestClient:
    return TestClient(create_app(Service(ml), mcp=False), headers={"Authorization": f"Bearer {secret}"})


def test_agent_routes_correct_retract_and_travel_in_time(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    ml.assert_fact("u", "style.length", "medium", agent_id="planner")  # the user's, by the same agent
    admin = APIKeyStore(ml).create([], admin=True).secret
    with _client(ml, admin) as http:
        r = http.post("/v1/agents/planner/facts/style.length",
                      json={"value": "short", "text": "keep it short", "observed_at": "2024-01-01T00:00:00Z",
                            "run_id": "r1"}, headers={"Idempotency-Key": "k-1"})
        assert r.status_code == 201, r.text
        assert (r.json()["user_id"], r.json()["version"]) == ("~agent/planner", 1)
        first = int(r.headers["X-Ledger-Position"])
        again = http.post("/v1/agents/planner/facts/style.length",
                          json={"value": "short", "text": "keep it short", "observed_at": "2024-01-01T00:00:00Z",
                                "run_id": "r1"}, headers={"Idempotency-Key": "k-1"})
        assert again.status_code == 201 and again.json()["version"] == 1  # the retry records nothing new
        r = http.post("/v1/agents/planner/facts/style.length/corrections",
                      json={"value": "brief", "reason": "misheard", "observed_at": "2024-01-01T00:00:00Z"})
        assert r.status_code == 201, r.text
        assert (r.json()["user_id"], r.json()["version"], r.json()["effect"]) == ("~agent/planner", 2, "correct")
        between = http.get("/v1/health").json()["head"]
        http.post("/v1/agents/planner/facts/style.tone", json={"value": "dry", "observed_at": "2024-03-01T00:00:00Z"})
        r = http.post("/v1/agents/planner/facts/style.tone/retractions", json={"reason": "not any more"})
        assert r.status_code == 201 and r.json()["kind"] == "retracted", r.text
        rows = http.get("/v1/agents/planner/history/style.length").json()
        assert [(x["version"], x["value"], x["actor"], x["status"]) for x in rows] == [
            (1, "short", "planner", "misreported"), (2, "brief", "planner", "current")]
        assert http.get("/v1/agents/planner/history/style.length", params={"run_id": "r1"}).json()[0]["value"] == \
            "short"
        # time travel, system axis: before the correction the ledger believed "short"
        recorded = ml.history(agent_id="planner", key="style.length")[0].recorded_at.isoformat()
        then = http.get("/v1/agents/planner/believed", params={"as_of": recorded}).json()
        assert then["user_id"] == "~agent/planner"
        assert {k: f["value"] for k, f in then["facts"].items()} == {"style.length": "short"}
        now = http.get("/v1/agents/planner/believed", params={"as_of": "2100-01-01T00:00:00Z"}).json()
        assert {k: f["value"] for k, f in now["facts"].items()} == {"style.length": "brief"}
        # the observed axis: what had been said by 2024-02-01, as known now (tone was said in March)
        seen = http.get("/v1/agents/planner/believed", params={"as_of": "2024-02-01T00:00:00Z",
                                                               "axis": "observed"}).json()
        assert {k: f["value"] for k, f in seen["facts"].items()} == {"style.length": "brief"}
        true_at = http.get("/v1/agents/planner/true-at", params={"valid_at": "2024-03-15T00:00:00Z"}).json()
        assert {k: f["value"] for k, f in true_at["facts"].items()} == {"style.length": "brief"}
        diff = http.get("/v1/agents/planner/diff", params={"from": recorded, "to": "2100-01-01T00:00:00Z"}).json()
        assert diff["user_id"] == "~agent/planner"
        assert diff["changed"]["style.length"]["after"]["value"] == "brief"
        audit = http.get("/v1/agents/planner/audit", params={"key": "style.length"}).json()
        assert audit["facts"]["style.length"]["belief"]["value"] == "brief"
        doc = http.get("/v1/agents/planner/export").json()
        assert doc["user_id"] == "~agent/planner" and {k: f["value"] for k, f in doc["profile"]["facts"].items()} \
            == {"style.length": "brief"}
        assert "medium" not in str(doc)  # the user's memory is not the agent's own
        assert http.get("/v1/agents/planner/export", params={"run_id": "r1"}).json()["scope"] == {"run_id": "r1"}
        # bad input: 422 naming the field, nothing written
        head = http.get("/v1/health").json()["head"]
        for method, path, kw, field in (
                ("post", "/v1/agents/planner/facts/style.length/corrections",
                 {"json": {"value": "x", "agent_id": "writer"}}, "agent_id"),
                ("post", "/v1/agents/planner/facts/style.length/retractions", {"json": {"actor": "writer"}}, "actor"),
                ("post", "/v1/agents/planner/facts/Style", {"json": {"value": "x"}}, "key"),
                ("post", "/v1/agents/%20/facts/style.length", {"json": {"value": "x"}}, "agent_id"),
                ("post", "/v1/agents/planner/facts/style.length", {"json": {"value": "x", "observed_at": "2024-01-01"}},
                 "observed_at"),
                ("get", "/v1/agents/planner/believed", {"params": {"as_of": "yesterday"}}, "as_of"),
                ("get", "/v1/agents/planner/believed", {"params": {"as_of": recorded, "agent_id": "writer"}},
                 "agent_id"),
                ("get", "/v1/agents/planner/diff", {"params": {"from": recorded}}, "to"),
                ("get", "/v1/agents/planner/export", {"params": {"purpose": " "}}, "purpose")):
            bad = getattr(http, method)(path, **kw)
            assert bad.status_code == 422, (path, bad.text)
            assert bad.headers["content-type"] == "application/problem+json" and bad.json()["field"] == field, \
                (path, bad.json())
        assert http.get("/v1/health").json()["head"] == head and head > between > first
        spec = http.get("/openapi.json").json()["paths"]
        for path in ("/v1/agents/{agent_id}/facts/{key}/corrections", "/v1/agents/{agent_id}/believed",
                     "/v1/agents/{agent_id}/export"):
            assert {"403", "410", "422"} <= set(next(iter(spec[path].values()))["responses"]), path
    assert ml.profile("u").facts["style.length"].value == "medium"
    assert ml.profile(agent_id="planner").facts["style.length"].value == "brief"
