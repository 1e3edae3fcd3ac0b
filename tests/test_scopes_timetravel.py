"""Time travel by scope: diff and audit take agent_id / run_id as believed does (memledger/scopes.py,
memledger/timetravel.py), through the Python API (both backends), the CLI, the HTTP routes and the MCP tools."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ledger.errors import BadInput
from memledger import MemoryLedger
from memledger.servers.http import create_app
from memledger.servers.keys import APIKeyStore
from memledger.servers.mcp import build_mcp
from memledger.servers.ops import Service


def _seed(ml: MemoryLedger) -> tuple[str, str]:
    """Agent a's tea (run r1) and agent b's Berlin (run r2); then, between the two instants returned, b changes the
    drink to coffee and a names the cat (both in run r2)."""
    ml.assert_fact("u", "preference.drink", "green tea", text="I drink green tea", agent_id="a", run_id="r1")
    last = ml.assert_fact("u", "home.city", "Berlin", text="I live in Berlin", agent_id="b", run_id="r2")
    ml.assert_fact("v", "pet.name", "Rex", text="my dog is Rex", agent_id="a", run_id="r2")  # never read through u
    t1 = ml.history("u", "home.city")[-1].recorded_at
    assert last.position == ml.history("u", "home.city")[-1].position
    ml.assert_fact("u", "preference.drink", "black coffee", text="I drink black coffee now", agent_id="b",
                   run_id="r2")
    ml.assert_fact("u", "pet.name", "Miso", text="my cat is called Miso", agent_id="a", run_id="r2")
    t2 = ml.history("u", "pet.name")[-1].recorded_at
    return t1.isoformat(), t2.isoformat()


def _changes(d: Any) -> dict[str, Any]:
    """A Diff (model or its JSON) as {change: {key: (before value, after value, event actor)}}."""
    doc = d if isinstance(d, dict) else d.model_dump(mode="json", by_alias=True)
    return {change: {k: ((e["before"] or {}).get("value"), (e["after"] or {}).get("value"), e["event"]["actor"])
                     for k, e in doc[change].items()} for change in ("added", "changed", "dropped")}


WHOLE = {"added": {"pet.name": (None, "Miso", "a")},
         "changed": {"preference.drink": ("green tea", "black coffee", "b")}, "dropped": {}}
BY_A = {"added": {"pet.name": (None, "Miso", "a")}, "changed": {},
        "dropped": {"preference.drink": ("green tea", None, "b")}}  # b's value replaced a's: b's event did it
BY_B = {"added": {"preference.drink": (None, "black coffee", "b")}, "changed": {}, "dropped": {}}
BY_A_R2 = {"added": {"pet.name": (None, "Miso", "a")}, "changed": {}, "dropped": {}}  # a's tea was run r1's


def _audit(doc: Any) -> dict[str, Any]:
    """An Audit (model or its JSON) as {key: (belief value, replaced, [(version, actor) of the chain])}."""
    doc = doc if isinstance(doc, dict) else doc.model_dump(mode="json")
    return {k: ((e["belief"] or {}).get("value"), e["replaced"], [(r["version"], r["actor"]) for r in e["chain"]])
            for k, e in doc["facts"].items()}


def test_diff_and_audit_narrow_to_the_scope(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    t1, t2 = _seed(ml)
    assert _changes(ml.diff("u", t1, t2)) == WHOLE
    assert _changes(ml.diff("u", t1, t2, agent_id="a")) == BY_A
    assert _changes(ml.diff("u", t1, t2, agent_id="b")) == BY_B
    assert _changes(ml.diff("u", t1, t2, run_id="r2")) == {
        "added": {"pet.name": (None, "Miso", "a"), "preference.drink": (None, "black coffee", "b")},
        "changed": {}, "dropped": {}}
    assert _changes(ml.diff("u", t1, t2, agent_id="a", run_id="r2")) == BY_A_R2
    assert _changes(ml.diff("u", t1, t2, agent_id="c")) == {"added": {}, "changed": {}, "dropped": {}}
    # a scoped diff is the change between the two scoped believed reads
    for scope in ({"agent_id": "a"}, {"agent_id": "b"}, {"run_id": "r1"}, {"agent_id": "a", "run_id": "r2"}):
        then, now = (set(ml.believed("u", t, **scope).facts) for t in (t1, t2))
        d = ml.diff("u", t1, t2, **scope)
        assert (set(d.added), set(d.dropped)) == (now - then, then - now), scope

    assert _audit(ml.audit("u")) == {
        "home.city": ("Berlin", [], [(1, "b")]), "pet.name": ("Miso", [], [(1, "a")]),
        "preference.drink": ("black coffee", [1], [(1, "a"), (2, "b")])}
    assert _audit(ml.audit("u", agent_id="a")) == {"pet.name": ("Miso", [], [(1, "a")])}
    # b's coffee: the chain holds b's event only; replaced still names the version it replaced (a's tea)
    assert _audit(ml.audit("u", agent_id="b")) == {
        "home.city": ("Berlin", [], [(1, "b")]), "preference.drink": ("black coffee", [1], [(2, "b")])}
    assert _audit(ml.audit("u", run_id="r1")) == {}
    # with a key: audited when an event of it was written in the scope, even when the scope believes nothing of it
    assert _audit(ml.audit("u", "preference.drink", agent_id="a")) == {"preference.drink": (None, [], [(1, "a")])}
    assert _audit(ml.audit("u", "preference.drink", run_id="r1")) == {"preference.drink": (None, [], [(1, "a")])}
    assert _audit(ml.audit("u", "preference.drink", agent_id="c")) == {}
    assert _audit(ml.audit("u", "home.city", agent_id="a")) == {}
    # as of t1, a still believed its tea
    assert _audit(ml.audit("u", as_of=t1, agent_id="a")) == {"preference.drink": ("green tea", [], [(1, "a")])}
    # the trace filter reads the scope's chain
    assert ml.audit("u", agent_id="a", source_ref="nowhere").facts == {}
    # no scope crosses users: v's Rex (agent a, run r2) is in none of u's reads
    assert "Rex" not in ml.diff("u", t1, t2, agent_id="a", run_id="r2").model_dump_json()
    assert _audit(ml.audit("v", agent_id="a")) == {"pet.name": ("Rex", [], [(1, "a")])}


def test_a_malformed_scope_is_refused_naming_it(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    t1, t2 = _seed(ml)
    with pytest.raises(BadInput) as e:
        ml.diff("u", t1, t2, agent_id=" ")
    assert e.value.field == "agent_id"
    with pytest.raises(BadInput) as e:
        ml.audit("u", run_id="")
    assert e.value.field == "run_id"


def test_the_cli_diff_and_audit_take_agent_and_run(cli: Any) -> None:
    for args in (("assert", "u", "preference.drink", "green tea", "--agent", "a", "--run", "r1"),
                 ("assert", "u", "home.city", "Berlin", "--agent", "b", "--run", "r2")):
        assert cli(*args)[0] == 0
    t1 = cli.json("history", "u")[-1]["recorded_at"]
    for args in (("assert", "u", "preference.drink", "black coffee", "--agent", "b", "--run", "r2"),
                 ("assert", "u", "pet.name", "Miso", "--agent", "a", "--run", "r2")):
        assert cli(*args)[0] == 0
    t2 = cli.json("history", "u")[-1]["recorded_at"]
    base = ("diff", "u", "--from", t1, "--to", t2)
    assert _changes(cli.json(*base)) == WHOLE
    assert _changes(cli.json(*base, "--agent", "a")) == BY_A
    assert _changes(cli.json(*base, "--agent", "b")) == BY_B
    assert _changes(cli.json(*base, "--agent", "a", "--run", "r2")) == BY_A_R2
    code, table, _ = cli(*base, "--agent", "a")
    assert code == 0 and "dropped" in table and "green tea" in table and "Berlin" not in table
    assert _audit(cli.json("audit", "u", "--agent", "b")) == {
        "home.city": ("Berlin", [], [(1, "b")]), "preference.drink": ("black coffee", [1], [(2, "b")])}
    assert _audit(cli.json("audit", "u", "preference.drink", "--run", "r1")) == {
        "preference.drink": (None, [], [(1, "a")])}
    code, text, _ = cli("audit", "u", "--agent", "a")
    assert code == 0 and "Miso" in text and "coffee" not in text and "Berlin" not in text
    code, out, err = cli(*base, "--agent", "")
    assert (code, out) == (2, "") and err.startswith("error: --agent: is empty")
    code, out, err = cli("audit", "u", "--run", " ")
    assert (code, out) == (2, "") and err.startswith("error: --run: is empty")
    assert "--agent" in cli("diff", "--help")[1] and "--run" in cli("audit", "--help")[1]


@pytest.fixture
def served(fresh_ledger: MemoryLedger) -> Any:
    ml = fresh_ledger
    return ml, Service(ml), APIKeyStore(ml).create(["u"]).secret


def test_http_diff_and_audit_take_agent_id_and_run_id(served: Any) -> None:
    ml, service, secret = served
    t1, t2 = _seed(ml)
    with TestClient(create_app(service), headers={"Authorization": f"Bearer {secret}"}) as http:
        diff = "/v1/users/u/diff"
        assert _changes(http.get(diff, params={"from": t1, "to": t2}).json()) == WHOLE
        assert _changes(http.get(diff, params={"from": t1, "to": t2, "agent_id": "a"}).json()) == BY_A
        assert _changes(http.get(diff, params={"from": t1, "to": t2, "agent_id": "a", "run_id": "r2"}).json()) \
            == BY_A_R2
        assert _audit(http.get("/v1/users/u/audit", params={"agent_id": "b"}).json()) == {
            "home.city": ("Berlin", [], [(1, "b")]), "preference.drink": ("black coffee", [1], [(2, "b")])}
        assert _audit(http.get("/v1/users/u/audit", params={"key": "preference.drink", "run_id": "r1"}).json()) \
            == {"preference.drink": (None, [], [(1, "a")])}
        bad = http.get(diff, params={"from": t1, "to": t2, "agent_id": ""})
        assert bad.status_code == 422 and bad.json()["field"] == "agent_id"
        bad = http.get("/v1/users/u/audit", params={"run_id": " "})
        assert bad.status_code == 422 and bad.json()["field"] == "run_id"
        # the user stays the boundary
        assert http.get("/v1/users/v/audit", params={"agent_id": "a"}).status_code == 403
        spec = http.get("/openapi.json").json()["paths"]
        for route in ("/v1/users/{user_id}/diff", "/v1/users/{user_id}/audit"):
            assert {"agent_id", "run_id"} <= {p["name"] for p in spec[route]["get"]["parameters"]}, route


def test_mcp_diff_and_audit_take_agent_id_and_run_id(served: Any) -> None:
    ml, service, _ = served
    t1, t2 = _seed(ml)

    async def run() -> dict[str, Any]:
        from mcp import Client

        async with Client(build_mcp(service, user="u")) as c:
            return {
                "diff": await c.call_tool("diff", {"from_as_of": t1, "to_as_of": t2, "agent_id": "b"}),
                "audit": await c.call_tool("audit", {"agent_id": "a", "run_id": "r2"}),
                "key": await c.call_tool("audit", {"key": "preference.drink", "agent_id": "a"}),
                "bad": await c.call_tool("diff", {"from_as_of": t1, "to_as_of": t2, "run_id": ""}),
            }

    out = asyncio.run(run())
    assert _changes(out["diff"].structured_content) == BY_B
    assert _audit(out["audit"].structured_content) == {"pet.name": ("Miso", [], [(1, "a")])}
    assert _audit(out["key"].structured_content) == {"preference.drink": (None, [], [(1, "a")])}
    assert out["bad"].is_error and "run_id" in out["bad"].content[0].text
