"""``memledger serve mcp|http``: the agent faces (docs/interfaces.md).

``serve mcp`` speaks MCP over stdio (default: a trusted local process, only protocol messages on stdout) or over
streamable HTTP (``--transport http``: every request needs an API key, as for ``serve http``). ``serve http`` is the
HTTP API with the MCP endpoint at ``/mcp``. Both open one ledger for the life of the process.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from typing import Any, Iterator, Optional

import typer

from ledger.errors import BadInput

from .common import app, err, open_ledger

serve_app = typer.Typer(no_args_is_help=True, help="Serve the ledger to agents: MCP (stdio or HTTP) or the HTTP API.")
app.add_typer(serve_app, name="serve")

HostOpt = typer.Option("127.0.0.1", "--host", help="Interface to listen on (HTTP transports).")
DestructiveOpt = typer.Option(False, "--allow-destructive", help="Offer erase (and forget) as MCP tools, marked "
                              "destructive.")
IndexMemoryOpt = typer.Option(None, "--index-memory-mb", help="Keep loaded search indexes within this many MB, "
                              "evicting the least recently searched user [default: $MEMLEDGER_INDEX_MEMORY_MB, "
                              "else 1024].")


def _index_budget(mb: Optional[float]) -> float:
    """The served ledger's index budget in MB: ``--index-memory-mb``, else ``$MEMLEDGER_INDEX_MEMORY_MB``, else the
    default (memledger/defaults.py). Read before anything starts: bad input names the flag or the variable; the rule
    is ``memledger.store.check_index_memory``'s."""
    import os

    from memledger.defaults import DEFAULT_INDEX_MEMORY_MB, INDEX_MEMORY_ENV
    from memledger.store import check_index_memory

    field, fix = "--index-memory-mb", "give a number > 0 such as 1024"
    if mb is None:
        field, fix = f"${INDEX_MEMORY_ENV}", "set it to a number > 0 such as 1024, or unset it"
        raw = os.environ.get(INDEX_MEMORY_ENV, "").strip()
        try:
            mb = float(raw) if raw else float(DEFAULT_INDEX_MEMORY_MB)
        except ValueError:
            raise BadInput(field, f"{raw!r} is not a number of megabytes", fix) from None
    try:
        check_index_memory(mb)
    except BadInput:
        raise BadInput(field, f"{mb!r} is not a number of megabytes > 0", fix) from None
    return mb


def _port(port: int) -> int:
    if not 0 < port < 65536:
        raise BadInput("--port", f"{port} is not a TCP port", "use 1..65535")
    return port


