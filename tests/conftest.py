"""Shared fixtures: a fresh ledger per test, and the CLI run as a user runs it (a subprocess).

Backends: every test that takes ``fresh_ledger`` (or ``store_args``) runs once per backend in ``BACKENDS`` — the
embedded SQLite default always, PostgreSQL when a server answers (see tests/pg.py). Tests that need PostgreSQL and
find no server skip with the reason, or fail under ``MEMLEDGER_REQUIRE_POSTGRES=1`` (CI).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


class CLI:
    """Runs ``python -m memledger`` with the store's flags; returns (exit code, stdout, stderr)."""

    def __init__(self, store_args: dict[str, Any]) -> None:
        self.flags = ["--home", str(store_args["home"])] if "home" in store_args else ["--dsn", store_args["dsn"]]
        self.env = dict(os.environ)
        if "schema" in store_args:
            self.env["MEMLEDGER_SCHEMA"] = store_args["schema"]

    def __call__(self, *args: str, input: str | None = None) -> tuple[int, str, str]:
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
