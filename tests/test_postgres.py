"""Backend by configuration: ``--dsn`` / ``$MEMLEDGER_DSN`` selects eventsourcing.postgres and a projections schema.

The behaviour of the ledger on PostgreSQL is proven by the whole suite running on both backends (tests/conftest.py);
this file covers what only the configuration decides: the settings mapping, refusals, the schema layout, isolation
between schemas, and portable projection SQL.
"""

from __future__ import annotations

import pytest

from memledger import MemoryLedger
from ledger.config import Settings
from ledger.errors import BadInput, MemledgerError
from tests import pg


def needs_pg(test):
    """A test on the server itself: no server is a skip with the reason, or a failure under
    ``MEMLEDGER_REQUIRE_POSTGRES=1`` (tests/pg.py ``require``)."""
    return pytest.mark.postgres(pytest.mark.usefixtures("postgres_server")(test))


def test_dsn_maps_to_eventsourcing_postgres_env():
    s = Settings.resolve(dsn="postgresql://alice:p%40ss@db.example:6543/ledgers", schema="agent_7")
    assert (s.home, s.schema) == (None, "agent_7")
    assert s.event_store_env() == {
        "PERSISTENCE_MODULE": "eventsourcing.postgres",
        "POSTGRES_DBNAME": "ledgers",
        "POSTGRES_HOST": "db.example",
        "POSTGRES_PORT": "6543",
        "POSTGRES_USER": "alice",
        "POSTGRES_PASSWORD": "p@ss",
        "POSTGRES_SCHEMA": "agent_7",
        "POSTGRES_POOL_SIZE": "5",
        "POSTGRES_MAX_OVERFLOW": "10",
        "APPLICATION_RECORDER_TOPIC": "ledger.recorders_postgres:LedgerPostgresRecorder",
    }


