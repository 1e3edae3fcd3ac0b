"""An agent's own memories, written and read with agent_id and no user (memledger/agent_space.py,
ledger/agent_spaces.py): kept under the id ``~agent/A``, isolated from every user's memories, exported and erased
per agent; that id typed as a user is refused naming user_id and the fix. Both backends."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ledger.errors import BadInput
from memledger import AsyncMemoryLedger, MemoryLedger
from memledger.servers.http import create_app
from memledger.integrations.langgraph import MemledgerStore
from memledger.servers.keys import APIKeyStore
from memledger.servers.mcp import build_mcp
from memledger.servers.ops import Service


def _seed(ml: MemoryLedger) -> None:
    ml.remember(text="I answer in French", agent_id="planner")          # the planner's own memory
    ml.assert_fact(key="style.length", value="short", agent_id="planner")
    ml.assert_fact(None, "style.length", "long", agent_id="writer")      # another agent's own
    # the user u, written by the same planner: u's, never the planner's own
    ml.assert_fact("u", "preference.drink", "green tea", text="I drink green tea", agent_id="planner")
    ml.assert_fact("u", "style.length", "medium", agent_id="planner")


def test_an_agent_writes_and_reads_its_own_memories_apart_from_every_user(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    _seed(ml)
    own = ml.profile(agent_id="planner")
    assert own.user_id == "~agent/planner"
    assert {k: f.value for k, f in own.facts.items() if k != "style.length"} == {
        next(k for k in own.facts if k.startswith("memory.")): "I answer in French"}
    assert own.facts["style.length"].value == "short"
    assert ml.profile(agent_id="writer").facts["style.length"].value == "long"
    # u's reads never return an agent's own memories, and the agent's never return u's
    assert {k: f.value for k, f in ml.profile("u").facts.items()} == {"preference.drink": "green tea",
                                                                      "style.length": "medium"}
    assert {k: f.value for k, f in ml.profile("u", agent_id="planner").facts.items()} == {
        "preference.drink": "green tea", "style.length": "medium"}
    hits = ml.search(query="French tea short", agent_id="planner")
    assert {h.user_id for h in hits} == {"~agent/planner"} and "I answer in French" in {h.text for h in hits}
    assert "green tea" not in {h.text for h in hits}
    assert "French" not in {h.text for h in ml.search("u", "French tea short")}
    text = ml.context(agent_id="planner", query="language").text
    assert "French" in text and "green tea" not in text and "medium" not in text
    assert [(r.key, r.value, r.actor) for r in ml.history(agent_id="planner", key="style.length")] == [
        ("style.length", "short", "planner")]
    assert set(ml.believed(as_of="2100-01-01T00:00:00Z", agent_id="writer").facts) == {"style.length"}
    # a receipt's user_id may be passed back with the same agent
    r = ml.assert_fact(key="style.tone", value="dry", agent_id="planner")
    assert r.user_id == "~agent/planner"
    assert ml.profile(r.user_id, agent_id="planner").facts["style.tone"].value == "dry"
    # a write's actor is its agent (the same field)
    assert ml.assert_fact(key="style.tone", value="warm", actor="writer").user_id == "~agent/writer"


def test_the_agents_own_id_typed_as_a_user_is_refused_and_nothing_is_written(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    _seed(ml)
    head = ml.head()
    for call in (lambda: ml.assert_fact("~agent/planner", "pet.name", "Miso"),
                 lambda: ml.remember("~agent/x", "I like jazz"),
                 lambda: ml.profile("~agent/planner"),
                 lambda: ml.search("~agent/planner", "French"),
                 lambda: ml.profile("~agent/planner", agent_id="writer"),  # another agent's id
                 lambda: ml.search("u", "tea", also=["~agent/planner"]),
                 lambda: ml.erase("~agent/planner"),
                 # as a person reads it: another case, a full-width tilde
                 lambda: ml.assert_fact("~Agent/planner", "pet.name", "Miso"),
                 lambda: ml.assert_fact("\uff5eagent/planner", "pet.name", "Miso")):
        with pytest.raises(BadInput) as e:
            call()
        assert e.value.field in ("user_id", "also[0]", "also"), e.value.field
        assert "kept for agents' own memories" in e.value.problem
        assert "leave the user out and give agent_id=" in e.value.fix and "CLI" not in e.value.fix
    with pytest.raises(BadInput) as e:
        ml.profile()
    assert (e.value.field, e.value.problem) == ("user_id", "is missing") and "agent_id alone" in e.value.fix
    with pytest.raises(BadInput) as e:
        ml.assert_fact(key="pet.name", value="Miso", agent_id=" ")
    assert e.value.field == "agent_id"
    with pytest.raises(BadInput) as e:
        ml.erase("u", agent_id="planner")  # erasure is whole-user: never limited to an agent
    assert e.value.field == "agent_id" and "forget_scope" in e.value.fix
    assert ml.head() == head
    assert set(ml.profile("u").facts) == {"preference.drink", "style.length"}


def test_positional_arguments_with_an_agent_and_no_user_are_refused_naming_the_fix(
        fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    _seed(ml)
    head = ml.head()
    for call, name, fix in (
            (lambda: ml.assert_fact("style.tone", "dry", agent_id="planner"), "assert_fact",
             "ml.assert_fact(key=..., value=..., agent_id='planner')"),
            (lambda: ml.correct_fact("style.length", "brief", actor="planner"), "correct_fact",
             "ml.correct_fact(key=..., value=..., actor='planner')"),
            (lambda: ml.remember("I answer in German", agent_id="planner"), "remember",
             "ml.remember(text=..., agent_id='planner')"),
            (lambda: ml.search("French", agent_id="planner"), "search", "ml.search(query=..., agent_id='planner')"),
            (lambda: ml.true_at("2024-06-01T00:00:00Z", agent_id="planner"), "true_at",
             "ml.true_at(valid_at=..., agent_id='planner')"),
            (lambda: ml.diff("2024-01-01T00:00:00Z", "2100-01-01T00:00:00Z", agent_id="planner"), "diff",
             "ml.diff(from_=..., to=..., agent_id='planner')")):
        with pytest.raises(BadInput) as e:
            call()
        assert e.value.field == "user_id", name
        assert "was taken as the user (the first positional argument of " + name + ")" in e.value.problem
        assert e.value.fix.startswith("for the own memories of agent 'planner', pass the other arguments by name: "
                                      + fix), e.value.fix
        assert f"give the user first: ml.{name}(user_id, ...)" in e.value.fix
    assert ml.head() == head
    # the same calls with the arguments named, or a user first, are answered as before
    assert ml.assert_fact(key="style.tone", value="dry", agent_id="planner").user_id == "~agent/planner"
    assert ml.assert_fact("u", "style.tone", "warm", agent_id="planner").user_id == "u"
    assert [h.text for h in ml.search(query="answer in French", agent_id="planner")][:1] == ["I answer in French"]


def test_an_agents_own_memories_are_exported_forgotten_and_erased_per_agent(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    _seed(ml)
    doc = ml.export(agent_id="planner").model_dump(mode="json")
    assert doc["user_id"] == "~agent/planner"
    assert sorted(f["value"] for f in doc["profile"]["facts"].values()) == ["I answer in French", "short"]
    assert "green tea" not in json.dumps(doc) and "long" not in json.dumps(doc)
    forgot = ml.forget_scope(agent_id="writer")
    assert [f.key for f in forgot.forgotten] == ["style.length"]
    assert ml.profile(agent_id="writer").facts == {}
    receipt = ml.erase(agent_id="planner")
    assert (receipt.user_id, receipt.facts) == ("~agent/planner", 2)
    assert ml.profile(agent_id="planner").erased is True and ml.profile(agent_id="planner").facts == {}
    # the user the planner wrote about is untouched
    assert {k: f.value for k, f in ml.profile("u").facts.items()} == {"preference.drink": "green tea",
                                                                      "style.length": "medium"}


def test_the_async_api_takes_an_agent_alone(store_args: dict[str, Any]) -> None:
    async def run() -> tuple[str, dict[str, Any]]:
        async with AsyncMemoryLedger(**store_args, embedder="hash") as ml:
            r = await ml.assert_fact(key="style.length", value="short", agent_id="planner")
            prof = await ml.profile(agent_id="planner")
            return r.user_id, {k: f.value for k, f in prof.facts.items()}

    assert asyncio.run(run()) == ("~agent/planner", {"style.length": "short"})


def test_the_cli_spells_no_user_as_a_dash_with_agent(cli: Any) -> None:
    assert cli("remember", "-", "I answer in French", "--agent", "planner")[0] == 0
    assert cli("assert", "-", "style.length", "short", "--agent", "planner")[0] == 0
    assert cli("assert", "u", "style.length", "medium", "--agent", "planner")[0] == 0
    prof = cli.json("profile", "-", "--agent", "planner")
    assert prof["user_id"] == "~agent/planner" and prof["facts"]["style.length"]["value"] == "short"
    assert {k: f["value"] for k, f in cli.json("profile", "u")["facts"].items()} == {"style.length": "medium"}
    hits = cli.json("search", "-", "French", "--agent", "planner")
    assert {h["user_id"] for h in hits} == {"~agent/planner"} and hits[0]["text"] == "I answer in French"
    assert cli.json("export", "-", "--agent", "planner")["user_id"] == "~agent/planner"
    # refusals: exit 2, naming the field and the fix, nothing written
    head = cli.json("history", "-", "--agent", "planner")
    code, out, err = cli("profile", "-")
    assert (code, out) == (2, "") and err.startswith("error: USER: '-' names no user") and "--agent A" in err
    code, out, err = cli("assert", "~agent/planner", "pet.name", "Miso")
    assert (code, out) == (2, "") and err.startswith("error: user_id: '~agent/planner' starts with '~agent/'")
    assert "USER - with --agent planner" in err
    code, out, err = cli("erase", "u", "--agent", "planner", "--yes")
    assert (code, out) == (2, "") and err.startswith("error: --agent: erase destroys a whole user")
    assert cli.json("history", "-", "--agent", "planner") == head
    code, out, _ = cli("erase", "-", "--agent", "planner", "--yes")
    assert code == 0 and out.startswith("~agent/planner erased at position")
    assert cli.json("profile", "-", "--agent", "planner")["facts"] == {}
    assert {k: f["value"] for k, f in cli.json("profile", "u")["facts"].items()} == {"style.length": "medium"}


def test_the_faces_refuse_an_agents_own_id_as_a_user(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    _seed(ml)
    keys = APIKeyStore(ml)
    with pytest.raises(BadInput) as e:
        keys.create(["~agent/planner"])
    assert e.value.field == "--user" and "kept for agents' own memories" in e.value.problem
    admin = keys.create([], admin=True).secret
    with TestClient(create_app(Service(ml)), headers={"Authorization": f"Bearer {admin}"}) as http:
        r = http.post("/v1/users/~agent%2Fplanner/facts/pet.name", json={"value": "Miso"})
        assert r.status_code == 404 and r.json()["field"] == "user_id"  # no route carries a '/' in a user id

    async def mcp_call() -> Any:
        from mcp import Client

        async with Client(build_mcp(Service(ml))) as c:
            return await c.call_tool("remember", {"user_id": "~agent/planner", "text": "my cat is Miso"})

    out = asyncio.run(mcp_call())
    assert out.is_error and "user_id: '~agent/planner' starts with '~agent/'" in out.content[0].text
    store = MemledgerStore(ml)
    with pytest.raises(BadInput) as e:
        store.put(("~agent/planner", "notes"), "k1", {"text": "my cat is Miso"})
    assert "kept for agents' own memories" in str(e.value)
    assert "pet.name" not in ml.profile(agent_id="planner").facts and len(ml.profile(agent_id="planner").facts) == 2
