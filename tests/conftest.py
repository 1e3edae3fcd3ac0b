"""Shared fixtures: a fresh ledger per test, and the CLI.

Backends: every test that takes ``fresh_ledger`` (or ``store_args``) runs once per backend in ``BACKENDS`` — the
embedded SQLite default always, PostgreSQL when a server answers (see tests/pg.py). Tests that need PostgreSQL and
find no server skip with the reason, or fail under ``MEMLEDGER_REQUIRE_POSTGRES=1`` (CI).

The CLI runs in this process. ``cli`` (and ``CLI``, ``run_cli``) call ``memledger.cli.main`` — the function the
console script and ``python -m memledger`` run, so exit codes and error output are the product's own — inside
typer's ``CliRunner`` isolation: stdin from ``input=``, stdout and stderr captured apart, the store's environment
(``MEMLEDGER_SCHEMA`` on PostgreSQL) set for the call, ``os.environ`` restored after it. A cold
``python -m memledger`` costs 1-2 s of imports per call and the suite makes hundreds of calls; in this process a
call costs what the command does. An exception that escapes ``main`` comes back as exit 1 with its traceback on
stderr, as from a process, so ``"Traceback" not in err`` still catches it. The CLI keeps no state from one call
to the next (its consoles follow ``sys.stdout``/``sys.stderr`` as they are at each print; ``project --follow``
puts the signal handlers back), so a call sees only its arguments, environment and store.

What needs a real process stays one (``cli_process`` / ``CLI(..., subprocess=True)``, or ``subprocess`` directly):
the cold start and what a fresh interpreter imports (tests/test_cli_start.py), the ``python -m memledger`` entry
(tests/test_layers.py), servers and workers that run until signalled (``serve``, ``project --follow``:
tests/serve_util.py, tests/test_follow.py, tests/test_mcp_server.py, tests/test_shards.py), processes killed
mid-write or killing themselves (tests/test_crash_safety.py, ``MEMLEDGER_KILL_AT`` in tests/test_shards.py),
writers racing from several processes (tests/test_remember.py, tests/test_concurrent_processes.py,
tests/test_crypto.py), and scripts and probes run as programs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The semantic index embeds with the hashing test double unless a test asks for a real model: loading
# MiniLM costs seconds per process, and CLI tests start a process per call.
os.environ.setdefault("MEMLEDGER_EMBEDDER", "hash")

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "postgres":
        from tests import pg

        pg.require()  # skips, or fails under MEMLEDGER_REQUIRE_POSTGRES=1 (CI), when no server answers
    return request.param


@pytest.fixture
def postgres_server() -> None:
    """For a test that talks to the PostgreSQL server itself (not through ``backend``): the same rule, a skip
    with the reason, or a failure under ``MEMLEDGER_REQUIRE_POSTGRES=1``."""
    from tests import pg

    pg.require()


@pytest.fixture
def store_args(backend: str, tmp_path: Path) -> Any:
    """Keyword arguments of MemoryLedger for a fresh, empty store on the current backend.

    SQLite: a new home directory. PostgreSQL: a new schema on the test server, dropped after the test.
    """
    if backend == "sqlite":
        yield {"home": tmp_path / "ledger"}
        return
    from tests import pg

    schema = pg.new_schema()
    try:
        yield {"dsn": pg.TEST_DSN, "schema": schema}
    finally:
        pg.drop_schema(schema)


@pytest.fixture
def fresh_ledger(store_args: dict[str, Any]):
    from memledger import MemoryLedger

    with MemoryLedger(**store_args) as ml:
        yield ml


def run_cli(args: Sequence[str], *, input: str | None = None,
            env: Mapping[str, str | None] | None = None) -> tuple[int, str, str]:
    """``memledger ARGS`` in this process; returns (exit code, stdout, stderr) as a subprocess would.

    It calls :func:`memledger.cli.main`, the function the console script and ``python -m memledger`` run (so the
    exit codes, the error lines and the ``--json`` error object are the product's own), inside typer's
    ``CliRunner.isolation``: stdin holds ``input``, stdout and stderr are captured apart, and ``env`` (None deletes a
    variable) is set for the call only. ``os.environ`` is put back as it was afterwards, whatever the command set.
    An exception that escapes ``main`` is what a process would die of: exit 1 and its traceback on stderr, so an
    assertion such as ``"Traceback" not in err`` still sees it.
    """
    from typer.testing import CliRunner

    from memledger.cli import main

    environ = dict(os.environ)
    try:
        with CliRunner().isolation(input=input, env=env) as (stdout, stderr, _):
            code: Any = 0
            try:
                main(list(args))
            except SystemExit as exc:
                code = exc.code
            except Exception:  # noqa: BLE001 - the process would print it and exit 1
                sys.stderr.write(traceback.format_exc())
                code = 1
            if code is None:
                code = 0
            elif not isinstance(code, int):  # sys.exit("message"): Python prints it to stderr, exit 1
                sys.stderr.write(f"{code}\n")
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            return code, _text(stdout.getvalue()), _text(stderr.getvalue())
    finally:
        if os.environ != environ:
            os.environ.clear()
            os.environ.update(environ)


def _text(data: bytes) -> str:
    """Captured bytes as ``subprocess.run(..., text=True)`` gives them: UTF-8, with universal newlines."""
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


class CLI:
    """The ``memledger`` command with the store's flags: ``cli(*args, input=...)`` returns (exit code, stdout,
    stderr). In this process (:func:`run_cli`) by default; ``subprocess=True`` runs ``python -m memledger``.

    Either way a call sees ``self.env``: the environment as it was when this object was made, with the store's
    variables (``MEMLEDGER_SCHEMA``) and whatever a test sets in it (``cli.env[...] = ...``).
    """

    def __init__(self, store_args: dict[str, Any], *, subprocess: bool = False) -> None:
        self.flags = ["--home", str(store_args["home"])] if "home" in store_args else ["--dsn", store_args["dsn"]]
        self.env = dict(os.environ)
        if "schema" in store_args:
            self.env["MEMLEDGER_SCHEMA"] = store_args["schema"]
        self.subprocess = subprocess

    def __call__(self, *args: str, input: str | None = None) -> tuple[int, str, str]:
        if not self.subprocess:
            env: dict[str, str | None] = {name: None for name in os.environ if name not in self.env}
            return run_cli([*self.flags, *args], input=input, env={**env, **self.env})
        proc = subprocess.run(
            [sys.executable, "-m", "memledger", *self.flags, *args], capture_output=True, text=True, cwd=ROOT,
            env=self.env, input=input, timeout=300,
        )
        return proc.returncode, proc.stdout, proc.stderr

    def json(self, *args: str) -> Any:
        code, out, err = self(*args, "--json")
        assert code == 0, err
        return json.loads(out)


@pytest.fixture
def cli(store_args: dict[str, Any]) -> CLI:
    return CLI(store_args)


@pytest.fixture
def cli_process(store_args: dict[str, Any]) -> CLI:
    """The CLI as a user starts it: a ``python -m memledger`` process per call."""
    return CLI(store_args, subprocess=True)


@pytest.fixture(scope="module")
def minilm_ledger(tmp_path_factory: pytest.TempPathFactory):
    """One ledger with the real MiniLM embedder (and the CJK companion) per test module, on SQLite: the revision
    rules that read meaning use MiniLM's cosine, which the hash double does not give."""
    from memledger import MemoryLedger

    with MemoryLedger(home=tmp_path_factory.mktemp("minilm") / "ledger", embedder="minilm") as ml:
        yield ml