def test_env_dsn_selects_postgres_and_explicit_home_wins(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMLEDGER_DSN", "postgresql://postgres@127.0.0.1:5432/test")
    monkeypatch.setenv("MEMLEDGER_SCHEMA", "from_env")
    s = Settings.resolve()
    assert (s.dsn, s.home, s.schema) == ("postgresql://postgres@127.0.0.1:5432/test", None, "from_env")
    s = Settings.resolve(home=tmp_path)
    assert (s.dsn, s.home) == (None, tmp_path)


@pytest.mark.parametrize("kwargs, field", [
    ({"dsn": "mysql://root@localhost/x"}, "--dsn"),
    ({"dsn": "postgresql://postgres@127.0.0.1/test", "home": "/tmp/x"}, "--dsn"),
    ({"dsn": "postgresql://postgres@127.0.0.1/test", "schema": "Robert'); DROP"}, "schema"),
    ({"dsn": "postgresql://postgres@127.0.0.1/test", "projection_mode": "lazy"}, "projection_mode"),
])
def test_bad_store_settings_are_refused(kwargs, field, tmp_path):
    with pytest.raises(BadInput) as exc:
        MemoryLedger(**kwargs)
    assert exc.value.field == field


def test_cli_refuses_a_bad_dsn_with_exit_2(cli_any):
    code, out, err = cli_any("--dsn", "mysql://root@localhost/x", "profile", "u1")
    assert (code, out) == (2, "")
    assert "--dsn: 'mysql://root@localhost/x' is not a postgresql:// URL" in err
    assert "Traceback" not in err


def test_cli_unreachable_server_is_a_clear_failure(cli_any):
    code, out, err = cli_any("--dsn", "postgresql://postgres@127.0.0.1:1/test", "profile", "u1")
    assert (code, out) == (1, "")
    assert err.startswith("error: cannot connect to PostgreSQL (")
    assert "is the server up and the --dsn right?" in err
    assert "Traceback" not in err


@pytest.fixture
def cli_any():
    """The CLI without store flags (each test passes its own)."""
    from tests.conftest import run_cli

    return lambda *args: run_cli(args)


@needs_pg
def test_schema_holds_the_log_and_the_projections():
    schema = pg.new_schema()
    try:
        with MemoryLedger(dsn=pg.TEST_DSN, schema=schema) as ml:
            r = ml.assert_fact("u1", "preference.drink", "tea")
            ml.catch_up()  # the deferred vectors projection too (a write does not wait for it)
            projection_tables = {p.table(short) for p in ml.projections for short in p.tables}
            tracked = sorted(p.tracking_name for p in ml.projections)
        import psycopg

        with psycopg.connect(pg.TEST_DSN) as conn:
            tables = [t for (t,) in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY 1", (schema,))]
            (n_events,) = conn.execute(f'SELECT count(*) FROM "{schema}".memledger_events').fetchone()
            tracking = conn.execute(
                f'SELECT projection, position FROM "{schema}".projection_tracking ORDER BY 1').fetchall()
        # The log's table, the tracking table and every projection's tables (other issues add projections).
        assert {"history_timeline", "history_versions", "profile_facts"} <= projection_tables
        assert set(tables) >= projection_tables | {"memledger_events", "projection_tracking"}
        assert (r.position, n_events) == (1, 1)
        assert tracking == [(name, 1) for name in tracked]
    finally:
        pg.drop_schema(schema)


@needs_pg
def test_two_schemas_are_two_ledgers():
    a, b = pg.new_schema(), pg.new_schema()
    try:
        with MemoryLedger(dsn=pg.TEST_DSN, schema=a) as ma, MemoryLedger(dsn=pg.TEST_DSN, schema=b) as mb:
            ma.assert_fact("u1", "preference.drink", "tea")
            mb.assert_fact("u1", "preference.drink", "coffee")
            mb.assert_fact("u1", "preference.drink", "milk")
            assert {k: f.value for k, f in ma.profile("u1").facts.items()} == {"preference.drink": "tea"}
            assert {k: f.value for k, f in mb.profile("u1").facts.items()} == {"preference.drink": "milk"}
            assert [h.position for h in ma.history("u1")] == [1]
            assert [h.position for h in mb.history("u1")] == [1, 2]
    finally:
        pg.drop_schema(a)
        pg.drop_schema(b)


@needs_pg
def test_reopening_a_store_keeps_its_events_and_positions():
    schema = pg.new_schema()
    try:
        with MemoryLedger(dsn=pg.TEST_DSN, schema=schema) as ml:
            ml.assert_fact("u1", "preference.drink", "tea")
        with MemoryLedger(dsn=pg.TEST_DSN, schema=schema) as ml:
            r = ml.assert_fact("u1", "preference.drink", "coffee")
            assert (r.version, r.position, r.effect) == (2, 2, "supersede")
            assert [(h.value, h.status) for h in ml.history("u1")] == [("tea", "superseded"), ("coffee", "current")]
    finally:
        pg.drop_schema(schema)


def test_projection_sql_is_portable(fresh_ledger):
    """Literal '%' survives the ?-to-%s rewrite on PostgreSQL; the same statement answers the same on SQLite."""
    fresh_ledger.assert_fact("u1", "preference.drink", "tea")
    fresh_ledger.assert_fact("u1", "preference.food", "rice")
    with fresh_ledger.db.read() as cur:
        cur.execute("SELECT key FROM profile_facts WHERE user_id = ? AND key LIKE 'preference.d%' ORDER BY key",
                    ("u1",))
        assert cur.fetchall() == [("preference.drink",)]


def test_unreachable_server_raises_memledger_error():
    with pytest.raises(MemledgerError, match=r"^cannot connect to PostgreSQL \("):
        MemoryLedger(dsn="postgresql://postgres@127.0.0.1:1/test")


def test_postgres_variants_skip_with_the_reason_when_no_server_answers():
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    env = dict(os.environ, MEMLEDGER_TEST_DSN="postgresql://postgres@127.0.0.1:1/test")
    env.pop("MEMLEDGER_REQUIRE_POSTGRES", None)  # as outside CI
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                        "tests/test_batch_append.py", "-k", "existing_streams"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 passed, 1 skipped" in p.stdout
    assert "no PostgreSQL server at postgresql://postgres@127.0.0.1:1/test (OperationalError:" in p.stdout
    assert "start one (.ci/run does) or set MEMLEDGER_TEST_DSN" in p.stdout


def test_ci_turns_a_missing_server_into_a_failure():
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    env = dict(os.environ, MEMLEDGER_TEST_DSN="postgresql://postgres@127.0.0.1:1/test", MEMLEDGER_REQUIRE_POSTGRES="1")
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "tests/test_batch_append.py", "-k", "existing_streams"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "1 passed" in p.stdout and "1 error" in p.stdout
    assert "MEMLEDGER_REQUIRE_POSTGRES=1 but no PostgreSQL server at postgresql://postgres@127.0.0.1:1/test" in p.stdout
