"""The HTTP API under a real uvicorn on 127.0.0.1 (``memledger serve http`` as a subprocess): every
route refused with another user's key (403) and with none (401), bodies equal to the CLI's ``--json``,
problem+json errors, Idempotency-Key, X-Ledger-Position and ``after=``, erase (admin + Confirm-Erase, then 410),
``also=``, logs without memory text or queries, MCP at ``/mcp`` behind the same keys, the SSE change feed."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from memledger import MemoryLedger
from tests.serve_util import Server, create_key, memledger

SECRET_TEXT = "my secret codename is bluefalcon"
SECRET_QUERY = "zanzibar-query-marker"


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Any:
    home = tmp_path_factory.mktemp("http") / "h"
    with MemoryLedger(home=home) as ml:
        ml.assert_fact("u1", "preference.drink", "tea", text="I drink green tea every morning",
                       observed_at="2024-01-01T09:00:00+00:00")
        ml.assert_fact("u1", "profile.city", "Lyon", text="I live in Lyon", observed_at="2024-01-02T09:00:00+00:00")
        ml.assert_fact("u1", "health.allergy", "peanuts", text="I am allergic to peanuts", sensitivity="health")
        ml.assert_fact("u2", "preference.drink", "water", text="I only drink water")
        ml.assert_fact("u3", "preference.drink", "juice", text="orange juice please")
    keys = {
        "u1": create_key(home, "--user", "u1"),
        "u2": create_key(home, "--user", "u2"),
        "u12": create_key(home, "--user", "u1", "--user", "u2", "--allow-sensitive", "health"),
        "admin3": create_key(home, "--user", "u3", "--admin"),
    }
    server = Server(home, "http")
    server.wait_ready()
    client = httpx.Client(base_url=server.base, timeout=30)
    yield {"home": home, "keys": keys, "server": server, "http": client}
    client.close()
    server.stop()


def auth(api: Any, who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api['keys'][who]}"}


def user_routes(user: str) -> list[tuple[str, str, Any]]:
    """(method, path, json body) of every route that names a user."""
    u = f"/v1/users/{user}"
    return [
        ("GET", f"{u}/profile", None), ("GET", f"{u}/history", None),
        ("GET", f"{u}/history/preference.drink", None),
        ("GET", f"{u}/believed?as_of=2030-01-01T00:00:00Z", None),
        ("GET", f"{u}/true-at?valid_at=2024-06-01T00:00:00Z", None),
        ("GET", f"{u}/diff?from=2000-01-01T00:00:00Z&to=2100-01-01T00:00:00Z", None), ("GET", f"{u}/audit", None),
        ("GET", f"{u}/search?query=tea", None), ("POST", f"{u}/search", {"query": "tea"}),
        ("GET", f"{u}/context", None), ("POST", f"{u}/context", {"query": "drink"}), ("GET", f"{u}/resume", None),
        ("GET", f"{u}/export", None), ("GET", f"{u}/sessions", None),
        ("POST", f"{u}/sessions/s9", {}), ("GET", f"{u}/sessions/s9/messages", None),
        ("POST", f"{u}/sessions/s9/messages", {"role": "user", "message_id": "m", "text": "hi"}),
        ("POST", f"{u}/sessions/s9/card", {"task": "t"}), ("POST", f"{u}/sessions/s9/summaries", {"text": "sum"}),
        ("POST", f"{u}/sessions/s9/end", {}),
        ("POST", f"{u}/memories", {"text": "I moved to Berlin"}),
        ("POST", f"{u}/facts/preference.drink", {"value": "intruder"}),
        ("POST", f"{u}/facts/preference.drink/corrections", {"value": "intruder"}),
        ("POST", f"{u}/facts/preference.drink/retractions", {}),
        ("GET", f"{u}/changes?after=0&limit=1", None),
        ("POST", f"{u}/relations", {"relation_type": "sister", "entity": "Anna"}),
        ("GET", f"{u}/relations?hops=2", None), ("GET", f"{u}/entities", None),
        ("DELETE", u, None),
        ("POST", "/v1/commands", {"commands": [{"user_id": user, "key": "x.y", "value": 1}]}),
    ]


def test_every_route_refuses_other_users_key_and_no_key(api: Any) -> None:
    http = api["http"]
    with MemoryLedger(home=api["home"]) as ml:
        before = len(ml.history("u1"))
    for method, path, body in user_routes("u1"):
        r = http.request(method, path, json=body, headers=auth(api, "u2"))
        assert r.status_code == 403, (method, path, r.status_code, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
        r = http.request(method, path, json=body)
        assert r.status_code == 401, (method, path, r.status_code, r.text)
        assert r.json()["status"] == 401
        # an HTTP client is told what to send, not a CLI command it cannot run
        assert "memledger " not in r.json()["fix"] and "Bearer" in r.json()["fix"]
        r = http.request(method, path, json=body, headers={"Authorization": "Bearer mlk_0123456789ab_" + "x" * 43})
        assert r.status_code == 401, (method, path)
    with MemoryLedger(home=api["home"]) as ml:
        assert len(ml.history("u1")) == before  # nothing written by the refused requests
        assert ml.sessions("u1") == []
    assert http.get("/v1/health").json()["status"] == "ok"  # the one open route
    assert http.get("/openapi.json").status_code == 200


def test_bodies_equal_the_cli_json(api: Any) -> None:
    http, h, home = api["http"], auth(api, "u1"), api["home"]
    for path, argv in [
        ("/v1/users/u1/profile", ["profile", "u1"]),
        ("/v1/users/u1/history", ["history", "u1"]),
        ("/v1/users/u1/history/profile.city", ["history", "u1", "profile.city"]),
        ("/v1/users/u1/believed?as_of=2030-01-01T00:00:00Z&valid_at=2024-06-01T00:00:00Z",
         ["believed", "u1", "--as-of", "2030-01-01T00:00:00Z", "--valid-at", "2024-06-01T00:00:00Z"]),
        ("/v1/users/u1/true-at?valid_at=2024-01-01T12:00:00Z", ["true-at", "u1", "--valid-at", "2024-01-01T12:00:00Z"]),
        ("/v1/users/u1/search?query=green%20tea&k=3", ["search", "u1", "green tea", "-k", "3"]),
    ]:
        r = http.get(path, headers=h)
        assert r.status_code == 200, r.text
        proc = memledger(home, *argv, "--json")
        assert proc.returncode == 0, proc.stderr
        assert r.json() == json.loads(proc.stdout), path
    r = http.post("/v1/users/u1/search", json={"query": "green tea", "k": 3}, headers=h)
    assert [x["key"] for x in r.json()][0] == "preference.drink"
    assert "health.allergy" not in [x["key"] for x in http.post("/v1/users/u1/search", json={
        "query": "allergic peanuts"}, headers=h).json()]


def test_writes_positions_after_and_idempotency(api: Any) -> None:
    http, h = api["http"], auth(api, "u1")
    r = http.post("/v1/users/u1/facts/preference.snack", json={"value": "olives", "text": "I snack on olives"},
                  headers={**h, "Idempotency-Key": "snack-1"})
    assert r.status_code == 201 and r.json()["kind"] == "asserted"
    pos = int(r.headers["X-Ledger-Position"])
    assert pos == r.json()["position"]
    again = http.post("/v1/users/u1/facts/preference.snack", json={"value": "olives", "text": "I snack on olives"},
                      headers={**h, "Idempotency-Key": "snack-1"})
    assert again.status_code == 201 and again.json()["replayed"] is True
    assert again.json()["event_id"] == r.json()["event_id"]
    clash = http.post("/v1/users/u1/facts/preference.snack", json={"value": "chips"},
                      headers={**h, "Idempotency-Key": "snack-1"})
    assert clash.status_code == 409 and clash.json()["field"] and clash.json()["fix"] is not None
    prof = http.get(f"/v1/users/u1/profile?after={pos}", headers=h).json()
    assert prof["facts"]["preference.snack"]["value"] == "olives"
    beyond = http.get("/v1/users/u1/profile?after=99999999", headers=h)
    assert beyond.status_code == 422 and beyond.json()["field"] == "after"
    r = http.post("/v1/users/u1/facts/preference.snack/corrections", json={"value": "green olives",
                                                                          "reason": "precise"}, headers=h)
    assert r.status_code == 201 and r.json()["kind"] == "corrected"
    r = http.post("/v1/users/u1/facts/preference.snack/retractions", json={"reason": "forget that"}, headers=h)
    assert r.status_code == 201 and r.json()["kind"] == "retracted"
    hist = http.get("/v1/users/u1/history/preference.snack", headers=h).json()
    assert [x["kind"] for x in hist] == ["asserted", "corrected", "retracted"]
    # a batch is all or nothing; every user it names must be held by the key
    bad = http.post("/v1/commands", json={"commands": [
        {"user_id": "u1", "key": "batch.a", "value": 1},
        {"op": "correct", "user_id": "u1", "key": "batch.none", "value": 2}]}, headers=h)
    assert bad.status_code == 422 and "batch.none" in bad.text
    assert "batch.a" not in http.get("/v1/users/u1/profile", headers=h).json()["facts"]
    ok = http.post("/v1/commands", json={"commands": [{"user_id": "u1", "key": "batch.a", "value": 1},
                                                      {"user_id": "u2", "key": "batch.a", "value": 2}]},
                   headers=auth(api, "u12"))
    assert ok.status_code == 201 and [x["user_id"] for x in ok.json()["receipts"]] == ["u1", "u2"]
    assert int(ok.headers["X-Ledger-Position"]) == max(x["position"] for x in ok.json()["receipts"])


def test_problem_json_for_bad_input(api: Any) -> None:
    http, h = api["http"], auth(api, "u1")
    r = http.get("/v1/users/u1/believed?as_of=2024-01-01T00:00:00", headers=h)
    assert r.status_code == 422 and r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["field"] == "as_of" and "offset" in body["problem"] and body["fix"]
    r = http.post("/v1/users/u1/facts/not%20a%20key", json={"value": 1}, headers=h)
    assert r.status_code == 422 and r.json()["field"] == "key"
    r = http.post("/v1/users/u1/facts/preference.drink", json={"value": 1, "confidence": 7}, headers=h)
    assert r.status_code == 422 and r.json()["field"] == "confidence"
    r = http.post("/v1/users/u1/facts/preference.drink", content=b"{not json", headers={
        **h, "content-type": "application/json"})
    assert r.status_code == 422
    # a user id holding "/" cannot travel in a path: the refusal names user_id and says where such ids work
    r = http.get("/v1/users/org%2Fana/profile", headers=h)
    assert r.status_code == 404 and r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["field"] == "user_id" and "CLI" in r.json()["fix"]
    assert http.get("/v1/nothing/here", headers=h).json()["field"] == "path"  # any other unknown path as before
    r = http.get("/v1/users/u1/diff?from=2030-01-01T00:00:00Z&to=2020-01-01T00:00:00Z", headers=h)
    assert r.status_code == 422
    r = http.post("/v1/users/u1/search", json={"query": "x", "k": 0}, headers=h)
    assert r.status_code == 422 and r.json()["field"] == "k"
    r = http.get("/v1/users/u1/search", headers=h)  # a field named like FastAPI's location ("query", "query")
    assert r.status_code == 422 and r.json()["field"] == "query"
    r = http.get("/v1/users/u1/search?query=", headers=h)  # the same through the body model's validation
    assert r.status_code == 422 and r.json()["field"] == "query"
    r = http.get("/v1/users/u1/search?query=tea&k=0", headers=h)
    assert r.status_code == 422 and r.json()["field"] == "k"
    # a question, not a document: an over-long query is refused before anything is embedded
    r = http.post("/v1/users/u1/search", json={"query": "tea " * 2000}, headers=h)
    assert r.status_code == 422 and r.json()["field"] == "query" and "4000" in r.json()["fix"]
    r = http.post("/v1/users/u1/search", json={"query": "peanuts", "allow_sensitive": ["health"]}, headers=h)
    assert r.status_code == 403  # the key was not granted the label
    r = http.post("/v1/users/u1/search", json={"query": "allergic peanuts", "allow_sensitive": ["health"]},
                  headers=auth(api, "u12"))
    assert r.status_code == 200 and "health.allergy" in [x["key"] for x in r.json()]


def test_also_needs_every_user(api: Any) -> None:
    http = api["http"]
    r = http.post("/v1/users/u1/search", json={"query": "drink", "also": ["u2"]}, headers=auth(api, "u1"))
    assert r.status_code == 403
    r = http.post("/v1/users/u1/search", json={"query": "drink", "also": ["u2"]}, headers=auth(api, "u12"))
    assert r.status_code == 200
    assert {x["user_id"] for x in r.json()} == {"u1", "u2"}


def test_erase_needs_admin_and_confirmation_then_410(api: Any) -> None:
    http = api["http"]
    r = http.delete("/v1/users/u3", headers=auth(api, "admin3"))
    assert r.status_code == 422 and r.json()["field"] == "Confirm-Erase"
    r = http.delete("/v1/users/u1", headers={**auth(api, "u1"), "Confirm-Erase": "u1"})
    assert r.status_code == 403 and "admin" in r.json()["detail"]
    r = http.delete("/v1/users/u3", headers={**auth(api, "admin3"), "Confirm-Erase": "u3"})
    assert r.status_code == 200 and r.json()["user_id"] == "u3"
    assert "X-Ledger-Position" in r.headers
    cert = r.json()["certificate"]  # signed with the store's key: the CLI checks it against that key
    assert cert["user_id"] == "u3" and cert["rows_purged"]["profile.facts"] == 1
    Path(api["home"].parent / "u3.cert.json").write_text(json.dumps(cert))
    proc = memledger(api["home"], "verify-certificate", str(api["home"].parent / "u3.cert.json"))
    assert proc.returncode == 0 and "valid" in proc.stdout, proc.stderr
    for method, path, body in user_routes("u3")[:-2]:
        r = http.request(method, path, json=body, headers=auth(api, "admin3"))
        assert r.status_code == 410, (method, path, r.status_code)
    r = http.post("/v1/commands", json={"commands": [{"user_id": "u3", "key": "a.b", "value": 1}]},
                  headers=auth(api, "admin3"))
    assert r.status_code == 410


def test_sessions_and_context_routes(api: Any) -> None:
    http, h = api["http"], auth(api, "u1")
    assert http.post("/v1/users/u1/sessions/trip", json={"task": "rome"}, headers=h).status_code == 201
    r = http.post("/v1/users/u1/sessions/trip/messages", json={"role": "user", "message_id": "m1",
                                                               "text": "book a hotel in Rome"}, headers=h)
    assert r.status_code == 201 and r.json()["event"] == "MessageLogged"
    r = http.post("/v1/users/u1/sessions/trip/card", json={"progress": "hotel picked",
                                                           "add_questions": ["which dates?"]}, headers=h)
    assert r.status_code == 201
    assert http.post("/v1/users/u1/sessions/trip/summaries", json={"text": "planning Rome"}, headers=h
                     ).status_code == 201
    r = http.get("/v1/users/u1/resume?now=2100-01-01T00:00:00Z", headers=h).json()
    assert r["found"] and r["open_questions"] == ["which dates?"] and r["expired"]
    msgs = http.get("/v1/users/u1/sessions/trip/messages", headers=h).json()
    assert [m["text"] for m in msgs] == ["book a hotel in Rome"]
    ctx = http.post("/v1/users/u1/context", json={"session_id": "trip", "query": "drink", "budget": 800},
                    headers=h).json()
    assert "tea" in ctx["text"] and "peanuts" not in ctx["text"]
    assert http.post("/v1/users/u1/sessions/trip/end", json={}, headers=h).status_code == 201
    r = http.post("/v1/users/u1/sessions/s%F0/messages", json={"role": "user", "message_id": "m9", "text": "x"},
                  headers=h)  # bytes that are not UTF-8 in the path: refused as for a user id, nothing logged
    assert r.status_code == 422 and "UTF-8" in r.text
    exported = http.get("/v1/users/u1/export", headers=h).json()
    assert exported["user_id"] == "u1" and exported["profile"]["facts"]["preference.drink"]["value"] == "tea"


def test_remember_route(api: Any) -> None:
    http, h = api["http"], auth(api, "u1")
    r = http.post("/v1/users/u1/memories", json={"text": "I switched to hot lattes"},
                  headers={**h, "Idempotency-Key": "rem-1"})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["decision"] and body["key"] and int(r.headers["X-Ledger-Position"]) == body["position"]
    again = http.post("/v1/users/u1/memories", json={"text": "I switched to hot lattes"},
                      headers={**h, "Idempotency-Key": "rem-1"})
    assert again.status_code == 201 and again.json()["event_id"] == body["event_id"]
    prof = http.get(f"/v1/users/u1/profile?after={body['position']}", headers=h).json()
    assert body["key"] in prof["facts"]


def test_logs_hold_no_memory_text_or_query(api: Any) -> None:
    http, h = api["http"], auth(api, "u1")
    http.post("/v1/users/u1/facts/secret.codename", json={"value": SECRET_TEXT, "text": SECRET_TEXT}, headers=h)
    http.get(f"/v1/users/u1/search?query={SECRET_QUERY}", headers=h)
    http.post("/v1/users/u1/search", json={"query": SECRET_QUERY}, headers=h)
    http.post("/v1/users/u1/facts/secret.codename/corrections", json={"value": SECRET_TEXT + "!", "confidence": 9},
              headers=h)  # refused: the problem names the field, the log does not quote the body
    log = api["server"].wait_log("POST /v1/users/{user_id}/search 200", "/corrections 422")
    assert "POST /v1/users/{user_id}/search 200" in log  # requests are logged by route template...
    assert SECRET_QUERY not in log and "bluefalcon" not in log and "query=" not in log  # ...without content
    assert "secret.codename" not in log and "/v1/users/u1/" not in log  # ...nor the fact keys and users of paths
    assert "POST /v1/users/{user_id}/facts/{key}/corrections 422" in log
    assert api["keys"]["u1"] not in log


def test_log_lines_cannot_be_forged(api: Any) -> None:
    """a path with %0a wrote a forged log line (no key needed), %00 a raw NUL. Every logged field
    has its control characters escaped, and the path is logged as its route template."""
    http = api["http"]
    forged = "2026-01-01 00:00:00,000 memledger.http DELETE /v1/users/ana 200 1.0ms"
    for raw in (f"/v1/users/ana%0a{forged.replace(' ', '%20')}", "/v1/users/ana%00x/profile",
                "/v1/users/a%1b%5b31mb/profile", "/no/such%0aroute"):
        r = http.get(raw)
        assert r.status_code in (401, 404, 405), (raw, r.status_code)
        assert r.headers["content-type"].startswith("application/problem+json")
    time.sleep(0.3)
    log = api["server"].log()
    assert "\x00" not in log and "\x1b" not in log
    lines = log.splitlines()
    assert not any(line.startswith("2026-01-01") for line in lines), lines[-6:]
    assert "DELETE /v1/users/ana" not in log and "/v1/users/ana" not in log
    assert "GET /v1/users/{user_id}/profile 401" in log
    assert "GET - 401" in log  # no route matched: no path at all


def test_mcp_endpoint_behind_the_same_keys(api: Any) -> None:
    import asyncio

    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    url = api["server"].base + "/mcp"
    assert api["http"].post("/mcp", json={}).status_code == 401

    async def run() -> None:
        hc = create_mcp_http_client(headers=auth(api, "u1"))
        async with Client(streamable_http_client(url, http_client=hc)) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert {"recall", "believed", "remember"} <= names and "erase" not in names
            r = await c.call_tool("true_at", {"valid_at": "2024-01-01T12:00:00Z"})
            assert r.structured_content["user_id"] == "u1"
            r = await c.call_tool("profile", {"user_id": "u2"})
            assert r.is_error

    asyncio.run(asyncio.wait_for(run(), 60))


def _sse(http: httpx.Client, path: str, headers: dict[str, str]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    with http.stream("GET", path, headers=headers, timeout=30) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        current: dict[str, Any] = {}
        for line in r.iter_lines():
            if line.startswith("id: "):
                current["id"] = int(line[4:])
            elif line.startswith("event: "):
                current["event"] = line[7:]
            elif line.startswith("data: "):
                current["data"] = json.loads(line[6:])
            elif line == "" and current:
                events.append(current)
                current = {}
    return events


def test_change_feed_is_resumable_and_live(api: Any) -> None:
    http, h = api["http"], auth(api, "u2")
    with MemoryLedger(home=api["home"]) as ml:
        rows = ml.history("u2")
    first = _sse(http, f"/v1/users/u2/changes?after=0&limit={len(rows)}", h)
    assert [e["id"] for e in first] == [r.position for r in rows]
    assert [(e["data"]["key"], e["data"]["kind"], e["data"]["version"]) for e in first] == [
        (r.key, r.kind, r.version) for r in rows]
    assert all(e["event"] == "change" and e["data"]["recorded_at"].endswith("Z") for e in first)
    # resume from the last id: only what came after; live: an event written while the stream is open arrives
    last = first[-1]["id"]
    got: list[list[dict[str, Any]]] = []
    t = threading.Thread(target=lambda: got.append(_sse(
        http, "/v1/users/u2/changes?limit=1&poll=0.05", {**h, "Last-Event-ID": str(last)})))
    t.start()
    time.sleep(0.5)
    r = http.post("/v1/users/u2/facts/preference.drink", json={"value": "sparkling water"}, headers=h)
    t.join(timeout=20)
    assert not t.is_alive()
    assert [(e["id"], e["data"]["kind"], e["data"]["version"]) for e in got[0]] == [
        (r.json()["position"], "asserted", r.json()["version"])]
    bad = http.get("/v1/users/u2/changes", headers={**h, "Last-Event-ID": "abc"})
    assert bad.status_code == 422


def test_problem_mapping_of_ledger_errors() -> None:
    """503 + Retry-After for a read that could not catch up, 409 for a lost race (hard to provoke live)."""
    from ledger.errors import ConflictError, NotCaughtUp
    from memledger.servers.http import _problem_of

    r = _problem_of(NotCaughtUp("projections reached 3, not 9"))
    assert r.status_code == 503 and r.headers["Retry-After"] == "1"
    assert _problem_of(ConflictError("lost")).status_code == 409


def test_a_revoked_key_is_refused_from_the_next_request(api: Any) -> None:
    proc = memledger(api["home"], "keys", "create", "--user", "u2", "--json")
    created = json.loads(proc.stdout)
    h = {"Authorization": f"Bearer {created['secret']}"}
    assert api["http"].get("/v1/users/u2/profile", headers=h).status_code == 200
    assert memledger(api["home"], "keys", "revoke", created["key_id"]).returncode == 0
    assert api["http"].get("/v1/users/u2/profile", headers=h).status_code == 401


def test_key_commands_and_other_embedders_never_rebind_the_served_index(tmp_path: Path) -> None:
    """`keys create`/`keys revoke` from a shell with another $MEMLEDGER_EMBEDDER re-bound the served
    vectors index to that model (opening a store cleared and re-stamped the table), and the hash server answered 500
    on memories, search and erase -- erase after it had erased. Opening a store never changes the index's model;
    key administration does not open the index at all; erase returns its receipt whatever the index's model."""
    from ledger.errors import MemledgerError

    home = tmp_path / "h"
    with MemoryLedger(home=home) as ml:
        ml.assert_fact("u1", "preference.drink", "tea", text="I drink green tea")
        ml.assert_fact("u2", "preference.drink", "water", text="I only drink water")
    admin = create_key(home, "--user", "u1", "--user", "u2", "--admin")
    other_env = {"MEMLEDGER_EMBEDDER": "hash:32"}  # another model than the server's hash:v2:64

    def keys(*argv: str) -> Any:
        proc = memledger(home, "keys", *argv, "--json", environ=other_env)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    server = Server(home, "http")
    try:
        server.wait_ready()
        h = {"Authorization": f"Bearer {admin}"}
        with httpx.Client(base_url=server.base, timeout=30) as http:
            assert http.post("/v1/users/u1/search", json={"query": "tea"}, headers=h).status_code == 200
            created = keys("create", "--user", "u1")
            keys("revoke", created["key_id"])
            r = http.post("/v1/users/u1/memories", json={"text": "I moved to Lyon"}, headers=h)
            assert r.status_code == 201, r.text
            r = http.post("/v1/users/u1/search", json={"query": "green tea"}, headers=h)
            assert r.status_code == 200 and r.json()[0]["key"] == "preference.drink", r.text
            # the root cause: a MemoryLedger opened with another embedder leaves the table's model alone and
            # refuses to search it (a clear error naming both models), instead of re-binding it
            with MemoryLedger(home=home, embedder="hash:32") as ml:
                with pytest.raises(MemledgerError, match="built with 'hash:v2:64', this ledger embeds with "
                                                         "'hash:v2:32'.*rebuild vectors --blue-green --embedder"):
                    ml.search("u1", "tea")
                receipt = ml.erase("u2")  # an irreversible verb returns its receipt whatever the index's model
                assert receipt.user_id == "u2" and receipt.key_destroyed
            r = http.post("/v1/users/u1/search", json={"query": "green tea"}, headers=h)
            assert r.status_code == 200 and r.json()[0]["key"] == "preference.drink", r.text
            r = http.delete("/v1/users/u1", headers={**h, "Confirm-Erase": "u1"})
            assert r.status_code == 200 and r.json()["user_id"] == "u1", r.text
        log = server.log()
    finally:
        server.stop()
    assert "Internal error" not in log and " 500 " not in log


