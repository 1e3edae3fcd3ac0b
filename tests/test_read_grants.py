"""Labels gate every read (docs/erasure.md, "Labels gate every read"): a fact version labelled sensitive shows its
value and text only when the read asks for its label (``allow_sensitive``) and, through a server, the API key holds
it; otherwise it is marked ``withheld`` with its label; each one shown is recorded as a disclosure.

Face by face (Python API, CLI, HTTP, MCP, LangGraph store, /ui), then the guard: every read route of the app's
OpenAPI document and every MCP tool and resource, called with a key lacking the label, never returns the labelled
value. A read route or tool added later is called too, so it cannot skip the gate; a write must be listed in
``HTTP_WRITES`` / ``MCP_WRITES`` with the reason it is not a read.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from memledger import MemoryLedger
from memledger.sensitivity import PURPOSE_EXPORT
from memledger.servers.http import create_app
from memledger.servers.keys import APIKeyStore
from memledger.servers.ops import Service

SECRET = "HIV positive"  # the labelled value; its sentence holds it too
SECRET_WORD = "Zorblax"  # a labelled free-text memory (remember): its reason quotes what it parsed
LATER = "2100-01-01T00:00:00Z"


def seed(ml: MemoryLedger) -> None:
    ml.assert_fact("u1", "health.condition", SECRET, text=f"I am {SECRET}", sensitivity="health",
                   observed_at="2024-01-01T00:00:00Z")
    ml.assert_fact("u1", "preference.drink", "tea", text="I drink green tea", observed_at="2024-01-02T00:00:00Z")
    ml.remember("u1", f"I was diagnosed with {SECRET_WORD} syndrome last spring", sensitivity="health")
    ml.remember("u1", "I walk my dog every evening")


def secrets_in(text: str) -> list[str]:
    return [s for s in (SECRET, SECRET_WORD) if s in text]


def disclosed(ml: MemoryLedger, user: str = "u1") -> list[tuple[str, int, str, str | None]]:
    return [(d.key, d.version, d.sensitivity, d.purpose) for d in ml.disclosures(user)]


# -- the Python API ------------------------------------------------------------------------------------------------
def _reads(ml: MemoryLedger) -> dict[str, Any]:
    """Each read of the Python API that returns fact values, as a call taking the grant keywords."""
    return {
        "profile": lambda **g: ml.profile("u1", **g).facts["health.condition"],
        "history": lambda **g: ml.history("u1", "health.condition", **g)[0],
        "believed": lambda **g: ml.believed("u1", LATER, "2024-06-01T00:00:00Z", **g).facts["health.condition"],
        "true_at": lambda **g: ml.true_at("u1", "2024-06-01T00:00:00Z", **g).facts["health.condition"],
        "diff": lambda **g: ml.diff("u1", "2000-01-01T00:00:00Z", LATER, valid_at="2024-06-01T00:00:00Z",
                                    **g).added["health.condition"].after,
        "audit": lambda **g: ml.audit("u1", "health.condition", **g).facts["health.condition"].chain[0],
        "due": lambda **g: next(f for f in ml.due("u1", now=LATER, **g).items if f.key == "health.condition"),
    }


@pytest.mark.parametrize("read", ["profile", "history", "believed", "true_at", "diff", "audit", "due"])
def test_python_reads_withhold_unless_asked_and_record_what_they_show(fresh_ledger: MemoryLedger, read: str) -> None:
    ml = fresh_ledger
    seed(ml)
    call = _reads(ml)[read]
    hidden = call()
    assert (hidden.value, hidden.text, hidden.withheld) == (None, None, "health")
    assert "withheld" in hidden.model_dump(mode="json") and not secrets_in(hidden.model_dump_json())
    assert disclosed(ml) == []  # nothing shown, nothing recorded
    other = call(allow_sensitive=["finance"], purpose="budget")
    assert (other.value, other.withheld) == (None, "health") and disclosed(ml) == []
    shown = call(allow_sensitive=["health"], purpose="care plan")
    assert (shown.value, shown.text, shown.withheld) == (SECRET, f"I am {SECRET}", None)
    assert "withheld" not in shown.model_dump(mode="json")
    got = disclosed(ml)  # the labelled versions the read showed: this one, and the remembered one if it was shown
    assert ("health.condition", 1, "health", "care plan") in got and {(d[2], d[3]) for d in got} == {
        ("health", "care plan")}
    assert len(got) == len(set(got))


def test_unlabelled_facts_are_untouched_and_record_nothing(fresh_ledger: MemoryLedger) -> None:
    seed(fresh_ledger)
    drink = fresh_ledger.profile("u1").facts["preference.drink"]
    assert (drink.value, drink.text, drink.withheld) == ("tea", "I drink green tea", None)
    assert [r.withheld for r in fresh_ledger.history("u1", "preference.drink")] == [None]


def test_a_remembered_labelled_statement_withholds_its_reason_and_what_was_read(fresh_ledger: MemoryLedger) -> None:
    seed(fresh_ledger)
    dumps = [fresh_ledger.profile("u1").model_dump_json(), json.dumps([r.model_dump(mode="json") for r in
                                                                       fresh_ledger.history("u1")]),
             fresh_ledger.audit("u1").model_dump_json()]
    assert [secrets_in(d) for d in dumps] == [[], [], []]
    rows = [r for r in fresh_ledger.history("u1") if r.withheld]
    assert {r.key for r in rows} >= {"health.condition"} and all(r.reason is None for r in rows)


def test_scheduled_and_quarantine_are_gated(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    ml.assert_fact("u1", "health.appointment", "oncology check-up", sensitivity="health",
                   observed_at="2024-01-01T00:00:00Z", valid_from="2099-01-01T00:00:00Z")
    [s] = ml.scheduled("u1", now="2024-06-01T00:00:00Z")
    assert (s.value, s.text, s.withheld) == (None, None, "health")
    [s] = ml.scheduled("u1", now="2024-06-01T00:00:00Z", allow_sensitive="health", purpose="reminder")
    assert s.value == "oncology check-up" and disclosed(ml) == [("health.appointment", 1, "health", "reminder")]
    ml.assert_fact("u1", "profile.age", 130, sensitivity="health", observed_at="2024-01-01T00:00:00Z")
    [q] = ml.quarantine("u1", now="2024-01-02T00:00:00Z").items
    assert (q.key, q.value, q.withheld) == ("profile.age", None, "health")
    [q] = ml.quarantine("u1", now="2024-01-02T00:00:00Z", allow_sensitive=["health"]).items
    assert (q.value, q.withheld) == (130, None)


def test_export_is_complete_and_records_itself(fresh_ledger: MemoryLedger) -> None:
    seed(fresh_ledger)
    doc = fresh_ledger.export("u1")
    assert doc.profile.facts["health.condition"].value == SECRET and SECRET in doc.model_dump_json()
    labelled = sorted({(r.key, r.version) for r in doc.history if r.sensitivity})
    assert sorted((k, v) for k, v, _, p in disclosed(fresh_ledger) if p == PURPOSE_EXPORT) == labelled
    gated = fresh_ledger.export("u1", complete=False)
    assert not secrets_in(gated.model_dump_json())
    fresh_ledger.export("u1", purpose="subject access request")
    assert disclosed(fresh_ledger)[-1][3] == "subject access request"


@pytest.mark.parametrize("bad, field", [(["Health!"], "allow_sensitive"), ("health,,finance", "allow_sensitive"),
                                        (42, "allow_sensitive")])
def test_bad_grants_are_refused_naming_the_field(fresh_ledger: MemoryLedger, bad: Any, field: str) -> None:
    from ledger.errors import BadInput

    seed(fresh_ledger)
    head = fresh_ledger.head()
    with pytest.raises(BadInput) as exc:
        fresh_ledger.profile("u1", allow_sensitive=bad)
    assert exc.value.field == field and exc.value.fix
    with pytest.raises(BadInput) as exc:
        fresh_ledger.history("u1", allow_sensitive=["health"], purpose="   ")
    assert exc.value.field == "purpose"
    assert fresh_ledger.head() == head  # nothing read, nothing recorded


# -- the CLI -------------------------------------------------------------------------------------------------------
def test_cli_reads_withhold_unless_asked(cli: Any, store_args: dict[str, Any]) -> None:
    cli.json("assert", "u1", "health.condition", SECRET, "--text", f"I am {SECRET}", "--sensitivity", "health")
    for argv in (["profile", "u1"], ["history", "u1"], ["believed", "u1", "--as-of", LATER], ["audit", "u1"],
                 ["true-at", "u1", "--valid-at", LATER], ["due", "u1", "--now", LATER],
                 ["diff", "u1", "--from", "2000-01-01T00:00:00Z", "--to", LATER]):
        code, out, err = cli(*argv, "--json")
        assert code == 0 and SECRET not in out and '"withheld": "health"' in out, (argv, err)
        code, out, _ = cli(*argv)  # the table says so in words
        assert code == 0 and SECRET not in out and "withheld (health)" in out, argv
    prof = cli.json("profile", "u1", "--allow-sensitive", "health", "--purpose", "care")
    assert prof["facts"]["health.condition"]["value"] == SECRET
    code, _, err = cli("history", "u1", "--allow-sensitive", "Health!")
    assert code == 2 and "--allow-sensitive" in err and "Traceback" not in err
    code, _, err = cli("profile", "u1", "--allow-sensitive", "health", "--purpose", "")
    assert code == 2 and "--purpose" in err
    with MemoryLedger(**store_args) as ml:
        assert disclosed(ml) == [("health.condition", 1, "health", "care")]
    # --allow-sensitive given twice: both labels count, neither replaces the other
    cli.json("assert", "u1", "finance.salary", "5000", "--sensitivity", "finance")
    for argv in (["profile", "u1"], ["context", "u1"], ["search", "u1", "salary"]):
        code, out, err = cli(*argv, "--allow-sensitive", "health", "--allow-sensitive", "finance", "--purpose", "both")
        assert code == 0 and "5000" in out and (argv[0] == "search" or SECRET in out), (argv, err)


# -- HTTP and MCP, in process ----------------------------------------------------------------------------------------
BASE = "http://127.0.0.1:8000"  # the MCP endpoint checks the Host header against 127.0.0.1:*


@pytest.fixture
def served(fresh_ledger: MemoryLedger) -> Any:
    seed(fresh_ledger)
    keys = APIKeyStore(fresh_ledger)
    secrets = {"plain": keys.create(["u1"]).secret,
               "health": keys.create(["u1"], allow_sensitive=["health"]).secret,
               "admin": keys.create([], admin=True).secret,
               "planner": keys.create([], agent="planner").secret}  # the agent's own memories, no label
    # an app per use: the MCP session manager inside runs one lifespan only
    return fresh_ledger, lambda: create_app(Service(fresh_ledger)), secrets


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


GATED_GETS = ["/v1/users/u1/profile", "/v1/users/u1/history", "/v1/users/u1/history/health.condition",
              f"/v1/users/u1/believed?as_of={LATER}", f"/v1/users/u1/true-at?valid_at={LATER}",
              f"/v1/users/u1/diff?from=2000-01-01T00:00:00Z&to={LATER}", "/v1/users/u1/audit",
              "/v1/users/u1/export"]


@pytest.mark.parametrize("path", GATED_GETS)
def test_http_reads_need_the_request_and_the_key(served: Any, path: str) -> None:
    ml, new_app, keys = served
    ask = ("&" if "?" in path else "?") + "allow_sensitive=health&purpose=triage"
    with TestClient(new_app(), base_url=BASE) as http:
        for who in ("plain", "health"):  # not asked for: withheld, whatever the key holds
            r = http.get(path, headers=bearer(keys[who]))
            assert r.status_code == 200 and not secrets_in(r.text) and '"withheld":"health"' in r.text.replace(
                " ", "")
        assert disclosed(ml) == []
        r = http.get(path + ask, headers=bearer(keys["plain"]))  # asked for, the key lacks it: 403, as search
        assert r.status_code == 403 and r.json()["field"] == "allow_sensitive"
        assert "granted the label health" in r.json()["fix"] and "--" not in r.json()["fix"]  # no CLI flag
        r = http.get(path + "&allow_sensitive=Bad!" if "?" in path else path + "?allow_sensitive=Bad!",
                     headers=bearer(keys["health"]))
        assert r.status_code == 422 and r.headers["content-type"].startswith("application/problem+json")
        assert r.json()["field"] == "allow_sensitive"
        r = http.get(path + ask, headers=bearer(keys["health"]))
        assert r.status_code == 200 and SECRET in r.text
    assert ("health.condition", 1, "health", "triage") in disclosed(ml)


def test_http_export_is_complete_for_an_admin_key(served: Any) -> None:
    ml, new_app, keys = served
    with TestClient(new_app(), base_url=BASE) as http:
        r = http.get("/v1/users/u1/export", headers=bearer(keys["admin"]))
    assert r.status_code == 200 and r.json()["profile"]["facts"]["health.condition"]["value"] == SECRET
    purposes = {p for *_, p in disclosed(ml)}
    assert len(purposes) == 1 and re.fullmatch(r"export by admin key \S+", purposes.pop())


def _mcp(app: Any, secret: str, body: Any) -> Any:
    """Run ``body(client, http)`` against ``app``'s MCP endpoint and routes in this process (lifespan included)."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def run() -> Any:
        async with app.router.lifespan_context(app):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE,
                                         headers=bearer(secret), timeout=60) as http:
                async with Client(streamable_http_client(f"{BASE}/mcp", http_client=http)) as client:
                    return await body(client, http)

    return asyncio.run(asyncio.wait_for(run(), 120))


