"""Projection workers: ``memledger project --follow`` in its own process; receipts give read-your-writes across
processes (writers open the ledger with ``projection_mode="worker"``). Runs on both backends (LISTEN/NOTIFY on
PostgreSQL, polling on SQLite)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from memledger import MemoryLedger
from ledger.errors import BadInput, NotCaughtUp
from replay.follow import follow
from tests.conftest import CLI, ROOT


@pytest.fixture
def worker_cli(store_args):
    """The CLI of a writer/reader process in worker mode."""
    c = CLI(store_args)
    c.flags = [*c.flags, "--projection-mode", "worker"]
    return c


def start_worker(store_args) -> subprocess.Popen:
    c = CLI(store_args)
    proc = subprocess.Popen([sys.executable, "-m", "memledger", *c.flags, "project", "--follow", "--json"],
                            cwd=ROOT, env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Ready once it announces itself on stderr (it has caught up and is listening).
    line = proc.stderr.readline()
    assert line.startswith("following the log (projections at "), line
    return proc


def stop_worker(proc: subprocess.Popen) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    return proc.returncode, out


def test_second_process_reads_its_writes_through_a_receipt(store_args, worker_cli):
    worker = start_worker(store_args)
    try:
        code, out, err = worker_cli("assert", "u1", "preference.drink", "tea", "--json")
        assert code == 0, err
        first = json.loads(out)
        code, out, err = worker_cli("assert", "u1", "preference.drink", "coffee", "--json")
        assert code == 0, err
        second = json.loads(out)
        assert (first["position"], second["position"], second["effect"]) == (1, 2, "supersede")
        # Another process, given the receipt's position, never answers from a projection behind it.
        prof = worker_cli.json("profile", "u1", "--after", str(second["position"]))
        assert {k: (f["value"], f["version"]) for k, f in prof["facts"].items()} == {"preference.drink": ("coffee", 2)}
        hist = worker_cli.json("history", "u1", "preference.drink", "--after", str(second["position"]))
        assert [(h["value"], h["status"], h["position"]) for h in hist] == [
            ("tea", "superseded", 1), ("coffee", "current", 2)]
        # the time-travel verbs take the receipt too
        now = worker_cli.json("true-at", "u1", "--valid-at", "2999-01-01T00:00:00Z", "--after", str(second["position"]))
        assert {k: (f["value"], f["version"]) for k, f in now["facts"].items()} == {"preference.drink": ("coffee", 2)}
        aud = worker_cli.json("audit", "u1", "--after", str(second["position"]))
        assert [e["position"] for e in aud["facts"]["preference.drink"]["chain"]] == [1, 2]
        ctx = worker_cli.json("context", "u1", "--after", str(second["position"]))
        assert [line.split(" (")[0] for line in ctx["sections"][0]["lines"]] == ["- preference.drink: coffee"]
    finally:
        code, out = stop_worker(worker)
    assert (code, json.loads(out)) == (0, {"position": 2})


def test_read_with_receipt_times_out_clearly_without_a_worker(store_args, worker_cli):
    r = json.loads(worker_cli("assert", "u1", "preference.drink", "tea", "--json")[1])
    code, out, err = worker_cli("profile", "u1", "--after", str(r["position"]), "--timeout", "0.3")
    assert (code, out) == (1, "")
    assert err.startswith("error: projections behind position 1 after 0.3s: profile at 0, history at 0, ")
    assert "; is `memledger project --follow` running on this store?" in err
    assert "Traceback" not in err
    code, out, err = worker_cli("context", "u1", "--after", str(r["position"]), "--timeout", "0.3")
    assert (code, out) == (1, "")
    assert err.startswith("error: projections behind position 1 after 0.3s: profile at 0")


@pytest.mark.parametrize("args, field", [
    (["profile", "u1", "--after", "-1"], "after: position -1 is negative"),
    (["profile", "u1", "--after", "7"], "after: position 7 is beyond the head of this store's log (1)"),
    (["history", "u1", "--after", "7"], "after: position 7 is beyond the head of this store's log (1)"),
    (["context", "u1", "--after", "7"], "after: position 7 is beyond the head of this store's log (1)"),
    (["believed", "u1", "--as-of", "2024-01-01T00:00:00Z", "--after", "7"],
     "after: position 7 is beyond the head of this store's log (1)"),
    (["diff", "u1", "--from", "2024-01-01T00:00:00Z", "--to", "2024-02-01T00:00:00Z", "--after", "-1"],
     "after: position -1 is negative"),
    (["project", "--interval", "0"], "--interval: 0.0 is not a positive number of seconds"),
])
def test_bad_read_positions_exit_2_and_write_nothing(store_args, worker_cli, args, field):
    worker_cli("assert", "u1", "preference.drink", "tea")
    code, out, err = worker_cli(*args)
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {field}")
    with MemoryLedger(**store_args) as ml:  # inline: catches up and shows exactly the one write
        assert [(h.value, h.position) for h in ml.history("u1")] == [("tea", 1)]


def test_unknown_projection_mode_exits_2(cli):
    code, out, err = cli("--projection-mode", "lazy", "profile", "u1")
    assert (code, out) == (2, "")
    assert err.startswith("error: projection_mode: 'lazy' is not a projection mode")


def test_worker_mode_writes_do_not_project_in_process(store_args):
    with MemoryLedger(**store_args, projection_mode="worker") as ml:
        r = ml.assert_fact("u1", "preference.drink", "tea")
        assert (r.position, ml.reached()) == (1, 0)
        with pytest.raises(NotCaughtUp, match=r"^projections behind position 1 after 0.05s: profile at 0, "):
            ml.profile("u1", after=r, timeout=0.05)
        with pytest.raises(NotCaughtUp, match=r"^projections behind position 1 after 0.05s: profile at 0, "):
            ml.context("u1", after=r, timeout=0.05)
        assert ml.profile("u1").facts == {}  # no receipt: answers from the projection as the worker left it
        ml.catch_up()  # what `memledger project` (without --follow) does
        assert ml.profile("u1", after=r, timeout=0).facts["preference.drink"].value == "tea"
        assert ml.context("u1", after=r, timeout=0).sections[0].lines[0].startswith("- preference.drink: tea (")


def test_follow_thread_serves_receipts_and_idempotent_retries(store_args):
    stop = threading.Event()
    with MemoryLedger(**store_args) as projector, MemoryLedger(**store_args, projection_mode="worker") as writer:
        t = threading.Thread(target=follow, args=(projector, stop), kwargs={"interval": 0.02})
        t.start()
        try:
            receipts = writer.record([{"user_id": "u1", "key": f"hobby.h{i}", "value": i} for i in range(5)])
            assert [r.position for r in receipts] == [1, 2, 3, 4, 5]
            prof = writer.profile("u1", after=receipts, timeout=10)
            assert {k: f.value for k, f in prof.facts.items()} == {f"hobby.h{i}": i for i in range(5)}
            first = writer.assert_fact("u2", "preference.drink", "tea", idempotency_key="turn-1")
            again = writer.assert_fact("u2", "preference.drink", "tea", idempotency_key="turn-1")
            assert (again.replayed, again.event_id, again.position) == (True, first.event_id, 6)
        finally:
            stop.set()
            t.join(timeout=10)
    assert not t.is_alive()


def test_wait_for_refuses_a_position_of_another_store(fresh_ledger):
    fresh_ledger.assert_fact("u1", "preference.drink", "tea")
    with pytest.raises(BadInput) as exc:
        fresh_ledger.wait_for(2)
    assert (exc.value.field, exc.value.problem) == ("after", "position 2 is beyond the head of this store's log (1)")
    assert fresh_ledger.wait_for(1) == 1


def test_project_once_catches_up_and_reports_the_position(store_args, worker_cli):
    worker_cli("assert", "u1", "preference.drink", "tea")
    worker_cli("assert", "u1", "preference.food", "rice")
    assert worker_cli.json("project") == {"position": 2}
    prof = worker_cli.json("profile", "u1")  # worker mode, no --after: the projections as last caught up
    assert {k: f["value"] for k, f in prof["facts"].items()} == {"preference.drink": "tea", "preference.food": "rice"}
    code, out, _ = worker_cli("project")
    assert (code, out) == (0, "projections at position 2\n")


def test_a_wait_names_only_the_projections_that_lag(store_args):
    # Only the deferred vectors projection behind: the message names it alone (it used to say "projections reached
    # position 0, not 1", as if nothing had been projected).
    with MemoryLedger(**store_args, projection_mode="worker") as ml:
        r = ml.assert_fact("u1", "preference.drink", "tea")
        ml.catch_up(deferred=False)
        assert ml.positions() == {"profile": 1, "history": 1, "disclosures": 1, "state_cards": 1, "messages": 1,
                                  "summaries": 1, "relations": 1, "vectors": 0}
        with pytest.raises(NotCaughtUp) as exc:
            ml.wait_for(r, timeout=0.05)
        assert str(exc.value).startswith("projections behind position 1 after 0.05s: vectors at 0; is `memledger")
