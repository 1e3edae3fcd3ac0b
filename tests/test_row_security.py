"""Row-level security on PostgreSQL: a server connected as a role without superuser rights reads, for each request,
only the rows of its API key's users, even when the application's own user check is broken on purpose.

The store's schema is made for the role (``CREATE SCHEMA ... AUTHORIZATION``, docs/postgres.md); the role owns the
tables it creates, and each table with a ``user_id`` column gets a forced ``memledger_users`` policy.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from memledger import MemoryLedger
from memledger.servers.http import create_app
from memledger.servers.keys import APIKeyStore, Principal
from memledger.servers.ops import Service
from projections.db import request_scope
from tests import pg

pytestmark = pytest.mark.postgres

ROLE = "memledger_rls_test"
BASE = "http://127.0.0.1:8000"  # the MCP endpoint checks the Host header against 127.0.0.1:*
SECRET = "bluefalcon-of-u2"


def role_dsn() -> str:
    """TEST_DSN with the test role as the user (the server's trust authentication lets any role in)."""
    import urllib.parse

    url = urllib.parse.urlsplit(pg.TEST_DSN)
    return urllib.parse.urlunsplit(url._replace(netloc=f"{ROLE}@{url.hostname}:{url.port or 5432}"))


@pytest.fixture
def role_store(postgres_server: None) -> Any:
    """(ledger opened as the unprivileged role, schema) on a schema the superuser made for that role."""
    import psycopg

    schema = pg.new_schema()
    with psycopg.connect(pg.TEST_DSN, autocommit=True) as conn:
        conn.execute(f"DO $$ BEGIN CREATE ROLE {ROLE} LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE; "
                     "EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$")
        conn.execute(f'CREATE SCHEMA "{schema}" AUTHORIZATION {ROLE}')
    try:
        with MemoryLedger(dsn=role_dsn(), schema=schema) as ml:
            ml.assert_fact("u1", "preference.drink", "tea", text="I drink green tea")
            ml.assert_fact("u2", "preference.drink", "water", text=f"I only drink water, codename {SECRET}")
            ml.assert_fact("u2", "profile.city", "Oslo", text=f"I live in Oslo {SECRET}")
            ml.log_message("u2", "s1", role="user", text=f"my codename is {SECRET}", message_id="m1")
            yield ml, schema
    finally:
        pg.drop_schema(schema)


def test_the_role_is_not_a_superuser_and_every_user_table_is_forced(role_store: Any) -> None:
    # not held: the register of erased ids, and the key store, which the log's mapper reads for every user
    ml, schema = role_store
    with ml.db.read() as cur:
        cur.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
        assert cur.fetchone() == (False, False)
        cur.execute("SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity FROM pg_class c JOIN pg_namespace n "
                    "ON n.oid = c.relnamespace JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'user_id' "
                    "WHERE n.nspname = ? AND c.relkind = 'r' AND c.relname NOT IN ('erased_subjects', 'user_keys', 'fact_keys')",
                    (schema,))
        rows = cur.fetchall()
    names = {r[0] for r in rows}
    assert {"profile_facts", "history_versions", "messages_log", "vectors_docs", "optout_messages"} <= names
    assert all(r[1] and r[2] for r in rows), [r for r in rows if not (r[1] and r[2])]


def test_a_scoped_read_sees_only_its_users_and_no_scope_setting_sees_nothing(role_store: Any) -> None:
    import psycopg

    ml, schema = role_store
    with request_scope(["u1"]), ml.db.read() as cur:
        cur.execute("SELECT DISTINCT user_id FROM profile_facts")
        assert [r[0] for r in cur.fetchall()] == ["u1"]
    with ml.db.read() as cur:  # the operator (no request): every user
        cur.execute("SELECT DISTINCT user_id FROM profile_facts ORDER BY 1")
        assert [r[0] for r in cur.fetchall()] == ["u1", "u2"]
    # a connection that bypasses ProjectionDB (no setting at all) sees no user's rows
    with psycopg.connect(role_dsn(), autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        assert conn.execute("SELECT count(*) FROM profile_facts").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM messages_log").fetchone() == (0,)
    # the profile read of the Python API, scoped to u1, cannot see u2
    with request_scope(["u1"]):
        assert not ml.profile("u2").facts
    assert {f.value for f in ml.profile("u2").facts.values()} == {"water", "Oslo"}


def test_a_broken_user_check_still_reads_no_other_users_rows(role_store: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    ml, _ = role_store
    secret = APIKeyStore(ml).create(["u1"]).secret
    headers = {"Authorization": f"Bearer {secret}"}
    with TestClient(create_app(Service(ml)), base_url=BASE) as http:
        assert http.get("/v1/users/u2/profile", headers=headers).status_code == 403  # the check, working
        assert "tea" in http.get("/v1/users/u1/profile", headers=headers).text
    # the check broken on purpose: every key holds every user
    monkeypatch.setattr(Principal, "allows", lambda self, user_id: True)
    reads = ["/v1/users/u2/profile", "/v1/users/u2/history", "/v1/users/u2/history/profile.city",
             "/v1/users/u2/believed?as_of=2100-01-01T00:00:00Z", "/v1/users/u2/true-at?valid_at=2100-01-01T00:00:00Z",
             "/v1/users/u2/audit", "/v1/users/u2/search?query=codename", "/v1/users/u2/context?query=codename",
             "/v1/users/u2/sessions", "/v1/users/u2/sessions/s1/messages", "/v1/users/u2/export"]
    with TestClient(create_app(Service(ml)), base_url=BASE) as http:
        for path in reads:
            r = http.get(path, headers=headers)
            assert r.status_code == 200, (path, r.status_code, r.text)
            assert SECRET not in r.text and "Oslo" not in r.text and "water" not in r.text, (path, r.text)
        assert "tea" in http.get("/v1/users/u1/profile", headers=headers).text  # its own user still reads

        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        async def mcp_reads() -> list[str]:
            import httpx

            client = httpx.AsyncClient(transport=httpx.ASGITransport(app=http.app), base_url=BASE, headers=headers)
            out = []
            async with Client(streamable_http_client(BASE + "/mcp", http_client=client)) as c:
                own = await c.call_tool("profile", {"user_id": "u1"})
                assert own.structured_content["facts"]["preference.drink"]["value"] == "tea"
                for tool, args in (("profile", {"user_id": "u2"}), ("history", {"user_id": "u2"}),
                                   ("recall", {"user_id": "u2", "query": "codename"})):
                    r = await c.call_tool(tool, args)
                    assert not r.is_error, (tool, r.content)
                    out.append(json.dumps(r.structured_content) + " ".join(getattr(x, "text", "") for x in r.content))
            return out

        for text in asyncio.run(asyncio.wait_for(mcp_reads(), 60)):
            assert SECRET not in text and "Oslo" not in text and "water" not in text, text


def test_the_operator_verbs_run_as_the_role(role_store: Any) -> None:
    """Rebuild (blue/green copies get the policy too), verify, forget and erase need no superuser."""
    ml, schema = role_store
    ml.rebuild(blue_green=True)
    assert all(r.ok for r in ml.verify()), [r for r in ml.verify() if not r.ok]
    with request_scope(["u1"]):
        assert not ml.profile("u2").facts and ml.profile("u1").facts
    ml.forget("u1", "preference.drink")
    ml.erase("u2")
    with ml.db.read() as cur:
        cur.execute(f"SELECT count(*) FROM {ml.profile_projection.table('facts')} WHERE user_id = 'u2'")
        assert cur.fetchone() == (0,)
        cur.execute("SELECT c.relname, c.relforcerowsecurity FROM pg_class c JOIN pg_namespace n "
                    "ON n.oid = c.relnamespace JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'user_id' "
                    "WHERE n.nspname = ? AND c.relkind = 'r' AND c.relname LIKE '%\\_\\_%'", (schema,))
        copies = cur.fetchall()
    assert len(copies) >= 5 and all(forced for _, forced in copies), copies
