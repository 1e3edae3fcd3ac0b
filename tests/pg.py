"""The PostgreSQL side of the test suite: is a server reachable, and a fresh schema per test.

The suite runs every ``store_args`` / ``fresh_ledger`` / ``cli`` test once per backend (tests/conftest.py), the way
eventsourcing runs its recorder test cases against SQLite and PostgreSQL. PostgreSQL joins when a server answers on
``$MEMLEDGER_TEST_DSN`` (default ``postgresql://postgres@127.0.0.1:5432/test``; ``.ci/run`` starts the machine's
server if it is down). Each test gets its own schema, dropped afterwards, so tests never see each other's events.
"""

from __future__ import annotations

import functools
import os
import uuid

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
TEST_DSN = os.environ.get("MEMLEDGER_TEST_DSN") or DEFAULT_DSN


@functools.lru_cache(maxsize=1)
def unreachable_reason() -> str | None:
    """None if a PostgreSQL server answers on TEST_DSN, else why not (the skip reason)."""
    try:
        import psycopg

        with psycopg.connect(TEST_DSN, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any failure means "no server for the tests"
        return f"no PostgreSQL server at {TEST_DSN} ({type(exc).__name__}: {str(exc).strip()[:120]}); " \
               "start one (.ci/run does) or set MEMLEDGER_TEST_DSN"
    return None


def available() -> bool:
    return unreachable_reason() is None


def require() -> None:
    """For a test that needs the server: skip with the reason when none answers, or fail when
    ``MEMLEDGER_REQUIRE_POSTGRES=1`` (CI sets it in .ci/run: there, a missing server is a failure, not a skip)."""
    import pytest

    reason = unreachable_reason()
    if reason is None:
        return
    if os.environ.get("MEMLEDGER_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"MEMLEDGER_REQUIRE_POSTGRES=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def new_schema() -> str:
    """A schema name no other test uses."""
    return f"t_{uuid.uuid4().hex[:16]}"


def drop_schema(schema: str) -> None:
    """Drop a test's schema and everything in it (tolerates its absence)."""
    import psycopg

    with psycopg.connect(TEST_DSN, autocommit=True) as conn:
        conn.execute("SET lock_timeout = '20s'")
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