def test_every_error_is_problem_json_naming_the_body_field(api: Any) -> None:
    """unreadable bodies and unknown routes/methods answered plain {"detail"}; malformed JSON named
    a byte offset as the field; a JSON body sent as text/plain said "Input should be a valid dictionary"; fields were
    CLI flags (--text, --replace-action); a remember-shaped batch item had no fix; an empty batch was a 201."""
    http, h = api["http"], auth(api, "u1")

    def problem(r: httpx.Response, status: int, field: str) -> dict[str, Any]:
        assert r.status_code == status, (r.status_code, r.text)
        assert r.headers["content-type"].startswith("application/problem+json"), r.headers["content-type"]
        body = r.json()
        assert body["field"] == field and body["problem"] and body["fix"], body
        assert "--" not in body["field"] and "memledger session" not in body["fix"], body
        return body

    u = "/v1/users/u1"
    js = {**h, "content-type": "application/json"}
    problem(http.post(f"{u}/memories", content=b'{"text": "caf\xe9"}', headers=js), 422, "body")
    b = problem(http.post(f"{u}/memories", content=("[" * 5000 + "]" * 5000).encode(), headers=js), 422, "body")
    assert "nested too deeply" in b["problem"]
    b = problem(http.post(f"{u}/memories", content=b'{"text": "x",', headers=js), 422, "body")
    assert "not valid JSON" in b["problem"]
    b = problem(http.post(f"{u}/memories", content=b'{"text": "x"}', headers={**h, "content-type": "text/plain"}),
                422, "Content-Type")
    assert "application/json" in b["fix"]
    problem(http.get("/v1/nothing/here", headers=h), 404, "path")
    problem(http.get("/v1/users/u1/profile"), 401, "Authorization")
    problem(http.get("/v1/users/u2/profile", headers=h), 403, "user_id")
    problem(http.post("/v1/commands", json={"commands": [{"user_id": "u2", "key": "a.b", "value": 1}]}, headers=h),
            403, "commands[0].user_id")
    problem(http.post(f"{u}/search", json={"query": "x", "also": ["u2"]}, headers=h), 403, "also")
    b = problem(http.put(f"{u}/profile", headers=h), 405, "method")
    assert "GET" in b["fix"]
    b = problem(http.post(f"{u}/sessions/s7/messages", json={"role": "user", "message_id": "m", "text": " "},
                          headers=h), 422, "text")
    http.post(f"{u}/sessions/s7", json={}, headers=h)
    problem(http.post(f"{u}/sessions/s7/card", json={"replace_actions": ["no arrow"]}, headers=h), 422,
            "replace_actions")
    b = problem(http.post(f"{u}/sessions/never/card", json={"task": "t"}, headers=h), 422, "session_id")
    assert "POST /v1/users/{user_id}/sessions/{session_id}" in b["fix"]
    b = problem(http.post("/v1/commands", json={"commands": [{"user_id": "u1", "text": "I like tea"}]}, headers=h),
                422, "commands[0].key")
    assert "/memories" in b["fix"]
    problem(http.post("/v1/commands", json={"commands": []}, headers=h), 422, "commands")
    b = problem(http.post(f"{u}/memories", json={"text": "x", "observedAt": "2024-01-01T00:00:00Z"}, headers=h), 422,
                "observedAt")
    assert "observed_at" in b["fix"]
    # sensitivity labels are lowercase identifiers, everywhere
    problem(http.post(f"{u}/memories", json={"text": "I have asthma", "sensitivity": "Bogus Label"}, headers=h),
            422, "sensitivity")
    problem(http.post(f"{u}/facts/health.lungs", json={"value": "asthma", "sensitivity": "Health"}, headers=h),
            422, "sensitivity")
    problem(http.post(f"{u}/search", json={"query": "x", "allow_sensitive": ["Bogus Label"]}, headers=h), 422,
            "allow_sensitive")
    with MemoryLedger(home=api["home"]) as ml:
        assert "health.lungs" not in ml.profile("u1").facts
    # small contracts
    problem(http.get(f"{u}/sessions/s7/messages?limit=-5", headers=h), 422, "limit")
    t0 = time.monotonic()
    b = problem(http.get(f"{u}/changes?after=99999999", headers=h), 422, "after")
    assert time.monotonic() - t0 < 5 and "head" in b["problem"]
    b = problem(http.post(f"{u}/facts/pref.idem", json={"value": 1, "idempotency_key": "body-key"},
                          headers={**h, "Idempotency-Key": "header-key"}), 422, "idempotency_key")
    r = http.post(f"{u}/facts/pref.idem", json={"value": 1, "idempotency_key": "same"},
                  headers={**h, "Idempotency-Key": "same"})
    assert r.status_code == 201, r.text


