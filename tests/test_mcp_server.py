"""The MCP server through real clients: ``memledger serve mcp`` as a stdio subprocess driven by the
``mcp`` client, raw JSON-RPC on its stdout (protocol only), two stdio servers writing one SQLite home at once, and
``serve mcp --transport http`` on 127.0.0.1 with API keys."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError, StdioServerParameters

from memledger import MemoryLedger
from tests.serve_util import ROOT, Server, create_key, env

TOOLS = {"remember", "recall", "profile", "history", "believed", "true_at", "diff", "audit", "correct", "retract",
         "context", "resume", "log_message", "update_card"}


MINIMAL_ARGS: dict[str, dict[str, Any]] = {
    "remember": {"text": "I like chess"}, "recall": {"query": "tea"}, "profile": {}, "history": {},
    "believed": {"as_of": "2030-01-01T00:00:00Z"}, "true_at": {"valid_at": "2024-06-01T00:00:00Z"},
    "diff": {"from_as_of": "2000-01-01T00:00:00Z", "to_as_of": "2100-01-01T00:00:00Z"}, "audit": {},
    "correct": {"key": "preference.drink", "value": "x"}, "retract": {"key": "preference.drink"},
    "context": {}, "resume": {}, "log_message": {"session_id": "s", "role": "user", "message_id": "m", "text": "t"},
    "update_card": {"session_id": "s", "task": "t"},
}


async def assert_every_tool_refuses(c: Client, user_id: str, words: str) -> None:
    for name in sorted(TOOLS):
        r = await c.call_tool(name, {**MINIMAL_ARGS[name], "user_id": user_id})
        assert r.is_error and words in r.content[0].text, (name, r.content[0].text)


def stdio(home: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "memledger", "--home", str(home), "serve", "mcp",
                                                               *extra], env=env(), cwd=str(ROOT))


def seed(home: Path) -> None:
    with MemoryLedger(home=home) as ml:
        ml.assert_fact("u1", "preference.drink", "tea", text="I drink green tea every morning",
                       observed_at="2024-01-01T09:00:00+00:00")
        ml.assert_fact("u1", "profile.city", "Lyon", text="I live in Lyon", observed_at="2024-01-02T09:00:00+00:00")
        ml.assert_fact("u1", "health.allergy", "peanuts", text="I am allergic to peanuts", sensitivity="health",
                       observed_at="2024-01-03T09:00:00+00:00")
        ml.assert_fact("u2", "preference.drink", "water", text="I only drink water")


def call(client: Client, name: str, args: dict[str, Any]) -> Any:
    return client.call_tool(name, args)


def test_stdio_tools_end_to_end(tmp_path: Path) -> None:
    home = tmp_path / "h"
    seed(home)

    async def run() -> None:
        async with Client(stdio(home)) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert TOOLS <= set(tools) and "erase" not in tools and "forget" not in tools
            for name in TOOLS:
                assert tools[name].output_schema is not None and tools[name].input_schema["type"] == "object"
                assert "user_id" in tools[name].input_schema["properties"]
            assert "current" in tools["recall"].description.lower()
            assert "system time" in tools["believed"].description
            assert "decides" in tools["remember"].description

            r = await c.call_tool("recall", {"user_id": "u1", "query": "green tea"})
            assert not r.is_error
            hits = r.structured_content["hits"]
            assert hits[0]["key"] == "preference.drink" and hits[0]["value"] == "tea"
            assert all(h["key"] != "health.allergy" for h in hits)  # labelled: left out unless allowed
            r = await c.call_tool("recall", {"user_id": "u1", "query": "allergic peanuts",
                                             "allow_sensitive": ["health"],
                                             "purpose": "meal planning"})
            assert "health.allergy" in [h["key"] for h in r.structured_content["hits"]]

            r = await c.call_tool("profile", {"user_id": "u1"})
            assert r.structured_content["facts"]["profile.city"]["value"] == "Lyon"
            r = await c.call_tool("correct", {"user_id": "u1", "key": "profile.city", "value": "Paris",
                                              "reason": "misheard"})
            assert not r.is_error and r.structured_content["kind"] == "corrected"
            pos = r.structured_content["position"]
            r = await c.call_tool("history", {"user_id": "u1", "key": "profile.city", "after": pos})
            assert [row["value"] for row in r.structured_content["rows"]] == ["Lyon", "Paris"]
            r = await c.call_tool("believed", {"user_id": "u1", "as_of": "2030-01-01T00:00:00Z",
                                               "valid_at": "2024-06-01T00:00:00Z"})
            assert r.structured_content["facts"]["profile.city"]["value"] == "Paris"
            r = await c.call_tool("true_at", {"user_id": "u1", "valid_at": "2024-01-01T12:00:00Z"})
            assert set(r.structured_content["facts"]) == {"preference.drink"}
            r = await c.call_tool("diff", {"user_id": "u1", "from_as_of": "2000-01-01T00:00:00Z",
                                           "to_as_of": "2100-01-01T00:00:00Z"})
            assert "profile.city" in r.structured_content["added"]
            r = await c.call_tool("diff", {"user_id": "u1", "from_as_of": "2100-01-01T00:00:00Z",
                                           "to_as_of": "2000-01-01T00:00:00Z"})
            assert r.is_error and "swap the two instants" in r.content[0].text and "--" not in r.content[0].text
            r = await c.call_tool("audit", {"user_id": "u1", "key": "profile.city"})
            chain = r.structured_content["facts"]["profile.city"]["chain"]
            assert [e["kind"] for e in chain] == ["asserted", "corrected"] and chain[1]["reason"] == "misheard"
            r = await c.call_tool("retract", {"user_id": "u1", "key": "profile.city", "reason": "forget that"})
            assert r.structured_content["kind"] == "retracted"
            r = await c.call_tool("log_message", {"user_id": "u1", "session_id": "s1", "role": "user",
                                                  "message_id": "m1", "text": "plan my trip to Rome"})
            assert r.structured_content["event"] == "MessageLogged"
            r = await c.call_tool("update_card", {"user_id": "u1", "session_id": "s1", "task": "trip",
                                                  "add_questions": ["which dates?"]})
            assert not r.is_error
            r = await c.call_tool("resume", {"user_id": "u1", "now": "2030-01-01T00:00:00Z"})
            assert r.structured_content["found"] and r.structured_content["open_questions"] == ["which dates?"]
            r = await c.call_tool("context", {"user_id": "u1", "query": "drink", "budget": 500})
            assert "tea" in r.structured_content["text"] and "peanuts" not in r.structured_content["text"]

            # refusals are tool errors naming field, problem and fix; nothing inside a successful result
            r = await c.call_tool("believed", {"user_id": "u1", "as_of": "2024-01-01T00:00:00"})
            assert r.is_error and "as_of" in r.content[0].text and "offset" in r.content[0].text
            r = await c.call_tool("retract", {"user_id": "u1", "key": "nothing.here"})
            assert r.is_error and "key" in r.content[0].text and "fix:" in r.content[0].text
            r = await c.call_tool("profile", {})
            assert r.is_error and "user_id: missing" in r.content[0].text
            r = await c.call_tool("recall", {"user_id": "u1", "query": "x", "k": 0})
            assert r.is_error and "k" in r.content[0].text

            # resources
            res = await c.read_resource("memledger://users/u1/profile")
            assert json.loads(res.contents[0].text)["facts"]["preference.drink"]["value"] == "tea"
            res = await c.read_resource("memledger://users/u1/history/profile.city")
            assert [row["kind"] for row in json.loads(res.contents[0].text)] == ["asserted", "corrected", "retracted"]
            res = await c.read_resource("memledger://users/u1/context")
            assert "tea" in res.contents[0].text

    asyncio.run(asyncio.wait_for(run(), 120))


def test_stdio_pinned_user_and_destructive(tmp_path: Path) -> None:
    home = tmp_path / "h"
    seed(home)
    with MemoryLedger(home=home) as ml:
        ml.assert_fact("u1", "note.errand", "buy stamps", text="buy stamps", run_id="r1")

    async def run() -> None:
        async with Client(stdio(home, "--user", "u1", "--allow-destructive")) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert tools["erase"].annotations.destructive_hint is True
            assert tools["recall"].annotations.read_only_hint is True
            r = await c.call_tool("profile", {})  # omitted user_id = the pinned user
            assert set(r.structured_content["facts"]) >= {"preference.drink", "profile.city"}
            r = await c.call_tool("profile", {"user_id": "u2"})
            assert r.is_error and "pinned" in r.content[0].text
            await assert_every_tool_refuses(c, "u2", "pinned")
            r = await c.call_tool("recall", {"user_id": "u2", "query": "water"})
            assert r.is_error
            with pytest.raises(MCPError) as refused:
                await c.read_resource("memledger://users/u2/profile")
            assert refused.value.code == -32602 and "pinned" in refused.value.message  # the caller's, not internal
            # forget: the key named twice; one version alone, then the history keeps the placeholder
            assert tools["forget"].annotations.destructive_hint is True
            assert set(tools["forget"].input_schema["properties"]) >= {"key", "version", "confirm"}
            r = await c.call_tool("forget", {"key": "profile.city", "confirm": "preference.drink"})
            assert r.is_error and "confirm" in r.content[0].text
            r = await c.call_tool("forget", {"key": "profile.city", "version": 1, "confirm": "profile.city"})
            assert not r.is_error, r.content[0].text
            assert (r.structured_content["versions"], r.structured_content["actor"]) == ([1], "mcp")
            r = await c.call_tool("forget", {"key": "profile.city", "version": 1, "confirm": "profile.city"})
            assert r.is_error and "already forgotten" in r.content[0].text
            # forget_scope: the scope named twice; what run r1 wrote is shredded, nothing else
            assert tools["forget_scope"].annotations.destructive_hint is True
            r = await c.call_tool("forget_scope", {"run_id": "r1", "confirm": "r2"})
            assert r.is_error and "confirm" in r.content[0].text
            r = await c.call_tool("forget_scope", {"run_id": "r1", "confirm": "r1"})
            assert not r.is_error, r.content[0].text
            assert ([f["key"] for f in r.structured_content["forgotten"]], r.structured_content["run_id"]) == (
                ["note.errand"], "r1")
            r = await c.call_tool("erase", {"confirm": "u2"})
            assert r.is_error and "confirm" in r.content[0].text
            r = await c.call_tool("erase", {"confirm": "u1"})
            assert not r.is_error and r.structured_content["user_id"] == "u1"

    asyncio.run(asyncio.wait_for(run(), 120))
    with MemoryLedger(home=home) as ml:
        assert ml.profile("u2").facts["preference.drink"].value == "water"
        assert ml.keystore.is_destroyed("u1")


def raw_stdio(home: Path, lines: list[str], replies: int) -> tuple[list[dict[str, Any]], str]:
    """Send ``lines`` to ``memledger serve mcp`` over its raw pipes; returns the first ``replies`` stdout lines as
    JSON (a non-JSON line fails here) and whatever stdout holds after stdin closed."""
    proc = subprocess.Popen([sys.executable, "-m", "memledger", "--home", str(home), "serve", "mcp"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(),
                            cwd=ROOT, text=True)
    try:
        proc.stdin.write("".join(line + "\n" for line in lines))
        proc.stdin.flush()
        out = [json.loads(proc.stdout.readline()) for _ in range(replies)]
        proc.stdin.close()
        rest = proc.stdout.read()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    return out, rest


def test_stdio_stdout_carries_only_protocol(tmp_path: Path) -> None:
    """Raw JSON-RPC over the subprocess's pipes: every stdout line is a JSON-RPC message (logs go to stderr)."""
    home = tmp_path / "h"
    seed(home)
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "recall", "arguments": {
            "user_id": "u1", "query": "tea"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "profile", "arguments": {
            "user_id": "u1", "after": 999}}},
    ]
    out, rest = raw_stdio(home, [json.dumps(m) for m in msgs], replies=sum("id" in m for m in msgs))
    for line in rest.splitlines():
        assert json.loads(line)["jsonrpc"] == "2.0"
    assert all(o["jsonrpc"] == "2.0" for o in out)
    assert out[1]["result"]["structuredContent"]["hits"][0]["key"] == "preference.drink"
    assert out[2]["result"]["isError"] is True and "after" in out[2]["result"]["content"][0]["text"]


