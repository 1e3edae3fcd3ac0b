"""Every field of a verb's request model (memledger/requests/) is reachable from every face: the Python verb's
signature, the CLI command's options, the MCP tool's input schema and the HTTP route's OpenAPI body. A field a face
does not take is on the short list below, with the reason. A refusal is worded once, by the request, and each face
names the field its own way."""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any

import pytest
import typer
from fastapi.testclient import TestClient

from ledger.errors import BadInput
from memledger import MemoryLedger
from memledger.cli import app as cli_app
from memledger.cli.common import REQUEST_FIELDS, request_names
from memledger.requests import ContextRequest, Names, RememberRequest, RequestError, SearchRequest
from memledger.servers.http import create_app
from memledger.servers.keys import APIKeyStore
from memledger.servers.mcp import build_mcp
from memledger.servers.ops import Service

#: verb -> (request model, Python method, CLI command, MCP tool, HTTP path taking the body)
FACES = {"search": (SearchRequest, "search", "search", "recall", "/v1/users/{user_id}/search"),
         "context": (ContextRequest, "context", "context", "context", "/v1/users/{user_id}/context"),
         "remember": (RememberRequest, "remember", "remember", "remember", "/v1/users/{user_id}/memories")}
#: request fields a face does not take, and why
NOT_ON = {
    # a server bounds how long a read may wait; only the processes of the Python API and the CLI choose it
    "mcp": {"timeout"},
    "http": {"timeout"},
}
#: request fields the HTTP path, not the body, carries
IN_PATH = {"user_id"}


def cli_fields(command: str) -> set[str]:
    cmd = typer.main.get_command(cli_app).commands[command]  # type: ignore[attr-defined]
    return {REQUEST_FIELDS.get(p.name, p.name) for p in cmd.params}


def http_body(spec: dict[str, Any], path: str) -> dict[str, Any]:
    ref = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    return spec["components"]["schemas"][ref.split("/")[-1]]["properties"]


@pytest.fixture(scope="module")
def faces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    ml = MemoryLedger(home=tmp_path_factory.mktemp("faces"), embedder="hash", cjk_embedder="none")
    service = Service(ml)
    with TestClient(create_app(service)) as http:
        spec = http.get("/openapi.json").json()

    async def tools() -> dict[str, dict[str, Any]]:
        from mcp import Client

        async with Client(build_mcp(service)) as c:
            return {t.name: t.input_schema["properties"] for t in (await c.list_tools()).tools}

    out = {"spec": spec, "tools": asyncio.run(tools())}
    ml.close()
    return out


@pytest.mark.parametrize("verb", sorted(FACES))
def test_every_face_reaches_every_field_of_the_request(faces: dict[str, Any], verb: str) -> None:
    request, method, command, tool, path = FACES[verb]
    fields = set(request.model_fields)
    python = set(inspect.signature(getattr(MemoryLedger, method)).parameters) - {"self"}
    assert python == fields, f"MemoryLedger.{method} and {request.__name__} differ"
    # the Python verb's keywords are the request's fields, in the request's order
    assert [p for p in inspect.signature(getattr(MemoryLedger, method)).parameters if p != "self"] == list(
        request.model_fields)
    assert fields - cli_fields(command) == set(), f"memledger {command} lacks options"
    assert fields - NOT_ON["mcp"] - set(faces["tools"][tool]) == set(), f"MCP tool {tool} lacks arguments"
    body = http_body(faces["spec"], path)
    assert fields - NOT_ON["http"] - IN_PATH - set(body) == set(), f"POST {path} lacks fields"
    # nothing on a face that the request does not know (a field exists in one place)
    assert set(faces["tools"][tool]) - fields == set() and set(body) - fields == set()
    # the faces describe each field as the request does
    for name in set(body) & fields:
        assert request.model_fields[name].description in body[name]["description"], name
        assert request.model_fields[name].description in faces["tools"][tool][name]["description"], name