def test_mcp_tools_need_the_argument_and_the_key(served: Any) -> None:
    ml, new_app, keys = served

    async def plain(c: Any, _http: Any) -> None:
        r = await c.call_tool("profile", {})
        assert r.structured_content["facts"]["health.condition"]["withheld"] == "health"
        assert not secrets_in(json.dumps(r.structured_content))
        r = await c.call_tool("history", {"key": "health.condition", "allow_sensitive": ["health"]})
        assert r.is_error and "allow_sensitive" in r.content[0].text and "granted the label health" in \
            r.content[0].text and "--allow-sensitive" not in r.content[0].text
        r = await c.call_tool("audit", {"allow_sensitive": ["Bad!"]})
        assert r.is_error and "allow_sensitive: 'Bad!' is not a label" in r.content[0].text

    async def health(c: Any, _http: Any) -> None:
        r = await c.call_tool("believed", {"as_of": LATER})
        assert r.structured_content["facts"]["health.condition"]["value"] is None
        r = await c.call_tool("believed", {"as_of": LATER, "allow_sensitive": ["health"], "purpose": "mcp"})
        assert r.structured_content["facts"]["health.condition"]["value"] == SECRET
        res = await c.read_resource("memledger://users/u1/profile")
        assert not secrets_in(res.contents[0].text) and '"withheld": "health"' in res.contents[0].text

    _mcp(new_app(), keys["plain"], plain)
    _mcp(new_app(), keys["health"], health)
    assert ("health.condition", 1, "health", "mcp") in disclosed(ml)
    assert {d[3] for d in disclosed(ml)} == {"mcp"}