def test_stdio_answers_every_unreadable_line(tmp_path: Path) -> None:
    """A line the SDK cannot read gets a JSON-RPC error instead of silence (a client hung on a
    lone surrogate and on a non-JSON line); a notification is never answered; the server goes on serving."""
    home = tmp_path / "h"
    seed(home)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
    lines = [
        json.dumps(init),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"recall","arguments":'
        '{"user_id":"u1","query":"\\ud800"}}}',
        "this is not json",
        '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"x":"\\udc00"}}',
        '{"id": 8, "hello": 1}',
        json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "recall", "arguments": {
            "user_id": "u1", "query": "tea"}}}),
    ]
    out, rest = raw_stdio(home, lines, replies=5)  # hangs (and times out) if one is dropped
    assert rest == ""  # the notifications got no answer
    by_id = {o.get("id"): o for o in out[1:]}
    assert by_id[7]["error"]["code"] == -32602 and "surrogate" in by_id[7]["error"]["message"]
    assert by_id[None]["error"]["code"] == -32700
    assert by_id[8]["error"]["code"] == -32600
    assert by_id[9]["result"]["structuredContent"]["hits"][0]["key"] == "preference.drink"


def test_two_stdio_servers_write_one_home_at_once(tmp_path: Path) -> None:
    """mem0 #7196: two stdio servers on one SQLite home, writing and reading concurrently: no error, nothing lost."""
    home = tmp_path / "h"
    seed(home)
    n = 15

    async def worker(w: int) -> list[bool]:
        errors = []
        async with Client(stdio(home)) as c:
            for i in range(n):
                r = await c.call_tool("log_message", {"user_id": "u1", "session_id": f"s{w}", "role": "user",
                                                      "message_id": f"m{i}", "text": f"worker {w} message {i}"})
                errors.append(r.is_error)
                r = await c.call_tool("correct", {"user_id": "u1", "key": "preference.drink", "value": f"w{w}-{i}"})
                errors.append(r.is_error)  # both servers write the same fact's stream: optimistic concurrency
                r = await c.call_tool("profile", {"user_id": "u1"})
                errors.append(r.is_error)
        return errors

    async def run() -> list[list[bool]]:
        return await asyncio.gather(worker(0), worker(1))

    results = asyncio.run(asyncio.wait_for(run(), 180))
    assert not any(e for r in results for e in r)
    with MemoryLedger(home=home) as ml:
        for w in (0, 1):
            texts = [m["text"] for m in ml.messages("u1", f"s{w}")]
            assert texts == [f"worker {w} message {i}" for i in range(n)]
        rows = ml.history("u1", "preference.drink")
        assert sorted(r.value for r in rows[1:]) == sorted(f"w{w}-{i}" for w in (0, 1) for i in range(n))
        assert [r.version for r in rows] == list(range(1, 2 + 2 * n))


