"""Bad agent and run ids, and other bad input of the scoped faces, refused on every face with the field named and a
fix that says what to send; nothing is written (the log's head is unchanged). Both backends.

- an agent or run id holds what a user id may: a zero-width space (any control or invisible character) is refused,
  and an agent id holds no '/' (its own memories are addressed by it: ``/v1/agents/{agent_id}``, ``~agent/A``);
- a number field refuses true and false (pydantic would read them as 1 and 0);
- an agent's own id sent as a user over HTTP is pointed to the agent's route; a scope that holds nothing, or an
  agent's erased own memories, are told about the agent, not a user;
- an unknown MCP argument is offered a close name only, else the tool's arguments are listed.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ledger.errors import BadInput
from memledger import MemoryLedger
from memledger.servers.http import create_app
from memledger.servers.keys import APIKeyStore
from memledger.servers.mcp import build_mcp
from memledger.servers.ops import Service

ZWSP = "\u200b"
HIDDEN = "pl" + ZWSP + "anner"


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLEDGER_EMBEDDER", "hash")


def _seeded(ml: MemoryLedger) -> int:
    ml.remember("u1", "I drink green tea", agent_id="planner")
    return ml.head()


def _json_error(err: str) -> dict[str, Any]:
    return json.loads(err.strip().splitlines()[-1])["error"]


#: (arguments, the field named, the problem): a verb with a request model names its option without dashes
#: (``agent``), as every refusal of its options does; the others name the flag given, never the recorded field
CLI_CASES = [
    (["remember", "u1", "I drink black coffee", "--agent", HIDDEN], "agent", "U+200B (ZERO WIDTH SPACE)"),
    (["assert", "u1", "home.city", "Rome", "--agent", HIDDEN], "--agent", "U+200B (ZERO WIDTH SPACE)"),
    (["correct", "u1", "preference.drink", "coffee", "--actor", "x/y"], "actor", "holds '/'"),
    (["remember", "-", "I answer in French", "--agent", "x/y"], "--agent", "holds '/'"),
    (["assert", "u1", "home.city", "Rome", "--run", "r" + ZWSP + "1"], "--run", "U+200B (ZERO WIDTH SPACE)"),
    (["search", "u1", "tea", "--agent", HIDDEN], "agent", "U+200B (ZERO WIDTH SPACE)"),
    (["forget", "u1", "--agent", "x/y", "--yes"], "--agent", "holds '/'"),
    (["keys", "create", "--agent", "x/y"], "--agent", "holds '/'"),
    (["remember", "u1", "I drink black coffee", "--agent", " "], "agent", "is empty"),
    (["assert", "u1", "home.city", "Rome", "--agent", " "], "--agent", "is empty"),
]


def test_cli_refuses_agent_and_run_ids_a_user_id_could_not_hold(cli: Any, fresh_ledger: MemoryLedger) -> None:
    head = _seeded(fresh_ledger)
    for args, flag, problem in CLI_CASES:
        code, out, err = cli(*args, "--json")
        assert code == 2, (args, out, err)
        error = _json_error(err)
        assert error["field"] == flag and problem in error["problem"], (args, error)
        assert error["fix"], args  # every refusal says what to send
        assert "agent id is" in error["fix"] or "run id is" in error["fix"], (args, error)
    assert _json_error(cli(*CLI_CASES[0][0], "--json")[2])["fix"].startswith("send 'planner': an agent id is")
    code, _, err = cli("remember", "-", "x", "--agent", "x/y", "--json")
    assert _json_error(err)["fix"].startswith("use 'x-y': an agent id is letters, digits, spaces inside and "
                                              "punctuation other than '/'")
    code, _, err = cli("remember", "u1", "I drink black coffee", "--agent", "", "--json")
    assert code == 2 and _json_error(err)["fix"].startswith("leave --agent out, or give one: an agent id is")
    assert fresh_ledger.head() == head
    assert [r.actor for r in fresh_ledger.history("u1")] == ["planner"]


def test_cli_a_scope_that_holds_nothing_names_the_agent(cli: Any, fresh_ledger: MemoryLedger, tmp_path: Any) -> None:
    head = _seeded(fresh_ledger)
    for args in (["timeline", "-", "--agent", "nobody", "--html", str(tmp_path / "t.html")],
                 ["export", "-", "--agent", "nobody"], ["forget", "-", "--agent", "nobody", "--yes"],
                 ["erase", "-", "--agent", "nobody", "--yes"]):
        code, _, err = cli(*args)
        assert code == 2, (args, err)
        assert err.startswith("error: --agent: agent 'nobody' has no own memories here ("), (args, err)
        assert "(check the agent id (its own memories show as user ~agent/<agent id> in `memledger stats`); what " \
               "agent 'nobody' wrote about a user is read with that user's id and --agent nobody)" in err, err
        assert "USER" not in err
    assert not (tmp_path / "t.html").exists()
    assert fresh_ledger.head() == head


def test_http_refuses_them_in_bodies_queries_and_paths(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    head = _seeded(ml)
    admin = APIKeyStore(ml).create([], admin=True).secret
    hidden = "pl%E2%80%8Banner"
    with TestClient(create_app(Service(ml), mcp=False), headers={"Authorization": f"Bearer {admin}"}) as http:
        cases = [
            (http.post("/v1/users/u1/memories", json={"text": "I drink coffee", "agent_id": HIDDEN}), "agent_id",
             "U+200B"),
            (http.post("/v1/users/u1/memories", json={"text": "I drink coffee", "agent_id": "x/y"}), "agent_id",
             "holds '/'"),
            (http.post("/v1/users/u1/facts/home.city", json={"value": "Rome", "run_id": "r" + ZWSP}), "run_id",
             "U+200B"),
            (http.post("/v1/users/u1/facts/home.city", json={"value": "Rome", "actor": HIDDEN}), "actor", "U+200B"),
            (http.post("/v1/commands", json={"commands": [{"op": "assert", "user_id": "u1", "key": "home.city",
                                                           "value": "Rome", "agent_id": "x/y"}]}),
             "commands[0].agent_id", "holds '/'"),
            (http.get(f"/v1/users/u1/profile?agent_id={hidden}"), "agent_id", "U+200B"),
            (http.post("/v1/users/u1/search", json={"query": "tea", "run_id": "r" + ZWSP}), "run_id", "U+200B"),
            (http.post(f"/v1/agents/{hidden}/memories", json={"text": "I answer in French"}), "agent_id", "U+200B"),
            (http.post("/v1/users/u1/memories", json={"text": "I drink coffee", "agent_id": ""}), "agent_id",
             "is empty"),
            (http.post("/v1/users/u1/memories", json={"text": "I drink coffee", "agent_id": "  "}), "agent_id",
             "is empty"),
        ]
        for r, field, problem in cases:
            assert r.status_code == 422, r.text
            body = r.json()
            assert body["field"] == field and problem in body["problem"], body
            assert "agent id is" in body["fix"] or "run id is" in body["fix"], body
        assert cases[-1][0].json()["fix"].startswith("leave agent_id out, or give one: an agent id is letters")

        # a boolean is no number, on every model that takes one
        for r, field in (
                (http.post("/v1/users/u1/search", json={"query": "tea", "k": True}), "k"),
                (http.post("/v1/users/u1/context", json={"query": "tea", "budget": False}), "budget"),
                (http.post("/v1/users/u1/facts/preference.drink/unlinks", json={"version": True}), "version"),
                (http.post("/v1/users/u1/relations", json={"relation_type": "sister", "entity": "Anna", "confidence": True}),
                 "confidence")):
            assert r.status_code == 422, (field, r.text)
            assert (r.json()["field"], r.json()["problem"]) == (field, "is a boolean (" + (
                "false" if field == "budget" else "true") + "), not a number"), r.json()
            assert r.json()["fix"].startswith(f"give {field} as a number"), r.json()
        assert http.post("/v1/users/u1/search", json={"query": "tea", "k": 1}).status_code == 200

        # an agent's own id, as receipts show it, sent as a user: pointed to the agent's routes
        r = http.get("/v1/users/~agent%2Fplanner/profile")
        assert r.status_code == 404 and r.json()["field"] == "user_id"
        assert r.json()["fix"].startswith("use /v1/agents/planner/profile"), r.json()
        assert http.get("/v1/agents/planner/profile").status_code == 200
        r = http.get("/v1/users/a%2Fb/profile")  # any other id with '/': as before
        assert r.status_code == 404 and "/v1/agents/" not in r.json()["fix"]
        assert int(http.get("/v1/health").json()["head"]) == head
    assert ml.head() == head


def _mcp(ml: MemoryLedger, calls: list[tuple[str, dict[str, Any]]], **opts: Any) -> list[Any]:
    async def run() -> list[Any]:
        from mcp import Client

        async with Client(build_mcp(Service(ml), **opts)) as c:
            return [await c.call_tool(name, args) for name, args in calls]

    return asyncio.run(run())


def _tool_error(out: Any) -> str:
    assert out.is_error, out.content[0].text
    return out.content[0].text


def test_mcp_refuses_them_and_offers_only_close_names(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    head = _seeded(ml)
    hidden, slashed, run, empty, k, bogus, close = map(_tool_error, _mcp(ml, [
        ("remember", {"user_id": "u1", "text": "I drink coffee", "agent_id": HIDDEN}),
        ("remember", {"text": "I answer in French", "agent_id": "x/y"}),
        ("recall", {"user_id": "u1", "query": "tea", "run_id": "r" + ZWSP}),
        ("remember", {"user_id": "u1", "text": "I drink coffee", "agent_id": ""}),
        ("recall", {"user_id": "u1", "query": "tea", "k": True}),
        ("remember", {"user_id": "u1", "text": "I drink coffee", "bogus": 1}),
        ("remember", {"user_id": "u1", "text": "I drink coffee", "agentid": "planner"}),
    ]))
    assert "agent_id: 'pl\\u200banner' holds U+200B (ZERO WIDTH SPACE)" in hidden
    assert "(fix: send 'planner': an agent id is" in hidden
    assert "agent_id: 'x/y' holds '/'" in slashed and "(fix: use 'x-y': an agent id is" in slashed
    assert "run_id: 'r\\u200b' holds U+200B" in run and "a run id is" in run
    assert "agent_id: is empty (fix: leave agent_id out, or give one: an agent id is" in empty
    assert "k: is a boolean (true), not a number (fix: give k as a number, e.g. 10)" in k
    assert "did you mean" not in bogus
    assert bogus.endswith("bogus: is not an argument of this tool (fix: remove it; the arguments are: about, actor, "
                          "agent_id, confidence, idempotency_key, key, observed_at, role, run_id, sensitivity, "
                          "session_id, source, source_ref, text, trace_id, user_id, valid_from)")
    assert "(fix: did you mean agent_id? remove it;" in close
    assert ml.head() == head


def test_an_agents_erased_own_memories_are_told_as_the_agents(fresh_ledger: MemoryLedger, cli: Any) -> None:
    ml = fresh_ledger
    ml.remember(text="I answer in French", agent_id="planner")
    ml.erase(agent_id="planner")
    head = ml.head()
    [out] = _mcp(ml, [("remember", {"text": "I answer in German", "agent_id": "planner"})])
    text = _tool_error(out)
    assert "agent_id: '~agent/planner', the own memories of agent 'planner', was erased" in text
    assert "keep new ones under a new agent id, e.g. agent_id='planner-2'" in text and "user id" not in text
    with pytest.raises(BadInput) as e:
        ml.assert_fact(key="style.tone", value="dry", agent_id="planner")
    assert e.value.field == "agent_id" and "new agent id" in e.value.fix
    code, _, err = cli("remember", "-", "I answer in German", "--agent", "planner", "--json")
    assert code == 2 and _json_error(err)["field"] == "--agent"
    assert "--agent planner-2" in _json_error(err)["fix"]
    admin = APIKeyStore(ml).create([], admin=True).secret
    with TestClient(create_app(Service(ml), mcp=False), headers={"Authorization": f"Bearer {admin}"}) as http:
        r = http.post("/v1/agents/planner/memories", json={"text": "I answer in German"})
        assert r.status_code == 410 and r.json()["field"] == "agent_id", r.text
    assert ml.head() == head
    # what the planner writes about a user is not affected
    assert ml.remember("u1", "I drink green tea", agent_id="planner").user_id == "u1"


def test_python_langgraph_and_mem0_refuse_them(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    head = _seeded(ml)
    for call, field in ((lambda: ml.remember("u1", "I drink coffee", agent_id=HIDDEN), "agent_id"),
                        (lambda: ml.assert_fact("u1", "home.city", "Rome", run_id="r" + ZWSP), "run_id"),
                        (lambda: ml.assert_fact(key="style.tone", value="dry", agent_id="x/y"), "agent_id"),
                        (lambda: ml.profile("u1", agent_id=HIDDEN), "agent_id"),
                        (lambda: ml.search("u1", "tea", run_id="r" + ZWSP), "run_id")):
        with pytest.raises(BadInput) as e:
            call()
        assert e.value.field == field and e.value.fix, (field, e.value)
    from memledger.compat.mem0 import Memory

    m = Memory(ledger=ml)
    for kwargs, field in ((dict(user_id="u1", agent_id=HIDDEN), "agent_id"), (dict(agent_id="x/y"), "agent_id"),
                          (dict(user_id="u1", run_id="r" + ZWSP), "run_id")):
        with pytest.raises(BadInput) as e:
            m.add("I drink coffee", **kwargs)
        assert e.value.field == field and ("agent id is" in e.value.fix or "run id is" in e.value.fix), e.value
    pytest.importorskip("langgraph")
    from memledger.integrations.langgraph import MemledgerStore

    store = MemledgerStore(ml)
    for namespace, field in ((("u1", "agents", "x/y"), "namespace[2]"), (("u1", "runs", "r" + ZWSP), "namespace[2]"),
                             (("u1", "agents", "planner", "runs", "r" + ZWSP), "namespace[4]")):
        with pytest.raises(BadInput) as e:
            store.put(namespace, "drink", {"text": "black coffee"})
        assert e.value.field == field and ("agent id is" in e.value.fix or "run id is" in e.value.fix), e.value
    assert ml.head() == head


def test_every_refusal_the_faces_raise_says_what_to_send() -> None:
    """Each BadInput / RequestError the product raises is given a fix (a face would otherwise show an empty one)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    missing = []
    for path in sorted((root / "memledger").rglob("*.py")) + [root / "ledger" / "schemas.py",
                                                               root / "ledger" / "agent_spaces.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = getattr(node, "func", None)
            name = getattr(name, "id", getattr(name, "attr", None))
            if isinstance(node, ast.Call) and name in ("BadInput", "RequestError"):
                fix = node.args[2] if len(node.args) > 2 else next(
                    (k.value for k in node.keywords if k.arg == "fix"), None)
                if fix is None or (isinstance(fix, ast.Constant) and not fix.value):
                    missing.append(f"{path.relative_to(root)}:{node.lineno}")
    assert missing == []