def _check_port_free(host: str, port: int) -> None:
    """Exit 1 with a sentence (before any banner) when ``host:port`` cannot be listened on: a busy port (another
    server) or an address this machine does not have. uvicorn would print its own error and exit 3 after our
    banner announced a server that never ran."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        err.print(f"error: --host {host!r} is not an address of this machine ({exc.strerror or exc}); fix: give "
                  "127.0.0.1, 0.0.0.0 or one of its addresses")
        raise typer.Exit(1) from None
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: a TIME_WAIT port is free
        try:
            s.bind(addr)
        except OSError as exc:
            err.print(f"error: cannot listen on {host}:{port}: {exc.strerror or exc} (another server is probably "
                      "using it); fix: stop it or pick another --port")
            raise typer.Exit(1) from None


def _log_to_stderr(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
    for name in ("memledger.http", "memledger"):
        lg = logging.getLogger(name)
        lg.handlers[:] = [handler]
        lg.setLevel(level)
        lg.propagate = False


@contextlib.contextmanager
def _close_on_sigterm() -> Iterator[None]:
    """Make SIGTERM (what service managers send to stop a server) unwind the stack as ``SystemExit(143)``, so the
    ``with open_ledger(...)`` around a server closes the ledger: its index files are saved and the per-fact keys it
    reserved are handed back (ledger/crypto.py). Without it the default action killed the process: uvicorn shuts
    down gracefully on SIGTERM, then re-raises the signal it captured (uvicorn >= 0.29, ``capture_signals``), and
    nothing after ``uvicorn.run`` would run (exit 143, the reserve left in keys.db). The exit status
    stays 143 (128 + SIGTERM), as service managers expect. Main thread only (Python's rule for signal handlers)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _uvicorn(asgi, host: str, port: int) -> None:  # noqa: ANN001 - an ASGI app
    import uvicorn

    # access_log off: uvicorn's line carries the query string (a GET search's query); memledger.http logs
    # method, path, status and time instead
    # timeout_graceful_shutdown: an open change feed (SSE) would otherwise hold a SIGTERM forever
    config = uvicorn.Config(asgi, host=host, port=port, access_log=False, log_level="warning", lifespan="on",
                            timeout_graceful_shutdown=3)
    draining = getattr(getattr(asgi, "state", None), "draining", None)  # the change feeds' (servers/feed_routes.py)

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            if draining is not None:
                draining.set()  # open feeds end with an `end` event before the graceful shutdown waits on them
            super().handle_exit(sig, frame)

    server = Server(config)
    server.run()
    if not server.started:
        sys.exit(3)  # as uvicorn.run does when the server could not start


@serve_app.command("mcp")
def serve_mcp(ctx: typer.Context,
              transport: str = typer.Option("stdio", "--transport", help="stdio (default) | http"),
              host: str = HostOpt, port: int = typer.Option(8765, "--port", help="Port (--transport http)."),
              user: Optional[str] = typer.Option(None, "--user", help="Pin the server to this user: an omitted "
                                                 "user_id means it, any other is refused."),
              allow_destructive: bool = DestructiveOpt, index_memory_mb: Optional[float] = IndexMemoryOpt) -> None:
    """Serve the ledger as an MCP server (tools: remember, recall, profile, history, believed, true_at, ...)."""
    if transport not in ("stdio", "http"):
        raise BadInput("--transport", f"{transport!r} is not a transport", "use stdio or http")
    _port(port)
    budget = _index_budget(index_memory_mb)
    _log_to_stderr(logging.WARNING if transport == "stdio" else logging.INFO)
    from memledger.servers.mcp import build_mcp, run_stdio
    from memledger.servers.ops import Service

    with _close_on_sigterm(), open_ledger(ctx) as ml:
        ml.limit_index_memory(budget)
        ml.warm_search()
        service = Service(ml)
        if transport == "stdio":
            run_stdio(build_mcp(service, user=user, allow_destructive=allow_destructive))
            return
        import contextlib

        from starlette.applications import Starlette

        from memledger.servers.http import KeyMiddleware
        from memledger.servers.keys import APIKeyStore

        server = build_mcp(service, user=user, allow_destructive=allow_destructive, require_key=True)
        inner = server.streamable_http_app(streamable_http_path="/mcp", host=host, json_response=True)

        @contextlib.asynccontextmanager
        async def lifespan(_app):  # noqa: ANN001, ANN202
            async with server.session_manager.run():
                yield

        from memledger.servers.http import problem_response

        async def not_routed(request, exc):  # noqa: ANN001, ANN202 - problem+json as the HTTP API answers
            if exc.status_code == 405:
                return problem_response(405, "Method not allowed", f"method: {request.method} is not allowed on /mcp",
                                        headers=dict(exc.headers or {}), fix="use POST (MCP streamable HTTP)")
            return problem_response(404, "Not found", "path: no route has this path", fix="the MCP endpoint is /mcp")

        asgi = Starlette(routes=list(inner.routes), lifespan=lifespan,
                         exception_handlers={404: not_routed, 405: not_routed})
        asgi.add_middleware(KeyMiddleware, keys=APIKeyStore(ml), service=service, routes=inner.routes)
        _check_port_free(host, port)
        err.print(f"memledger MCP on http://{host}:{port}/mcp (Authorization: Bearer <key>)")
        _uvicorn(asgi, host, port)


@serve_app.command("http")
def serve_http(ctx: typer.Context, host: str = HostOpt,
               port: int = typer.Option(8765, "--port", help="Port."),
               allow_destructive: bool = DestructiveOpt, index_memory_mb: Optional[float] = IndexMemoryOpt) -> None:
    """Serve the HTTP API (OpenAPI at /openapi.json and /docs) with the MCP endpoint at /mcp, behind API keys."""
    _port(port)
    budget = _index_budget(index_memory_mb)
    _log_to_stderr()
    from memledger.servers.http import create_app
    from memledger.servers.ops import Service

    with _close_on_sigterm(), open_ledger(ctx) as ml:
        ml.limit_index_memory(budget)
        ml.warm_search()
        asgi = create_app(Service(ml), allow_destructive=allow_destructive, host=host)
        _check_port_free(host, port)
        err.print(f"memledger HTTP API on http://{host}:{port} (docs: /docs, MCP: /mcp)")
        _uvicorn(asgi, host, port)