def test_mcp_over_http_with_keys(tmp_path: Path) -> None:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    home = tmp_path / "h"
    seed(home)
    k1 = create_key(home, "--user", "u1")
    k2 = create_key(home, "--user", "u2")
    k12 = create_key(home, "--user", "u1", "--user", "u2", "--allow-sensitive", "health")
    server = Server(home, "mcp", "--transport", "http")
    try:
        server.wait_ready("/mcp", expect=(401,))
        url = server.base + "/mcp"

        def client(key: str | None) -> Client:
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            return Client(streamable_http_client(url, http_client=create_mcp_http_client(headers=headers)))

        async def run() -> None:
            async with client(k1) as c:
                r = await c.call_tool("profile", {})  # the key's one user
                assert r.structured_content["user_id"] == "u1"
                r = await c.call_tool("recall", {"user_id": "u1", "query": "tea"})
                assert r.structured_content["hits"][0]["value"] == "tea"
                r = await c.call_tool("profile", {"user_id": "u2"})
                assert r.is_error and "does not hold user 'u2'" in r.content[0].text
                r = await c.call_tool("recall", {"user_id": "u1", "query": "peanuts", "allow_sensitive": ["health"]})
                assert r.is_error and "allow_sensitive" in r.content[0].text
                r = await c.call_tool("log_message", {"user_id": "u2", "session_id": "s", "role": "user",
                                                      "message_id": "x", "text": "intrusion"})
                assert r.is_error
            async with client(k2) as c:
                r = await c.call_tool("recall", {"user_id": "u1", "query": "tea"})
                assert r.is_error
                await assert_every_tool_refuses(c, "u1", "does not hold user 'u1'")
                r = await c.call_tool("profile", {})
                assert set(r.structured_content["facts"]) == {"preference.drink"}
            async with client(k12) as c:
                r = await c.call_tool("profile", {})
                assert r.is_error and "more than one user" in r.content[0].text
                r = await c.call_tool("recall", {"user_id": "u1", "query": "allergic peanuts",
                                                 "allow_sensitive": ["health"]})
                assert "health.allergy" in [h["key"] for h in r.structured_content["hits"]]
            with pytest.raises(Exception):
                async with client(None) as c:
                    await c.list_tools()
            with pytest.raises(Exception):
                async with client("mlk_000000000000_" + "x" * 43) as c:
                    await c.list_tools()

        asyncio.run(asyncio.wait_for(run(), 120))
        import httpx

        r = httpx.get(server.base + "/elsewhere", headers={"Authorization": f"Bearer {k1}"})
        assert r.status_code == 404 and r.headers["content-type"].startswith("application/problem+json")
        assert (r.json()["field"], r.json()["fix"]) == ("path", "the MCP endpoint is /mcp")
        log = server.wait_log("GET - 404", "POST /mcp 200")
        assert "GET - 404" in log and "POST /mcp 200" in log  # route templates, not paths
    finally:
        server.stop()
    with MemoryLedger(home=home) as ml:  # nothing written by any refused call
        assert ml.messages("u2") == [] and ml.messages("u1") == []
        assert ml.profile("u1").facts["preference.drink"].value == "tea"
        assert [r.kind for r in ml.history("u1")] == ["asserted"] * 3