def test_the_ui_page_needs_the_address_to_ask_and_the_key_to_hold(served: Any) -> None:
    ml, new_app, keys = served
    for who, query, status in (("plain", "", 200), ("plain", "?allow_sensitive=health", 403),
                               ("health", "", 200), ("health", "?allow_sensitive=Bad!", 422),
                               ("health", "?allow_sensitive=health&purpose=review", 200)):
        with TestClient(new_app(), base_url=BASE, follow_redirects=False) as c:
            r = c.post("/ui/login", content=f"key={keys[who]}&next=/ui/users/u1",
                       headers={"content-type": "application/x-www-form-urlencoded"})
            assert r.status_code == 303, r.text
            r = c.get(f"/ui/users/u1{query}")
        assert r.status_code == status, (who, query, r.text[:300])
        assert bool(secrets_in(r.text)) == query.endswith("review"), (who, query)
    assert disclosed(ml)[-1][3] == "review"


def test_langgraph_store_gets_and_searches_withheld_unless_allowed(fresh_ledger: MemoryLedger) -> None:
    pytest.importorskip("langgraph.store.base")
    from memledger.integrations.langgraph import MemledgerStore, ledger_key

    fresh_ledger.record([{"user_id": "u1", "key": ledger_key(("notes",), "dx"), "value": {"dx": SECRET},
                          "text": SECRET, "sensitivity": "health"},
                         {"user_id": "u1", "key": ledger_key(("notes",), "tea"), "value": {"drink": "tea"}}])
    store = MemledgerStore(fresh_ledger)
    assert store.get(("u1", "notes"), "dx").value == {"withheld": "health"}
    found = {it.key: it.value for it in store.search(("u1", "notes"))}
    assert found == {"dx": {"withheld": "health"}, "tea": {"drink": "tea"}}
    assert store.search(("u1",), filter={"dx": SECRET}) == []  # a filter sees only what is returned
    assert disclosed(fresh_ledger) == []
    allowed = MemledgerStore(fresh_ledger, allow_sensitive=["health"], purpose="agent memory")
    assert allowed.get(("u1", "notes"), "dx").value == {"dx": SECRET}
    assert allowed.get(("u1", "notes"), "tea").value == {"drink": "tea"}  # unlabelled: nothing recorded
    assert disclosed(fresh_ledger) == [(ledger_key(("notes",), "dx"), 1, "health", "agent memory")]


