#!/usr/bin/env python
"""What the agent faces cost: warm ``recall`` through MCP (stdio and streamable HTTP) and through the
HTTP API, beside the in-process ``MemoryLedger.search`` on the same store, in the same run; and writes per second
with 8 concurrent clients.

Rows (p50/p95 over the same queries; every path is open at once and first warmed with every query, so the
query-embedding cache of each process is in the same state in every row; then the paths are timed in interleaved
rounds, so a change of load on the shared machine touches every row alike):

* in-process ``MemoryLedger.search(user, q, k=10)`` — the baseline;
* ``POST /v1/users/{u}/search`` on ``memledger serve http`` (httpx, keep-alive, one connection);
* MCP ``recall`` over streamable HTTP (``/mcp`` of ``serve http``, with the API key);
* MCP ``recall`` over stdio (``memledger serve mcp`` as a subprocess);
* the same MCP calls as raw JSON-RPC from a thin client (httpx POSTs to ``/mcp``; lines on the subprocess's pipes):
  what the server and the transport cost without the ``mcp`` SDK client (which validates every result against the
  tool's output schema with jsonschema; that validation is also timed apart).

The overhead column is the transport's p50 minus the in-process p50 (target: <= 3 ms). Writes: ``log_message``
(a session message: one event, one save) by 8 concurrent clients — threads with their own ``MemoryLedger`` in
process, 8 httpx clients against ``serve http``, 8 MCP sessions over HTTP — plus one in-process client; every
server row also gives its ratio to the in-process row of the same run. The load average is printed before and
after (2 shared cores: compare rows of one run, not runs).

Usage: python scripts/bench_serve.py [--memories 2000] [--queries 200] [--rounds 10] [--writes 400]
       [--embedder hash|minilm]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

WORDS = ("tea coffee lyon paris cat dog piano guitar running swimming book film garden kitchen train plane "
         "mountain beach winter summer python rust chess painting sister brother doctor teacher").split()


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def build(home: Path, n: int) -> list[str]:
    from memledger import MemoryLedger

    rng = random.Random(7)
    commands = []
    for i in range(n):
        a, b, c = rng.sample(WORDS, 3)
        commands.append({"user_id": "bench", "key": f"memory.m{i}", "value": f"{a} {b}",
                         "text": f"The user likes {a} and {b}, not {c} (note {i})"})
    with MemoryLedger(home=home) as ml:
        for s in range(0, n, 500):
            ml.record(commands[s:s + 500])
        ml.search("bench", "warm up", k=10)  # builds the vectors projection
    return [" ".join(rng.sample(WORDS, 2)) for _ in range(64)]


async def recall_rows(home: Path, env: dict[str, str], base: str, hdr: dict[str, str], queries: list[str], n: int,
                      rounds: int, validation: list[float]) -> list[tuple[str, list[float]]]:
    """Every recall path open at once, warmed with every query, then timed in ``rounds`` interleaved rounds (each
    round runs n/rounds queries on each path in turn), so a change of machine load touches every row alike."""
    import contextlib

    import httpx
    from jsonschema import validators
    from mcp import Client, StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from memledger import MemoryLedger

    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}
    inited = {"jsonrpc": "2.0", "method": "notifications/initialized"}

    def rpc(q: str) -> dict:
        return {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "recall", "arguments": {"user_id": "bench", "query": q, "k": 10}}}

    def check(r: object) -> None:
        assert not getattr(r, "is_error", False), r

    async with contextlib.AsyncExitStack() as stack:
        ml = stack.enter_context(MemoryLedger(home=home))
        http = stack.enter_context(httpx.Client(base_url=base, headers=hdr, timeout=30))
        mcp_http = await stack.enter_async_context(Client(streamable_http_client(
            base + "/mcp", http_client=create_mcp_http_client(headers=hdr))))
        mcp_stdio = await stack.enter_async_context(Client(StdioServerParameters(
            command=sys.executable, args=["-m", "memledger", "--home", str(home), "serve", "mcp"], env=env,
            cwd=str(ROOT))))
        raw = stack.enter_context(httpx.Client(base_url=base, timeout=30, headers={
            **hdr, "Accept": "application/json, text/event-stream"}))
        sid = {"mcp-session-id": raw.post("/mcp", json=init).headers["mcp-session-id"],
               "mcp-protocol-version": "2025-06-18"}
        raw.post("/mcp", json=inited, headers=sid)
        pipe = subprocess.Popen([sys.executable, "-m", "memledger", "--home", str(home), "serve", "mcp"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                cwd=ROOT, text=True)

        def close_pipe() -> None:
            pipe.stdin.close()
            pipe.wait(timeout=20)

        stack.callback(close_pipe)

        def send(msg: dict) -> dict | None:
            pipe.stdin.write(json.dumps(msg) + "\n")
            pipe.stdin.flush()
            return json.loads(pipe.stdout.readline()) if "id" in msg else None

        send(init)
        send(inited)

        async def in_process(q: str) -> None:
            ml.search("bench", q, k=10)

        async def http_post(q: str) -> None:
            r = http.post("/v1/users/bench/search", json={"query": q, "k": 10})
            assert r.status_code == 200, r.text

        async def sdk_http(q: str) -> None:
            check(await mcp_http.call_tool("recall", {"user_id": "bench", "query": q, "k": 10}))

        async def sdk_stdio(q: str) -> None:
            check(await mcp_stdio.call_tool("recall", {"user_id": "bench", "query": q, "k": 10}))

        async def raw_http(q: str) -> None:
            out = raw.post("/mcp", json=rpc(q), headers=sid).json()
            assert not out["result"].get("isError"), out

        async def raw_stdio(q: str) -> None:
            out = send(rpc(q))
            assert not out["result"].get("isError"), out

        paths = [("in-process MemoryLedger.search", in_process), ("HTTP POST /v1/users/{u}/search", http_post),
                 ("MCP recall, streamable HTTP (/mcp)", sdk_http), ("MCP recall, stdio", sdk_stdio),
                 ("MCP tools/call over HTTP, raw JSON-RPC (httpx)", raw_http),
                 ("MCP tools/call over stdio, raw JSON-RPC (pipes)", raw_stdio)]
        # warm with every query once: each process keeps an in-memory cache of query embeddings, so every row then
        # measures with that cache in the same state (all hits), and the rows differ only by the path
        for _, fn in paths:
            for q in queries:
                await fn(q)
        times: dict[str, list[float]] = {name: [] for name, _ in paths}
        per = max(1, n // rounds)
        for r in range(rounds):
            for name, fn in paths:
                for i in range(per):
                    q = queries[(r * per + i) % len(queries)]
                    t = time.perf_counter()
                    await fn(q)
                    times[name].append((time.perf_counter() - t) * 1000)
        # what the mcp client itself spends validating one result against the tool's output schema
        schema = next(t.output_schema for t in (await mcp_stdio.list_tools()).tools if t.name == "recall")
        validator = validators.validator_for(schema)(schema)
        sample = await mcp_stdio.call_tool("recall", {"user_id": "bench", "query": queries[0], "k": 10})
        for _ in range(n):
            t = time.perf_counter()
            validator.is_valid(sample.structured_content)
            validation.append((time.perf_counter() - t) * 1000)
    return [(name, times[name]) for name, _ in paths]


def start_http(home: Path, env: dict[str, str], *extra: str) -> tuple[subprocess.Popen, str]:
    """``memledger serve http`` on a free port (``extra``: more flags), once /v1/health answers: (process, base URL)."""
    import httpx

    port = free_port()
    log = home.parent / "serve_http.log"
    proc = subprocess.Popen([sys.executable, "-m", "memledger", "--home", str(home), "serve", "http", "--port",
                             str(port), *extra], env=env, stdout=subprocess.DEVNULL, stderr=log.open("w"), cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(base + "/v1/health", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"serve http did not start: {log.read_text()[-2000:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memories", type=int, default=2000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=10, help="interleaved rounds the queries are split into")
    ap.add_argument("--writes", type=int, default=400, help="writes per concurrent row (8 clients share them)")
    ap.add_argument("--embedder", default="hash", help="hash (default: no model load) or minilm")
    args = ap.parse_args()
    os.environ["MEMLEDGER_EMBEDDER"] = args.embedder
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    env = dict(os.environ)

    import httpx
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from memledger import MemoryLedger
    from memledger.servers.keys import APIKeyStore

    tmp = Path(tempfile.mkdtemp(prefix="bench_serve_"))
    home = tmp / "h"
    print(f"load average before: {load()}  (cpus: {os.cpu_count()})")
    t0 = time.perf_counter()
    queries = build(home, args.memories)
    with MemoryLedger(home=home) as ml:
        key = APIKeyStore(ml).create(["bench"] + [f"w{i}" for i in range(8)]).secret
    print(f"built {args.memories} memories of one user in {time.perf_counter() - t0:.1f} s; embedder {args.embedder}")
    n = args.queries
    rows: list[tuple[str, list[float]]] = []

    proc, base = start_http(home, env)
    hdr = {"Authorization": f"Bearer {key}"}
    validation: list[float] = []
    try:
        rows = asyncio.run(recall_rows(home, env, base, hdr, queries, n, args.rounds, validation))
        # writes: log_message, 8 concurrent clients
        per = max(1, args.writes // 8)
        writes: list[tuple[str, int, int, float]] = []

        def inproc_one() -> None:
            with MemoryLedger(home=home) as ml:
                t = time.perf_counter()
                for i in range(per * 2):
                    ml.log_message("w0", "solo", role="user", message_id=f"m{i}", text=f"solo message {i}")
                writes.append(("in-process, 1 client", 1, per * 2, time.perf_counter() - t))

        def inproc_8() -> None:
            barrier = threading.Barrier(8)
            ls = [MemoryLedger(home=home) for _ in range(8)]

            def work(w: int) -> None:
                barrier.wait()
                for i in range(per):
                    ls[w].log_message(f"w{w}", "inproc", role="user", message_id=f"m{i}", text=f"message {i}")

            t = time.perf_counter()
            ths = [threading.Thread(target=work, args=(w,)) for w in range(8)]
            for th in ths:
                th.start()
            for th in ths:
                th.join()
            writes.append(("in-process, 8 threads (own MemoryLedger)", 8, per * 8, time.perf_counter() - t))
            for x in ls:
                x.close()

        def http_8() -> None:
            barrier = threading.Barrier(8)

            def work(w: int) -> None:
                with httpx.Client(base_url=base, headers=hdr, timeout=60) as c:
                    barrier.wait()
                    for i in range(per):
                        r = c.post(f"/v1/users/w{w}/sessions/http/messages",
                                   json={"role": "user", "message_id": f"m{i}", "text": f"message {i}"})
                        assert r.status_code == 201, r.text

            t = time.perf_counter()
            ths = [threading.Thread(target=work, args=(w,)) for w in range(8)]
            for th in ths:
                th.start()
            for th in ths:
                th.join()
            writes.append(("HTTP API, 8 clients", 8, per * 8, time.perf_counter() - t))

        async def mcp_8() -> None:
            async def work(w: int, c: Client) -> None:
                for i in range(per):
                    r = await c.call_tool("log_message", {"user_id": f"w{w}", "session_id": "mcp", "role": "user",
                                                          "message_id": f"m{i}", "text": f"message {i}"})
                    assert not r.is_error

            import contextlib

            async with contextlib.AsyncExitStack() as stack:  # sessions close in reverse order (anyio scopes)
                clients = [await stack.enter_async_context(Client(streamable_http_client(
                    base + "/mcp", http_client=create_mcp_http_client(headers=hdr)))) for _ in range(8)]
                t = time.perf_counter()
                await asyncio.gather(*(work(w, c) for w, c in enumerate(clients)))
                writes.append(("MCP over HTTP, 8 sessions", 8, per * 8, time.perf_counter() - t))

        inproc_one()
        inproc_8()
        http_8()
        asyncio.run(mcp_8())
    finally:
        proc.terminate()
        proc.wait(timeout=20)

    base_p50 = statistics.median(rows[0][1])
    print(f"\nrecall / search, k=10, one user with {args.memories} memories, {n} queries per row")
    print("| path | p50 ms | p95 ms | overhead p50 (ms) | p50 / in-process |")
    print("|---|---:|---:|---:|---:|")
    for name, xs in rows:
        p50, p95 = statistics.median(xs), pct(xs, 95)
        over = "" if name.startswith("in-process") else f"{p50 - base_p50:+.2f}"
        print(f"| {name} | {p50:.2f} | {p95:.2f} | {over} | {p50 / base_p50:.2f}x |")
    val = statistics.median(validation)
    print(f"| (mcp client: jsonschema validation of one recall result) | {val:.2f} | {pct(validation, 95):.2f} | | |")
    print("\ntransport overhead target <= 3 ms p50 over the in-process call:")
    for name, xs in rows[1:]:
        over = statistics.median(xs) - base_p50
        line = f"  {name}: {'met' if over <= 3.0 else 'NOT MET'} ({over:+.2f} ms)"
        if name.startswith("MCP recall"):
            rest = over - val
            line += f"; without the client's own result validation {rest:+.2f} ms ({'met' if rest <= 3.0 else 'NOT MET'})"
        print(line)
    base_w = next(c / s for name, _, c, s in writes if name.startswith("in-process, 8"))
    print("\nwrites (log_message, one event per save)")
    print("| path | clients | writes | seconds | writes/s | vs in-process 8 threads |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, clients, count, secs in writes:
        print(f"| {name} | {clients} | {count} | {secs:.2f} | {count / secs:,.0f} | {count / secs / base_w:.2f}x |")
    print(f"\nload average after: {load()}")
    print(json.dumps({"recall_p50_ms": {name: round(statistics.median(xs), 3) for name, xs in rows},
                      "writes_per_s": {name: round(c / s, 1) for name, _, c, s in writes}}))


if __name__ == "__main__":
    main()