def test_remember_tool_over_stdio(tmp_path: Path) -> None:
    home = tmp_path / "h"
    seed(home)

    async def run() -> None:
        async with Client(stdio(home, "--user", "u1")) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert "decision" in json.dumps(tools["remember"].output_schema)
            r = await c.call_tool("remember", {"text": "I moved to Berlin last month", "idempotency_key": "r1"})
            assert not r.is_error, r.content[0].text
            first = r.structured_content
            assert first["decision"] and first["key"] and first["user_id"] == "u1"
            r = await c.call_tool("remember", {"text": "I moved to Berlin last month", "idempotency_key": "r1"})
            assert r.structured_content["event_id"] == first["event_id"]
            r = await c.call_tool("profile", {"after": first["position"]})
            assert first["key"] in r.structured_content["facts"]
            r = await c.call_tool("remember", {"text": "My sister Ana lives in Porto", "role": "planner",
                                               "source": "agent_inference", "confidence": 0.7})
            assert not r.is_error, r.content[0].text
            r = await c.call_tool("remember", {"text": "", "user_id": "u1"})
            assert r.is_error and "text" in r.content[0].text

    asyncio.run(asyncio.wait_for(run(), 120))


def test_tool_arguments_are_checked_and_refusals_name_arguments(tmp_path: Path) -> None:
    """an unknown argument (`observedAt`) was silently dropped (the time lost, isError false);
    argument failures came back as pydantic dumps; fixes named CLI flags and commands. Now: refused, worded
    `<argument>: <problem> (fix: <fix>)` in the tool's terms; sensitivity labels are checked; `unlink` is a tool."""
    home = tmp_path / "h"
    seed(home)

    async def run() -> None:
        async with Client(stdio(home, "--user", "u1")) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert "unlink" in tools and "version" in tools["unlink"].input_schema["properties"]
            r = await c.call_tool("remember", {"text": "I moved to Berlin", "observedAt": "2024-01-01T00:00:00Z"})
            text = r.content[0].text
            assert r.is_error and ("remember: observedAt: is not an argument of this tool (fix: did you mean "
                                  "observed_at?") in text, text
            for args, starts in [({}, "text: is missing (fix: give text"),
                                 ({"text": "x", "confidence": 7}, "confidence: 7 is not less than or equal to 1"),
                                 ({"text": "x", "observed_at": "2024-01-01T00:00:00"}, "observed_at: "),
                                 ({"text": "I have asthma", "sensitivity": "Bogus Label"},
                                  "sensitivity: 'Bogus Label' is not a label")]:
                r = await c.call_tool("remember", args)
                text = r.content[0].text
                assert r.is_error and f"remember: {starts}" in text and "(fix: " in text, (args, text)
                assert "validation error" not in text and "pydantic.dev" not in text and "--" not in text, text
            r = await c.call_tool("update_card", {"session_id": "never", "task": "t"})
            text = r.content[0].text
            assert r.is_error and "call `log_message` first" in text and "memledger session" not in text, text
            r = await c.call_tool("log_message", {"session_id": "s1", "role": "user", "message_id": "m1", "text": "hi"})
            assert not r.is_error, r.content[0].text
            r = await c.call_tool("update_card", {"session_id": "s1", "replace_decisions": ["no arrow"]})
            text = r.content[0].text
            assert r.is_error and "update_card: replace_decisions: " in text and "--" not in text, text
            r = await c.call_tool("recall", {"query": "tea", "allow_sensitive": ["Health"]})
            assert r.is_error and "allow_sensitive: 'Health' is not a label" in r.content[0].text
            # unlink: undo a remember decision
            first = (await c.call_tool("remember", {"text": "I drink coffee every morning"})).structured_content
            assert (first["decision"], first["key"]) == ("supersede", "preference.drink")  # seeded: tea
            r = await c.call_tool("unlink", {"key": first["key"], "version": 99})
            assert r.is_error and "unlink: version: " in r.content[0].text, r.content[0].text
            assert "memledger history" not in r.content[0].text and "`history`" in r.content[0].text
            r = await c.call_tool("unlink", {"key": first["key"], "version": first["version"]})
            assert not r.is_error and r.structured_content["decision"], r.content[0].text
            r = await c.call_tool("profile", {})
            assert r.structured_content["facts"]["preference.drink"]["value"] == "tea"  # the supersede undone

    asyncio.run(asyncio.wait_for(run(), 120))


def test_mcp_forget_over_http_needs_an_admin_key(tmp_path: Path) -> None:
    """forget is irreversible, as erase: a plain key holding the user is refused, an admin key is not."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    home = tmp_path / "h"
    seed(home)
    plain = create_key(home, "--user", "u1")
    admin = create_key(home, "--user", "u1", "--admin")
    server = Server(home, "mcp", "--transport", "http", "--allow-destructive")
    try:
        server.wait_ready("/mcp", expect=(401,))

        def client(key: str) -> Client:
            return Client(streamable_http_client(server.base + "/mcp", http_client=create_mcp_http_client(
                headers={"Authorization": f"Bearer {key}"})))

        async def run() -> None:
            args = {"user_id": "u1", "key": "profile.city", "confirm": "profile.city"}
            async with client(plain) as c:
                r = await c.call_tool("forget", args)
                assert r.is_error and "admin" in r.content[0].text
            async with client(admin) as c:
                r = await c.call_tool("forget", args)
                assert not r.is_error, r.content[0].text
                assert r.structured_content["versions"] == [1]

        asyncio.run(asyncio.wait_for(run(), 120))
    finally:
        server.stop()