# -- the guard: every read route and tool ------------------------------------------------------------------------------
#: routes that are not reads (method, path template) -> why their answer holds no stored fact value
HTTP_WRITES = {
    ("POST", "/v1/users/{user_id}/memories"): "remember: its receipt lists related memories with labelled ones "
                                              "withheld (memledger.sensitivity.withhold_related)",
    ("POST", "/v1/users/{user_id}/facts/{key}"): "assert: a receipt (ids, version, position)",
    ("POST", "/v1/users/{user_id}/facts/{key}/corrections"): "correct: a receipt",
    ("POST", "/v1/users/{user_id}/facts/{key}/retractions"): "retract: a receipt",
    ("POST", "/v1/users/{user_id}/facts/{key}/unlinks"): "unlink: a remember receipt, related memories withheld",
    ("POST", "/v1/commands"): "batch of fact commands: receipts",
    ("DELETE", "/v1/users/{user_id}"): "erase: the erasure receipt (counts)",
    ("POST", "/v1/users/{user_id}/sessions/{session_id}"): "session start: a session receipt",
    ("POST", "/v1/users/{user_id}/sessions/{session_id}/messages"): "log a message: a session receipt",
    ("POST", "/v1/users/{user_id}/sessions/{session_id}/card"): "state card patch: a session receipt",
    ("POST", "/v1/users/{user_id}/sessions/{session_id}/summaries"): "summary: a session receipt",
    ("POST", "/v1/users/{user_id}/sessions/{session_id}/end"): "end session: a session receipt",
    ("POST", "/v1/users/{user_id}/relations"): "relate: a relation receipt (what the caller sent, ids, version)",
    ("POST", "/v1/users/{user_id}/relations/corrections"): "correct_relation: a relation receipt (what the caller "
                                                           "sent, ids, version)",
    ("POST", "/v1/users/{user_id}/relations/retractions"): "unrelate: a relation receipt (the entity as the caller "
                                                           "named it, else its id)",
    ("POST", "/v1/users/{user_id}/identity-links"): "identity_link: the two ids the caller sent, a status, receipts",
    ("POST", "/v1/users/{user_id}/identity-links/removals"): "identity_unlink: the two ids the caller sent, receipts",
    ("POST", "/v1/agents/{agent_id}/memories"): "remember as the agent's own: as the user route",
    ("POST", "/v1/agents/{agent_id}/facts/{key}"): "assert as the agent's own: a receipt, as the user route",
    ("POST", "/v1/agents/{agent_id}/facts/{key}/corrections"): "correct the agent's own: a receipt",
    ("POST", "/v1/agents/{agent_id}/facts/{key}/retractions"): "retract the agent's own: a receipt",
    ("DELETE", "/v1/agents/{agent_id}"): "erase the agent's own memories: the erasure receipt (counts)",
}
#: reads sent as POST (their query in the body): called like the GETs
HTTP_POST_READS = {"/v1/users/{user_id}/search", "/v1/users/{user_id}/context", "/v1/agents/{agent_id}/search"}
#: MCP tools that are not reads -> why their answer holds no stored fact value
MCP_WRITES = {
    "remember": "a remember receipt; related labelled memories withheld",
    "correct": "a receipt", "retract": "a receipt", "unlink": "a remember receipt; related memories withheld",
    "log_message": "a session receipt", "update_card": "a session receipt",
    "end_session": "a session receipt; closed memories by key and version",
    "erase": "an erasure receipt (counts)", "forget": "a forget receipt (counts)",
    "relate": "a relation receipt (what the caller sent, ids, version)",
    "correct_relation": "a relation receipt (what the caller sent, ids, version)",
    "unrelate": "a relation receipt (the entity as the caller named it, else its id)",
    "identity_link": "the two ids the caller sent, a status, receipts",
}
#: a value for each parameter a read may require, by name (a new required parameter must be added here)
SAMPLE = {"user_id": "u1", "agent_id": "planner", "key": "health.condition", "session_id": "s1", "as_of": LATER, "valid_at": LATER,
          "from": "2000-01-01T00:00:00Z", "to": LATER, "from_as_of": "2000-01-01T00:00:00Z", "to_as_of": LATER,
          "query": f"diagnosis {SECRET} {SECRET_WORD}", "now": LATER}