def test_unlink_route(api: Any) -> None:
    http, h = api["http"], auth(api, "u1")
    before = http.get("/v1/users/u1/profile", headers=h).json()["facts"]["preference.drink"]["value"]
    r = http.post("/v1/users/u1/memories", json={"text": "I drink coffee every morning"}, headers=h)
    assert r.status_code == 201, r.text
    got = r.json()
    assert (got["decision"], got["key"]) == ("supersede", "preference.drink"), got["explanation"]
    r = http.post(f"/v1/users/u1/facts/{got['key']}/unlinks", json={"version": 99}, headers=h)
    assert r.status_code == 422 and r.json()["field"] == "version" and "memledger" not in r.json()["fix"], r.text
    r = http.post(f"/v1/users/u1/facts/{got['key']}/unlinks", json={"version": got["version"]}, headers=h)
    assert r.status_code == 201 and r.json()["decision"], r.text
    prof = http.get(f"/v1/users/u1/profile?after={r.headers['X-Ledger-Position']}", headers=h).json()
    assert prof["facts"]["preference.drink"]["value"] == before  # the supersede undone
    r = http.post("/v1/users/u1/facts/preference.drink/unlinks", json={"version": 1}, headers=auth(api, "u2"))
    assert r.status_code == 403


def test_serve_http_on_a_busy_port_exits_1_before_its_banner(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        proc = memledger(tmp_path / "h", "serve", "http", "--host", "127.0.0.1", "--port", str(s.getsockname()[1]),
                         process=True)  # a server's start: a real process
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "cannot listen on 127.0.0.1:" in proc.stderr and "--port" in proc.stderr
    assert "memledger HTTP API on" not in proc.stderr


def test_sigterm_closes_the_ledger_and_hands_back_the_key_reserve(tmp_path: Path) -> None:
    """A service manager stops the server with SIGTERM: it exits 143 as before, but only after closing the ledger,
    so the per-fact keys it reserved are deleted (uvicorn re-raised the signal after its graceful shutdown, and the
    default action killed the process before the ledger closed: the reserve stayed in keys.db)."""
    import signal
    import sqlite3

    home = tmp_path / "h"
    key = create_key(home, "--user", "u1")
    server = Server(home, "http")
    try:
        server.wait_ready()
        for i in range(3):
            r = httpx.post(f"{server.base}/v1/users/u1/facts/note.k{i}", json={"value": f"v{i}"},
                           headers={"Authorization": f"Bearer {key}"}, timeout=30)
            assert r.status_code == 201, r.text
        with sqlite3.connect(home / "keys.db") as conn:
            # the first write stored its key and a reserve of 64; the next two took keys from the reserve
            assert conn.execute("SELECT count(*) FROM fact_keys").fetchone()[0] == 1 + 64
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=30) == 143
    finally:
        server.stop()
    with sqlite3.connect(home / "keys.db") as conn:
        assert conn.execute("SELECT count(*) FROM fact_keys").fetchone()[0] == 3


