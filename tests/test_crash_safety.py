"""Crash safety: a ``memledger`` process SIGKILLed in the middle of an ingest, or of a blue/green rebuild, loses and
duplicates nothing; after a restart every projection equals a full replay of the log (``verify``).

Why it holds (replay/catchup.py, replay/rebuild.py): a save is one transaction of the log; a projection batch moves
its rows and its tracking row in one transaction of the projections database; a rebuild builds beside the serving
copy and switches in one transaction, and a dead owner's half-built copy is resumed from its own tracking row.
Embedded store (SQLite) only: the test watches the files of the store to kill at the right moment.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memledger import MemoryLedger

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLEDGER_EMBEDDER", "hash")  # no model load in the subprocesses; exact replay


def start(home: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "memledger", "--home", str(home), *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def scalar(db: Path, sql: str) -> int:
    """One number from a store file, on a fresh read-only connection (0 while the table does not exist yet)."""
    if not db.exists():
        return 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        row = conn.execute(sql).fetchone()
        return int(row[0] or 0) if row else 0
    except sqlite3.OperationalError:  # not created yet
        return 0
    finally:
        conn.close()


def kill_when(proc: subprocess.Popen, ready: callable, timeout: float = 120.0) -> None:
    """SIGKILL ``proc`` as soon as ``ready()`` is true (polled every 2 ms)."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, f"finished before the kill: {proc.communicate()}"
        assert time.monotonic() < deadline, "never reached the kill point"
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL


def events(home: Path) -> int:
    return scalar(home / "events.db", "SELECT COUNT(*) FROM stored_events")


def all_verified(home: Path) -> dict[str, bool]:
    with MemoryLedger(home=home) as ml:
        return {r.projection: r.ok for r in ml.verify()}


def test_kill_in_the_middle_of_an_ingest(tmp_path: Path) -> None:
    n = 5000  # 10 batches of 500 (one save and one catch-up each); every fact gets two versions
    commands = tmp_path / "commands.jsonl"
    commands.write_text("".join(
        json.dumps({"user_id": f"u{i % 40}", "key": f"k.{i % 2500}", "value": i, "idempotency_key": f"c{i}"}) + "\n"
        for i in range(n)))
    home = tmp_path / "l"
    proc = start(home, "ingest", str(commands), "--format", "jsonl")
    kill_when(proc, lambda: events(home) >= 1000)
    recorded_before = events(home)
    assert 1000 <= recorded_before < n  # killed mid-way, between two batches' saves
    assert all(all_verified(home).values())  # the projections catch up from wherever the crash left them
    proc = subprocess.run([sys.executable, "-m", "memledger", "--home", str(home), "ingest", str(commands), "--format",
                           "jsonl", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["commands"], report["recorded"], report["replayed"]) == (n, n - recorded_before, recorded_before)
    assert events(home) == n  # nothing lost, nothing recorded twice
    with MemoryLedger(home=home) as ml:
        with ml.db.read() as cur:
            cur.execute(f"SELECT COUNT(*), COUNT(DISTINCT event_id), MAX(position) FROM "
                        f"{ml.history_projection.table('versions')}")
            assert cur.fetchone() == (n, n, n)
        assert ml.profile("u27").facts["k.7"].value == 2507  # command 2507 (user 2507 % 40, key 2507 % 2500)
        assert [r.value for r in ml.history("u20", "k.20")] == [20]
        assert {r.projection: r.ok for r in ml.verify()} == {p.name: True for p in ml.projections}


def test_kill_in_the_middle_of_a_blue_green_rebuild(tmp_path: Path) -> None:
    home = tmp_path / "l"
    n = 3000
    with MemoryLedger(home=home) as ml:
        for start_at in range(0, n, 1000):
            ml.record([{"user_id": f"u{i % 30}", "key": f"k.{i % 300}", "value": i}
                       for i in range(start_at, start_at + 1000)])
        names = [p.name for p in ml.projections]
        before = ml.profile("u3").model_dump(mode="json")
    projections_db = home / "projections.db"
    proc = start(home, "rebuild", "--blue-green", "--batch-size", "50")
    kill_when(proc, lambda: scalar(projections_db,
                                   "SELECT position FROM projection_tracking WHERE projection = 'history__g1'") >= 500)
    assert scalar(projections_db, "SELECT COUNT(*) FROM projection_versions") == 0  # killed before the switch
    assert scalar(projections_db, "SELECT COUNT(*) FROM projection_rebuilds") == len(names)  # the dead owner's
    with MemoryLedger(home=home) as ml:
        # Reads are still served by the old copies, unchanged; a write still works and lands in them.
        assert ml.profile("u3").model_dump(mode="json") == before
        assert ml.profile_projection.suffix == ""
        ml.assert_fact("u3", "k.3", "after the crash")
        assert {r.projection: r.ok for r in ml.verify()} == {n_: True for n_ in names}
    # Restart the rebuild: it takes the dead owner's lock over and resumes its half-built copies.
    proc = subprocess.run([sys.executable, "-m", "memledger", "--home", str(home), "rebuild", "--blue-green", "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["resumed"], report["serving"], report["position"]) == (
        sorted(names), {n_: "g1" for n_ in names}, n + 1)
    assert 0 < report["events"] < n + 1  # resumed, not started over
    with MemoryLedger(home=home) as ml:
        assert ml.profile("u3").facts["k.3"].value == "after the crash"
        with ml.db.read() as cur:
            cur.execute(f"SELECT COUNT(*), COUNT(DISTINCT event_id) FROM {ml.history_projection.table('versions')}")
            assert cur.fetchone() == (n + 1, n + 1)
            cur.execute("SELECT projection FROM projection_tracking ORDER BY projection")
            assert [r[0] for r in cur.fetchall()] == sorted(f"{n_}__g1" for n_ in names)
            cur.execute("SELECT COUNT(*) FROM projection_rebuilds")
            assert cur.fetchone()[0] == 0
        assert {r.projection: r.ok for r in ml.verify()} == {n_: True for n_ in names}
    assert events(home) == n + 1