def _fill(template: str) -> str:
    return re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: SAMPLE[m.group(1)], template)


def test_no_read_route_tool_or_resource_shows_a_labelled_value_to_a_key_lacking_the_label(served: Any) -> None:
    ml, new_app, keys = served
    ml.log_message("u1", "s1", role="user", message_id="m1", text="hello there")
    # an agent's own labelled memory: its routes take the key limited to that agent, here one without the label (an
    # admin key's export is complete, the right of access, as a user's is)
    ml.assert_fact(key="health.condition", value=SECRET, text=f"I am {SECRET}", sensitivity="health",
                   agent_id="planner")
    feed_events = len(ml.history("u1"))
    answers: dict[str, str] = {}

    async def everything(c: Any, http: Any) -> None:
        spec = (await http.get("/openapi.json")).json()
        for template, methods in spec["paths"].items():
            for method, op in methods.items():
                method = method.upper()
                if (method, template) in HTTP_WRITES:
                    continue
                assert method == "GET" or template in HTTP_POST_READS, (
                    f"{method} {template} is neither called as a read nor listed in HTTP_WRITES with a reason")
                params = {p["name"]: SAMPLE[p["name"]] for p in op.get("parameters", [])
                          if p.get("in") == "query" and p.get("required")}
                if template.endswith("/changes"):
                    params.update(after=0, limit=feed_events)  # the feed ends after that many events
                body = None
                if "requestBody" in op:
                    ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"].split("/")[-1]
                    body = {n: SAMPLE[n] for n in spec["components"]["schemas"][ref].get("required", [])}
                who = keys["planner"] if template.startswith("/v1/agents/") else keys["plain"]
                r = await http.request(method, _fill(template), params=params, json=body, headers=bearer(who))
                assert r.status_code == 200, (method, template, r.status_code, r.text[:300])
                answers[f"{method} {template}"] = r.text
        tools = (await c.list_tools()).tools
        assert {"profile", "history", "believed", "true_at", "diff", "audit", "recall", "context",
                "resume"} <= {t.name for t in tools}
        for t in tools:
            if t.name in MCP_WRITES:
                continue
            args = {n: SAMPLE[n] for n in t.input_schema.get("required", [])}
            r = await c.call_tool(t.name, args)
            assert not r.is_error, (t.name, r.content[0].text if r.content else "")
            answers[f"tool {t.name}"] = json.dumps(r.structured_content) + "".join(
                getattr(x, "text", "") for x in r.content)
        templates = (await c.list_resource_templates()).resource_templates
        statics = (await c.list_resources()).resources
        assert len(templates) >= 3
        for uri in [_fill(t.uri_template) for t in templates] + [str(s.uri) for s in statics]:
            res = await c.read_resource(uri)
            answers[f"resource {uri}"] = "".join(getattr(x, "text", "") for x in res.contents)

    _mcp(new_app(), keys["plain"], everything)
    assert len([a for a in answers if a.startswith("GET ")]) >= 15  # the read routes were found and called
    leaks = {name: secrets_in(text) for name, text in answers.items() if secrets_in(text)}
    assert leaks == {}
    assert '"withheld":"health"' in answers["GET /v1/users/{user_id}/profile"].replace(" ", "")
    assert '"withheld":"health"' in answers["GET /v1/agents/{agent_id}/profile"].replace(" ", "")
    # the labelled value is there to be found: the same key with the label, asking, sees it
    with TestClient(new_app(), base_url=BASE) as http:
        r = http.get("/v1/users/u1/profile?allow_sensitive=health&purpose=check", headers=bearer(keys["health"]))
        assert SECRET in r.text
    assert {p for *_, p in disclosed(ml)} == {"check"}  # the sweep itself disclosed nothing


def test_export_refuses_an_empty_purpose_for_any_key(served: Any) -> None:
    ml, new_app, keys = served
    with TestClient(new_app(), base_url=BASE) as http:
        for who in ("health", "admin"):
            r = http.get("/v1/users/u1/export?allow_sensitive=health&purpose=", headers=bearer(keys[who]))
            assert r.status_code == 422 and r.json()["field"] == "purpose", (who, r.text)
    assert disclosed(ml) == []


def test_the_timeline_withholds_a_labelled_versions_reason(fresh_ledger: MemoryLedger) -> None:
    """A correction's or a retraction's reason can say the value ("type 1, not type 2"): it goes with the value."""
    from memledger.ui.model import user_view

    ml = fresh_ledger
    ml.assert_fact("u1", "health.condition", "diabetes", text="I have diabetes", sensitivity="health")
    ml.correct_fact("u1", "health.condition", "type 1 diabetes", reason=f"she said {SECRET}, not type 2")
    page = json.dumps(user_view(ml, "u1"), default=str)
    assert SECRET not in page and "type 2" not in page and '"withheld": "health"' in page
    shown = json.dumps(user_view(ml, "u1", allow_sensitive={"health"}), default=str)
    assert "type 2" in shown
