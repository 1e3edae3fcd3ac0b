"""Helpers of the server tests: a free loopback port, a `memledger serve ...` subprocess, its readiness, its stop."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.setdefault("MEMLEDGER_EMBEDDER", "hash")
    e.setdefault("HF_HUB_OFFLINE", "1")
    return e


def memledger(home: Path, *args: str, timeout: float = 120, process: bool = False,
              environ: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``memledger --home HOME ARGS`` with :func:`env` (and ``environ`` over it): in this process (the key and read
    commands a test runs next to a server), or as a ``python -m memledger`` process with ``process=True``."""
    argv = ["--home", str(home), *args]
    if not process:
        from tests.conftest import run_cli

        code, out, err = run_cli(argv, env={**env(), **(environ or {})})
        return subprocess.CompletedProcess(argv, code, out, err)
    return subprocess.run([sys.executable, "-m", "memledger", *argv], capture_output=True, text=True, cwd=ROOT,
                          env={**env(), **(environ or {})}, timeout=timeout)


def create_key(home: Path, *args: str) -> str:
    import json

    proc = memledger(home, "keys", "create", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["secret"]


class Server:
    """``memledger --home HOME serve ...`` on 127.0.0.1:<free port>; stderr kept in a file for the log checks."""

    def __init__(self, home: Path, *args: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = home.parent / f"server-{self.port}.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memledger", "--home", str(home), "serve", *args, "--host", "127.0.0.1",
             "--port", str(self.port)], stdout=subprocess.DEVNULL, stderr=self._log, cwd=ROOT, env=env())

    def wait_ready(self, path: str = "/v1/health", timeout: float = 60.0, expect: Any = (200, 401, 404, 405, 406)
                   ) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited {self.proc.returncode}: {self.log()}")
            try:
                if httpx.get(self.base + path, timeout=1.0).status_code in expect:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"server not ready in {timeout}s: {self.log()}")

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text()

    def wait_log(self, *needles: str, timeout: float = 10.0) -> str:
        """The log once it holds every one of ``needles`` (or as it is after ``timeout`` seconds): the server writes
        a request's access line after sending the response, so a client can read the log before the line is there
        (a CI run under load failed that way)."""
        deadline = time.monotonic() + timeout
        while True:
            log = self.log()
            if all(n in log for n in needles) or time.monotonic() > deadline:
                return log
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()