def test_the_get_forms_carry_every_option_a_query_string_can_hold(faces: dict[str, Any]) -> None:
    # half_lives is a mapping, which a query string cannot hold: POST only
    for verb, mapping_only in (("search", {"half_lives"}), ("context", set())):
        request, path = FACES[verb][0], FACES[verb][4]
        params = {p["name"] for p in faces["spec"]["paths"][path]["get"].get("parameters", [])}
        assert set(request.model_fields) - NOT_ON["http"] - mapping_only - params == set(), f"GET {path}"


def test_the_openapi_search_and_context_bodies_carry_min_confidence(faces: dict[str, Any]) -> None:
    for verb in ("search", "context"):
        prop = http_body(faces["spec"], FACES[verb][4])["min_confidence"]
        bounds = [(x.get("minimum"), x.get("maximum")) for x in prop.get("anyOf", [prop]) if x.get("type") == "number"]
        assert bounds == [(0, 1)], (verb, prop)


def test_a_request_is_checked_once_when_it_is_built() -> None:
    r = SearchRequest(user_id="u1", query="tea", also=["u2", "u1", "u2"], exclude_source="agent_inference",
                      as_of="2024-01-01T09:00:00+08:00", allow_sensitive="health,finance")
    assert (r.also, r.exclude_source, r.as_of.isoformat(), r.allow_sensitive) == (
        ("u2",), ("agent_inference",), "2024-01-01T01:00:00+00:00", frozenset({"health", "finance"}))
    with pytest.raises(BadInput) as e:
        SearchRequest(user_id="u1", query="tea", within="messages", as_of="2024-01-01T00:00:00Z")
    assert isinstance(e.value, RequestError) and (e.value.field, str(e.value)) == (
        "within", "within: messages cannot be searched as of an instant (only facts have a belief history) "
                  "(drop as_of, or search facts only)")
    with pytest.raises(RequestError) as e:
        ContextRequest(user_id="u1", axis="observed")
    assert str(e.value) == "axis: is given without as_of (give as_of (the cut-off it applies to), or leave axis out)"
    with pytest.raises(RequestError) as e:
        SearchRequest(user_id="u1", query="tea", linked="yes")
    assert e.value.field == "linked" and "'yes'" in e.value.problem
    r = RememberRequest(user_id="u1", text="  I drink tea \n", observed_at="2024-01-01T09:00:00+08:00", confidence=1,
                        role="coach", about=" Anna ")
    assert (r.text, r.observed_at.isoformat(), r.source, r.confidence, r.role.role, r.about) == (
        "I drink tea", "2024-01-01T01:00:00+00:00", "user_statement", 1.0, "coach", "Anna")
    # the ledger's command is made from the checked fields: the statement's text and provenance, a placeholder key
    cmd = r.command()
    assert (cmd.op, cmd.key, cmd.value, cmd.text, cmd.observed_at, cmd.role.role, cmd.confidence) == (
        "assert", "memory.pending", "I drink tea", "I drink tea", r.observed_at, "coach", 1.0)
    for bad, field, problem in ((dict(text="\u200b"), "text", "is empty"),
                                (dict(confidence=True), "confidence", "True is not a number"),
                                (dict(session_id=" "), "session_id", "is empty"),
                                (dict(role={"role": "coach", "hat": "x"}), "role", "hat is not a known field"),
                                (dict(source="rumour"), "source", "'rumour' is not a source"),
                                (dict(key="not a key"), "key", "'not a key' is not a dotted key"),
                                (dict(about="user"), "about", "'user' is how relations name the user")):
        with pytest.raises(RequestError) as e:
            RememberRequest(**{"user_id": "u1", "text": "I drink tea", **bad})
        assert (e.value.field, e.value.problem) == (field, problem), bad