def test_a_stopping_server_ends_an_open_feed_with_an_end_event_and_no_traceback(tmp_path: Path) -> None:
    """SIGTERM while a change feed is open: the feed ends with an `end` event naming the position to resume from
    (the stream is not cut: the client reads to its end), and the server's log holds no traceback or error."""
    import signal
    import threading

    home = tmp_path / "h"
    key = create_key(home, "--user", "u1")
    server = Server(home, "http")
    events: list[str] = []
    try:
        server.wait_ready()
        auth = {"Authorization": f"Bearer {key}"}
        r = httpx.post(f"{server.base}/v1/users/u1/facts/note.k", json={"value": "v"}, headers=auth, timeout=30)
        assert r.status_code == 201, r.text

        def read() -> None:
            with httpx.stream("GET", f"{server.base}/v1/users/u1/changes?after=0", headers=auth, timeout=30) as s:
                for line in s.iter_lines():
                    events.append(line)

        reader = threading.Thread(target=read)
        reader.start()
        deadline = time.monotonic() + 20
        while not any(e.startswith("event: change") for e in events) and time.monotonic() < deadline:
            time.sleep(0.05)
        server.proc.send_signal(signal.SIGTERM)
        reader.join(timeout=30)
        assert not reader.is_alive()
        assert server.proc.wait(timeout=30) == 143
    finally:
        server.stop()
    assert "event: end" in events, events
    end = json.loads(events[events.index("event: end") + 1].removeprefix("data: "))
    assert end == {"reason": "the server is stopping", "after": r.json()["position"]}
    log = server.log_path.read_text()
    assert "Traceback" not in log and "ERROR" not in log, log
