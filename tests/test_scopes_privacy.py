"""Scopes in the user-control verbs: an export limited to an agent or a run, and forgetting what an agent wrote or
a run held (memledger/scopes.py; docs/erasure.md). Both backends."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from ledger.errors import BadInput
from memledger import MemoryLedger
from memledger.erasure import UserExport
from memledger.servers.http import create_app
from memledger.servers.keys import APIKeyStore
from memledger.servers.ops import Service


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLEDGER_EMBEDDER", "hash")


def _seed(ml: MemoryLedger) -> None:
    ml.session_start("u", "r1", observed_at="2024-01-01T00:00:00Z")
    ml.log_message("u", "r1", role="user", message_id="m1", text="let us talk about drinks")
    ml.session_start("u", "r2", observed_at="2024-01-01T00:00:00Z")
    ml.assert_fact("u", "preference.drink", "green tea", text="I drink green tea", agent_id="a", run_id="r1")
    ml.assert_fact("u", "pet.name", "Miso", text="my cat is called Miso", agent_id="a", run_id="r2")
    ml.assert_fact("u", "home.city", "Berlin", text="I live in Berlin", agent_id="b", run_id="r2")
    ml.assert_fact("u", "home.city", "Munich", text="I live in Munich now", agent_id="a", run_id="r2")
    ml.assert_fact("u", "work.employer", "Acme", text="I work at Acme")
    ml.assert_fact("u", "health.condition", "asthma", text="I have asthma", agent_id="b", sensitivity="health")
    ml.assert_fact("v", "preference.drink", "black coffee", text="I drink black coffee", agent_id="a", run_id="r1")


# ------------------------------------------------------------------------------------------------------ export


def test_an_export_can_be_limited_to_an_agent_or_a_run(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    _seed(ml)
    whole = ml.export("u")
    assert whole.scope is None and "scope" not in whole.model_dump(mode="json")
    assert len(whole.history) == 6 and {s["session_id"] for s in whole.sessions} == {"r1", "r2"}

    by_a = ml.export("u", agent_id="a")
    assert by_a.scope == {"agent_id": "a"} and by_a.model_dump(mode="json")["scope"] == {"agent_id": "a"}
    # the current facts written by a (home.city is a's since a changed it), and the versions a recorded
    assert {k: f.value for k, f in by_a.profile.facts.items()} == {
        "preference.drink": "green tea", "pet.name": "Miso", "home.city": "Munich"}
    assert [(h.key, h.version, h.actor) for h in by_a.history] == [
        ("preference.drink", 1, "a"), ("pet.name", 1, "a"), ("home.city", 2, "a")]
    assert by_a.sessions == [] and by_a.entities == [] and by_a.relations == []  # a message records no agent
    text = by_a.model_dump_json()
    assert "Berlin" not in text and "Acme" not in text and "asthma" not in text and "black coffee" not in text

    by_r2 = ml.export("u", run_id="r2")
    assert [(h.key, h.version) for h in by_r2.history] == [("pet.name", 1), ("home.city", 1), ("home.city", 2)]
    assert set(by_r2.profile.facts) == {"pet.name", "home.city"}
    assert [s["session_id"] for s in by_r2.sessions] == ["r2"]
    by_r1 = ml.export("u", run_id="r1")
    assert [m["text"] for m in by_r1.sessions[0]["messages"]] == ["let us talk about drinks"]
    both = ml.export("u", agent_id="b", run_id="r2")
    assert [(h.key, h.value) for h in both.history] == [("home.city", "Berlin")] and both.profile.facts == {}
    # the labelled fact b wrote: complete, and recorded as a disclosure of that version only
    by_b = ml.export("u", agent_id="b")
    assert by_b.profile.facts["health.condition"].value == "asthma"
    assert [(d.key, d.version) for d in ml.export("u", agent_id="b").disclosures] == [("health.condition", 1)] * 2
    assert ml.export("u", agent_id="a").disclosures == []
    assert UserExport.model_validate_json(by_r2.model_dump_json()) == by_r2
    # a scope that holds nothing is an empty export of a known user; an unknown user is refused whatever the scope
    empty = ml.export("u", agent_id="nobody")
    assert (empty.profile.facts, empty.history, empty.sessions) == ({}, [], [])
    with pytest.raises(BadInput) as e:
        ml.export("w", agent_id="a")
    assert e.value.field == "user_id"
    with pytest.raises(BadInput) as e:
        ml.export("u", run_id=" ")
    assert e.value.field == "run_id"


def test_export_by_scope_through_the_cli_and_http(cli: Any, fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    _seed(ml)
    doc = cli.json("export", "u", "--agent", "b")
    assert doc["scope"] == {"agent_id": "b"}
    assert [(h["key"], h["value"]) for h in doc["history"]] == [("home.city", "Berlin"), ("health.condition",
                                                                                           "asthma")]
    code, out, _ = cli("export", "u", "--run", "r2")
    assert code == 0 and out.startswith("export of u run_id=r2 at ") and "3 history events" in out
    code, out, err = cli("export", "u", "--agent", "")
    assert (code, out) == (2, "") and err.startswith("error: --agent: is empty")
    assert "--agent" in cli("export", "--help")[1]

    admin = APIKeyStore(ml).create(["u"], admin=True).secret
    plain = APIKeyStore(ml).create(["u"]).secret
    with TestClient(create_app(Service(ml)), headers={"Authorization": f"Bearer {admin}"}) as http:
        r = http.get("/v1/users/u/export", params={"run_id": "r1"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["scope"] == {"run_id": "r1"} and [h["key"] for h in body["history"]] == ["preference.drink"]
        assert "scope" not in http.get("/v1/users/u/export").json()
        bad = http.get("/v1/users/u/export", params={"agent_id": ""})
        assert bad.status_code == 422 and bad.json()["field"] == "agent_id"
        r = http.get("/v1/users/u/export", params={"agent_id": "b"}, headers={"Authorization": f"Bearer {plain}"})
        assert r.status_code == 200
        withheld = {h["key"]: h for h in r.json()["history"]}["health.condition"]
        assert withheld["value"] is None and withheld["withheld"] == "health"


# ------------------------------------------------------------------------------------------------------ forget

A_TEXTS = ["my cat is called Miso", "I live in Munich now", "I drink green tea"]


def test_forgetting_what_an_agent_wrote_shreds_its_versions_only(store_args: dict, cli: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.test_erasure import found, store_bytes

    # unsealed projections, where a grep for the texts can fail (sealed, nothing is plaintext before either)
    monkeypatch.setenv("MEMLEDGER_PROJECTION_SEALING", "off")
    cli.env["MEMLEDGER_PROJECTION_SEALING"] = "off"
    with MemoryLedger(**store_args) as ml:
        _seed(ml)
        assert found(store_bytes(ml, store_args), *A_TEXTS) == A_TEXTS
        head = ml.head()
        # refused, nothing written: no scope, an empty one, --version with a scope, no --yes, a scope with nothing
        with pytest.raises(BadInput) as e:
            ml.forget_scope("u")
        assert e.value.field == "agent_id"
        with pytest.raises(BadInput) as e:
            ml.forget_scope("u", run_id="")
        assert e.value.field == "run_id"
        with pytest.raises(BadInput) as e:
            ml.forget_scope("u", agent_id="nobody")
        assert (e.value.field, e.value.problem) == ("agent_id", "u has no memory written by agent 'nobody' left to "
                                                                "forget")
        with pytest.raises(BadInput) as e:
            ml.forget_scope("w", agent_id="a")
        assert e.value.field == "user_id"
        assert ml.head() == head
    code, out, err = cli("forget", "u", "--agent", "a", "--version", "1", "--yes")
    assert (code, out) == (2, "") and err.startswith("error: --version: cannot be given with --agent / --run")
    code, _, err = cli("forget", "u", "--agent", "a")
    assert code == 2 and "add --yes: memledger forget u --agent a --yes" in err
    code, _, err = cli("forget", "u", "--yes")
    assert code == 2 and err.startswith("error: KEY: is missing")

    r = cli.json("forget", "u", "--agent", "a", "--yes", "--actor", "user-request-7")
    assert (r["user_id"], r["agent_id"], r["run_id"], r["key"]) == ("u", "a", None, None)
    assert [(f["key"], f["versions"], f["current_value_forgotten"]) for f in r["forgotten"]] == [
        ("home.city", [2], True), ("pet.name", [1], True), ("preference.drink", [1], True)]
    assert r["keys_destroyed"] == 3 and len({f["position"] for f in r["forgotten"]}) == 3
    with MemoryLedger(**store_args) as ml:
        data = store_bytes(ml, store_args)
        assert found(data, *A_TEXTS) == []
        # b's versions, the unscoped fact and the other user's (same agent, same run) stay
        assert found(data, "I live in Berlin", "I work at Acme", "I drink black coffee") == [
            "I live in Berlin", "I work at Acme", "I drink black coffee"]
        assert set(ml.profile("u").facts) == {"work.employer", "health.condition"}
        assert ml.profile("v").facts["preference.drink"].value == "black coffee"
        rows = ml.history("u", "home.city")
        assert [(h.version, h.status, h.value, h.actor) for h in rows] == [
            (1, "superseded", "Berlin", "b"), (2, "forgotten", None, "a"), (3, "forgotten", None, "user-request-7")]
        assert ml.search("u", "cat Miso Munich green tea", agent_id="a") == []
        assert ml.export("u", agent_id="a").profile.facts == {}
        assert all(p.ok for p in ml.verify())
        ml.rebuild()
        assert found(store_bytes(ml, store_args), *A_TEXTS) == []
        assert all(p.ok for p in ml.verify())
        # again: nothing of a's is left to forget
        with pytest.raises(BadInput) as e:
            ml.forget_scope("u", agent_id="a")
        assert e.value.field == "agent_id"


def test_forgetting_a_run_and_one_key_of_an_agent(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    _seed(ml)
    r = ml.forget_scope("u", run_id="r2", key="home.city")
    assert (r.key, [(f.key, f.versions) for f in r.forgotten]) == ("home.city", [("home.city", [1, 2])])
    assert set(ml.profile("u").facts) == {"preference.drink", "pet.name", "work.employer", "health.condition"}
    r = ml.forget_scope("u", agent_id="a", run_id="r1")
    assert [(f.key, f.versions) for f in r.forgotten] == [("preference.drink", [1])]
    assert set(ml.profile("u").facts) == {"pet.name", "work.employer", "health.condition"}
    with pytest.raises(BadInput) as e:
        ml.forget_scope("u", run_id="r2", key="nope.key")
    assert e.value.field == "key"
    assert all(p.ok for p in ml.verify())


# ------------------------------------------------------------------------------------------------- MCP end_session


def test_mcp_end_session_closes_the_runs_memories(fresh_ledger: MemoryLedger) -> None:
    import asyncio

    from memledger.servers.mcp import build_mcp

    ml = fresh_ledger
    service = Service(ml)

    async def run() -> dict[str, Any]:
        from mcp import Client

        async with Client(build_mcp(service, user="u")) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            out: dict[str, Any] = {"tool": tools["end_session"]}
            await c.call_tool("log_message", {"session_id": "r1", "role": "user", "message_id": "m1",
                                              "text": "I drink green tea"})
            await c.call_tool("remember", {"text": "I drink green tea", "run_id": "r1"})
            await c.call_tool("remember", {"text": "I live in Berlin", "run_id": "r2"})
            await c.call_tool("log_message", {"session_id": "r2", "role": "user", "message_id": "m2", "text": "hi"})
            out["plain"] = await c.call_tool("end_session", {"session_id": "r2"})
            out["closed"] = await c.call_tool("end_session", {"session_id": "r1", "close_memories": True})
            out["bad"] = await c.call_tool("end_session", {"session_id": "r3", "close_memories": "maybe"})
            out["other"] = await c.call_tool("end_session", {"user_id": "v", "session_id": "r1"})
            return out

    out = asyncio.run(run())
    tool = out["tool"]
    assert set(tool.input_schema["properties"]) >= {"user_id", "session_id", "close_memories", "observed_at"}
    assert tool.output_schema is not None and "closed_memories" in tool.description
    assert not out["plain"].is_error and "closed_memories" not in out["plain"].structured_content
    closed = out["closed"].structured_content
    assert not out["closed"].is_error and closed["event"] == "SessionEnded"
    assert [(c["key"], c["kind"]) for c in closed["closed_memories"]] == [("preference.drink", "retracted")]
    assert out["bad"].is_error and "close_memories" in out["bad"].content[0].text
    assert out["other"].is_error  # the pinned user only
    assert set(ml.profile("u").facts) == {"residence.city"}
    assert ml.history("u", "preference.drink")[-1].reason == "closed with run r1"


# ------------------------------------------------------------------------------------------------ keys of an agent


def test_a_key_limited_to_an_agent_writes_and_reads_as_that_agent(cli: Any, fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    ml.assert_fact("u", "home.city", "Berlin", text="I live in Berlin", agent_id="b")
    ml.assert_fact("u", "work.employer", "Acme", text="I work at Acme")
    created = cli.json("keys", "create", "--user", "u", "--agent", "a")
    assert created["agent"] == "a"
    plain = cli.json("keys", "create", "--user", "u")
    assert "agent" not in plain  # a key without the limit: as before
    assert {k["key_id"]: k.get("agent") for k in cli.json("keys", "list")} == {created["key_id"]: "a",
                                                                               plain["key_id"]: None}
    code, _, err = cli("keys", "create", "--user", "u", "--agent", " ")
    assert code == 2 and err.startswith("error: --agent: is empty")
    with TestClient(create_app(Service(ml)), headers={"Authorization": f"Bearer {created['secret']}"}) as http:
        # writes without an agent are a's; naming another agent is refused, naming a is fine
        r = http.post("/v1/users/u/memories", json={"text": "I drink green tea"})
        assert r.status_code == 201, r.text
        assert http.post("/v1/users/u/facts/pet.name", json={"value": "Miso", "agent_id": "a"}).status_code == 201
        head = http.get("/v1/health").json()["head"]
        for path, body, field in (
                ("/v1/users/u/facts/pet.name", {"value": "Rex", "agent_id": "b"}, "agent_id"),
                ("/v1/users/u/memories", {"text": "my dog is Rex", "actor": "b"}, "actor"),
                ("/v1/commands", {"commands": [{"op": "assert", "user_id": "u", "key": "pet.name", "value": "Rex"},
                                               {"op": "assert", "user_id": "u", "key": "pet.kind", "value": "dog",
                                                "agent_id": "b"}]}, "commands[1].agent_id"),
                ("/v1/users/u/search", {"query": "Berlin", "agent_id": "b"}, "agent_id")):
            bad = http.post(path, json=body)
            assert bad.status_code == 403 and bad.headers["content-type"] == "application/problem+json", path
            assert (bad.json()["field"], bad.json()["problem"]) == (
                field, "'b' is not the agent this API key is limited to ('a')")
        assert http.get("/v1/health").json()["head"] == head  # nothing written
        r = http.post("/v1/commands", json={"commands": [{"op": "assert", "user_id": "u", "key": "pet.kind",
                                                          "value": "cat"}]})
        assert r.status_code == 201, r.text
        assert {(h.key, h.actor) for h in ml.history("u") if h.key != "home.city" and h.key != "work.employer"} == {
            ("preference.drink", "a"), ("pet.name", "a"), ("pet.kind", "a")}
        # reads are narrowed to a: b's and nobody's memories are not shown
        assert set(http.get("/v1/users/u/profile").json()["facts"]) == {"preference.drink", "pet.name", "pet.kind"}
        assert http.get("/v1/users/u/history", params={"agent_id": "b"}).status_code == 403
        assert {h["key"] for h in http.post("/v1/users/u/search", json={"query": "Berlin Acme tea"}).json()} <= {
            "preference.drink", "pet.name", "pet.kind"}
        hits = http.get("/v1/users/u/search", params={"query": "Berlin Acme"}).json()
        assert not {"home.city", "work.employer"} & {h["key"] for h in hits}
        text = http.post("/v1/users/u/context", json={}).json()["text"]
        assert "Berlin" not in text and "Acme" not in text
        assert set(http.get("/v1/users/u/export").json()["profile"]["facts"]) == {"preference.drink", "pet.name",
                                                                                  "pet.kind"}
        # what cannot be narrowed to an agent is refused, not shown whole
        for path in ("/v1/users/u/audit", "/v1/users/u/sessions"):
            bad = http.get(path)
            assert bad.status_code == 403 and bad.json()["field"] == "Authorization", path
        assert http.get("/v1/users/v/profile").status_code == 403  # the user stays the boundary
        # a remember's receipt lists only the memories this agent wrote, though it weighs (and may revise) others'
        r = http.post("/v1/users/u/memories", json={"text": "Berlin was lovely in the spring, I hear"})
        assert r.status_code == 201, r.text
        assert all("Berlin" not in (m.get("text") or "") for m in r.json()["related"]), r.json()["related"]
        # a user's page shows every agent's memories: a key limited to one agent signs in to its agent's own page
        # alone (tests/test_scopes_agent_erase.py), never to the user's
        login = http.post("/ui/login", data={"key": created["secret"], "next": "/ui/users/u"},
                          headers={"Origin": "http://testserver"}, follow_redirects=False)
        assert (login.status_code, login.headers["location"]) == (303, "/ui/users/~agent%2Fa")
        http.cookies.set("memledger_ui", created["secret"])
        page = http.get("/ui/users/u", follow_redirects=False)
        assert page.status_code == 403 and "limited to agent" in page.text and "Berlin" not in page.text
        http.cookies.clear()
    with TestClient(create_app(Service(ml)), headers={"Authorization": f"Bearer {plain['secret']}"}) as http:
        assert set(http.get("/v1/users/u/profile").json()["facts"]) >= {"home.city", "work.employer"}


def test_a_key_table_made_before_agent_keys_keeps_its_keys_unlimited(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    old = APIKeyStore(ml).create(["u"])
    with ml.db.transaction() as cur:  # the table as it was before keys could name an agent
        cur.execute("ALTER TABLE api_keys DROP COLUMN agent")
    keys = APIKeyStore(ml)  # opening adds the column back, empty
    principal = keys.authenticate(old.secret)
    assert principal is not None and principal.agent is None and principal.users == frozenset({"u"})
    assert keys.get(old.key_id).agent is None
    assert keys.authenticate(keys.create(["u"], agent="a").secret).agent == "a"