def test_each_face_names_the_field_its_own_way() -> None:
    with pytest.raises(RequestError) as e:
        SearchRequest(user_id="u1", query="tea", within="messages", role_filter="coach")
    search_cmd = typer.main.get_command(cli_app).commands["search"]  # type: ignore[attr-defined]
    cli = e.value.worded(request_names(search_cmd))
    assert (cli.field, cli.fix) == ("in", "drop --source / --role-filter, or search --in all")
    http = e.value.worded(Names("http"))
    assert (http.field, http.fix) == ("within", 'drop source / role_filter, or search within="all"')
    assert e.value.fix == "drop source / role_filter, or search within='all'"  # the Python API
    with pytest.raises(RequestError) as e:
        SearchRequest(user_id="u1", query="tea", k=0)
    assert e.value.worded(request_names(search_cmd)).fix == "e.g. -k 10" and e.value.fix == "e.g. k=10"
    with pytest.raises(RequestError) as e:
        RememberRequest(user_id="u1", text="I like tea", about="Anna", key="x.y")
    remember_cmd = typer.main.get_command(cli_app).commands["remember"]  # type: ignore[attr-defined]
    slots = "the statement lands in that person's slots"
    assert e.value.worded(request_names(remember_cmd)).fix == f"leave --key out: {slots}"
    assert e.value.worded(Names("mcp")).fix == e.value.fix == f"leave key out: {slots}"
    with pytest.raises(RequestError) as e:
        RememberRequest(user_id="u1", text="I like tea", role=["coach"])
    assert (e.value.worded(request_names(remember_cmd)).fix, e.value.worded(Names("http")).fix) == (
        "e.g. --role coach", 'e.g. role="coach"')


def test_the_faces_render_one_refusal(faces: dict[str, Any], fresh_ledger: MemoryLedger, cli: Any) -> None:
    admin = APIKeyStore(fresh_ledger).create([], admin=True).secret
    service = Service(fresh_ledger)
    with TestClient(create_app(service), headers={"Authorization": f"Bearer {admin}"}) as http:
        r = http.post("/v1/users/u1/search", json={"query": "tea", "within": "all", "as_of": "2024-01-01T00:00:00Z"})
        c = http.post("/v1/users/u1/context", json={"axis": "observed"})
        m = http.post("/v1/users/u1/memories", json={"text": "I like tea", "about": "Anna", "key": "x.y"})
    assert r.status_code == 422 and (r.json()["field"], r.json()["fix"]) == ("within", "drop as_of, or search facts only")
    assert m.status_code == 422 and (m.json()["field"], m.json()["problem"], m.json()["fix"]) == (
        "about", "is given with key", "leave key out: the statement lands in that person's slots")
    assert c.status_code == 422 and (c.json()["field"], c.json()["fix"]) == (
        "axis", "give as_of (the cut-off it applies to), or leave axis out")

    async def call() -> Any:
        from mcp import Client

        async with Client(build_mcp(service)) as m:
            return (await m.call_tool("recall", {"user_id": "u1", "query": "tea", "within": "all",
                                                 "as_of": "2024-01-01T00:00:00Z"}),
                    await m.call_tool("remember", {"user_id": "u1", "text": "I like tea", "about": "Anna",
                                                   "key": "x.y"}))

    got, said = asyncio.run(call())
    assert said.is_error and said.content[0].text.endswith(
        "about: is given with key (fix: leave key out: the statement lands in that person's slots)")
    assert got.is_error and got.content[0].text.endswith(
        "within: messages cannot be searched as of an instant (only facts have a belief history) "
        "(fix: drop as_of, or search facts only)")
    code, out, err = cli("search", "u1", "tea", "--in", "all", "--as-of", "2024-01-01T00:00:00Z", "--json")
    assert (code, out) == (2, "")
    assert json.loads(err.strip().splitlines()[-1])["error"] == {
        "field": "in", "problem": "messages cannot be searched as of an instant (only facts have a belief history)",
        "fix": "drop --as-of, or search facts only"}
    code, _, err = cli("context", "u1", "--axis", "observed")
    assert code == 2 and err.startswith("error: axis: is given without as_of (give --as-of (the cut-off it applies "
                                        "to), or leave --axis out)")
    code, _, err = cli("remember", "u1", "I like tea", "--about", "Anna", "--key", "x.y")
    assert code == 2 and err.startswith("error: about: is given with key (leave --key out: the statement lands in "
                                        "that person's slots)")
    code, _, err = cli("remember", "u1", "I like tea", "--role", " coach")
    assert code == 2 and err.startswith("error: role: ' coach' has spaces around it"), err
    assert fresh_ledger.history("u1") == []  # nothing written by any face
