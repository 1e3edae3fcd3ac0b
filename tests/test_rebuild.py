"""``memledger rebuild [PROJECTION ...] [--blue-green]``: rebuild from position 0 while the old copy keeps serving.

Runs on every backend of tests/conftest.py (SQLite, and PostgreSQL when a server answers).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from memledger import MemoryLedger
from ledger.errors import BadInput
from replay.rebuild import RebuildInProgress
from replay.verify import checksum

DRINKS = ["tea", "coffee", "matcha", "water", "juice"]


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    # The vectors projection embeds with the deterministic test double (no model load; replay is bit-exact).
    monkeypatch.setenv("MEMLEDGER_EMBEDDER", "hash")


def fill(ml: MemoryLedger, users: int = 6) -> None:
    """30 events: per user five changes of mind on one key, then a correction and a retraction elsewhere."""
    for u in range(users):
        ml.record([{"user_id": f"u{u}", "key": "preference.drink", "value": d} for d in DRINKS[:3]])
        ml.assert_fact(f"u{u}", "profile.birth_year", 1990)
        ml.correct_fact(f"u{u}", "profile.birth_year", 1995, reason="typo")


def sums(ml: MemoryLedger) -> dict[str, str]:
    ml.catch_up()  # every projection, the deferred vectors projection included
    with ml.db.read() as cur:
        return {p.name: checksum(cur, p) for p in ml.projections}


def bookkeeping(ml: MemoryLedger) -> dict[str, Any]:
    """Everything a refused rebuild must leave unchanged."""
    with ml.db.read() as cur:
        out = {}
        for table in ("projection_versions", "projection_rebuilds", "projection_tracking"):
            cur.execute(f"SELECT * FROM {table} ORDER BY 1")
            out[table] = [tuple(r) for r in cur.fetchall()]
    out["head"] = ml._head()
    return out


def tables(ml: MemoryLedger) -> set[str]:
    with ml.db.read() as cur:
        if ml.db.dialect == "sqlite":
            cur.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        else:
            cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")
        return {r[0] for r in cur.fetchall() if r[0].startswith(("profile_", "history_"))}


def test_blue_green_switches_and_drops_the_old_copy(fresh_ledger: MemoryLedger) -> None:
    fill(fresh_ledger)
    before = sums(fresh_ledger)
    seen: list[tuple[int, int]] = []
    report = fresh_ledger.rebuild(["profile", "history"], blue_green=True, batch_size=7,
                                  on_progress=lambda pos, head: seen.append((pos, head)))
    assert (report.mode, report.events, report.position) == ("blue-green", 30, 30)
    assert report.serving == {"profile": "g1", "history": "g1"}
    assert seen == [(7, 30), (14, 30), (21, 30), (28, 30), (30, 30), (30, 30)]
    assert sums(fresh_ledger) == before
    assert tables(fresh_ledger) == {"profile_facts__g1", "history_versions__g1", "history_timeline__g1"}
    assert fresh_ledger.profile("u3").facts["preference.drink"].value == "matcha"
    # A second rebuild goes to g2 and drops g1; the ledger keeps working on it.
    assert fresh_ledger.rebuild(["profile"], blue_green=True).serving == {"profile": "g2"}
    assert "profile_facts__g1" not in tables(fresh_ledger) and "profile_facts__g2" in tables(fresh_ledger)
    fresh_ledger.assert_fact("u3", "preference.drink", "water")
    assert fresh_ledger.profile("u3").facts["preference.drink"].value == "water"
    assert all(r.ok for r in fresh_ledger.verify())


def test_reads_and_writes_are_served_by_the_old_copy_until_the_switch(store_args: dict[str, Any]) -> None:
    with MemoryLedger(**store_args) as ml, MemoryLedger(**store_args) as other:
        fill(ml)
        during: list[Any] = []

        def progress(position: int, head: int) -> None:
            if during:
                return
            # Mid-rebuild, another ledger on the store reads and writes: served by the serving (old) copy.
            during.append(other.profile("u1").facts["preference.drink"].value)
            during.append(other.profile_projection.suffix)
            receipt = other.assert_fact("u1", "preference.drink", "water")
            during.append(other.profile("u1").facts["preference.drink"].value)
            during.append(receipt.position)

        report = ml.rebuild(blue_green=True, batch_size=5, on_progress=progress)
        assert during == ["matcha", "", "water", 31]
        assert report.position == 31 and report.events == 31  # the write during the build made it into g1
        assert other.profile("u1").facts["preference.drink"].value == "water"
        assert other.profile_projection.suffix == "g1"  # the other process follows the switch
        assert [r.value for r in other.history("u1", "preference.drink")] == ["tea", "coffee", "matcha", "water"]


def test_second_rebuild_of_the_same_projection_fails_clearly(store_args: dict[str, Any]) -> None:
    with MemoryLedger(**store_args) as ml, MemoryLedger(**store_args) as other:
        fill(ml, users=2)
        errors: list[str] = []

        def progress(position: int, head: int) -> None:
            if not errors:
                before = bookkeeping(other)
                with pytest.raises(RebuildInProgress) as exc:
                    other.rebuild(["history"], blue_green=True)
                errors.append(str(exc.value))
                assert bookkeeping(other) == before  # refused before writing anything

        ml.rebuild(blue_green=True, batch_size=3, on_progress=progress)
        assert errors == [f"PROJECTION: a rebuild of 'history' is already running (pid {os.getpid()} on "
                          f"{os.uname().nodename}, since {errors[0].split('since ')[1]}"]
        assert "wait for it to finish" in errors[0]
        assert all(r.ok for r in ml.verify())


def test_cli_refuses_while_a_live_process_holds_the_lock(store_args: dict[str, Any], cli: Any) -> None:
    with MemoryLedger(**store_args) as ml:
        fill(ml, users=1)
        with ml.db.transaction() as cur:  # this test process plays the running rebuild
            cur.execute("INSERT INTO projection_rebuilds VALUES ('profile', 'x', ?, ?, 'g1', 'blue-green', 0, 0)",
                        (os.uname().nodename, os.getpid()))
        before = bookkeeping(ml)
    code, out, err = cli("rebuild", "profile", "--blue-green")
    assert code == 1, err
    assert f"a rebuild of 'profile' is already running (pid {os.getpid()}" in err
    assert "Traceback" not in err
    code, out, err = cli("rebuild", "profile", "--blue-green", "--json")
    last = json.loads(err.strip().splitlines()[-1])
    assert (code, last["exit"], last["error"]["field"]) == (1, 1, "PROJECTION")
    assert last["error"]["problem"].startswith("a rebuild of 'profile' is already running")
    assert last["error"]["fix"].startswith("wait for it to finish")
    with MemoryLedger(**store_args) as ml:
        assert bookkeeping(ml) == before


def test_a_dead_owner_is_taken_over(store_args: dict[str, Any], cli: Any) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    with MemoryLedger(**store_args) as ml:
        fill(ml, users=1)
        with ml.db.transaction() as cur:
            cur.execute("INSERT INTO projection_rebuilds VALUES ('profile', 'x', ?, ?, 'g1', 'blue-green', 0, 0)",
                        (os.uname().nodename, int(dead.stdout)))
    report = cli.json("rebuild", "profile", "--blue-green")
    assert report == {"projections": ["profile"], "mode": "blue-green", "events": 5, "position": 5,
                      "seconds": report["seconds"], "events_per_second": report["events_per_second"],
                      "serving": {"profile": "g1"}, "resumed": ["profile"], "model_seconds": 0.0}
    with MemoryLedger(**store_args) as ml:
        assert bookkeeping(ml)["projection_rebuilds"] == []
        assert all(r.ok for r in ml.verify())


def test_in_place_rebuild(fresh_ledger: MemoryLedger) -> None:
    fill(fresh_ledger, users=3)
    before = sums(fresh_ledger)
    report = fresh_ledger.rebuild(batch_size=4)
    assert (report.mode, report.events, report.serving) == (
        "in-place", 15, {p.name: "" for p in fresh_ledger.projections})
    assert sums(fresh_ledger) == before
    assert bookkeeping(fresh_ledger)["projection_rebuilds"] == []


def test_cli_rebuild_text_and_json(store_args: dict[str, Any], cli: Any) -> None:
    with MemoryLedger(**store_args) as ml:
        fill(ml, users=2)
        names = [p.name for p in ml.projections]
    code, out, err = cli("rebuild", "--blue-green")
    assert code == 0, err
    assert out.startswith(f"rebuilt {', '.join(names)} (blue-green): 10 events to position 10 in ")
    assert out.rstrip().endswith("serving " + ", ".join(f"{n} -> g1" for n in names))
    data = cli.json("rebuild", "history")
    assert {k: data[k] for k in ("projections", "mode", "events", "position", "serving", "resumed")} == {
        "projections": ["history"], "mode": "in-place", "events": 10, "position": 10,
        "serving": {"history": "g1"}, "resumed": []}


@pytest.mark.parametrize("args, message", [
    (["rebuild", "profle"], "PROJECTION: unknown projection 'profle' (choose from: profile, history"),
    (["rebuild", "--blue-green", "--batch-size", "0"], "--batch-size: 0 is not a positive integer"),
])
def test_bad_input_exits_2_and_changes_nothing(store_args: dict[str, Any], cli: Any, args: list[str],
                                                message: str) -> None:
    with MemoryLedger(**store_args) as ml:
        fill(ml, users=1)
        before = bookkeeping(ml), tables(ml)
    code, out, err = cli(*args)
    assert code == 2
    assert message in err and "Traceback" not in err
    with MemoryLedger(**store_args) as ml:
        assert (bookkeeping(ml), tables(ml)) == before


def test_api_refuses_unknown_projection(fresh_ledger: MemoryLedger) -> None:
    with pytest.raises(BadInput) as exc:
        fresh_ledger.rebuild(["vectors2"])
    assert exc.value.field == "PROJECTION"


def test_rebuild_loads_the_model_before_its_clock_starts(store_args):
    """The rebuild's rate is the replay's: a model load is reported apart as model_seconds."""
    import time as _time

    from projections.retrieval.embedders import HashingEmbedder

    class SlowLoading(HashingEmbedder):
        loads = 0

        @property
        def dim(self):  # the first use loads "the model"
            if not SlowLoading.loads:
                _time.sleep(0.3)
            SlowLoading.loads += 1
            return self._dim

        @dim.setter
        def dim(self, value):
            self._dim = value

    with MemoryLedger(**store_args, embedder=SlowLoading()) as ml:
        ml.assert_fact("u1", "preference.drink", "tea")
        report = ml.rebuild(["vectors"], blue_green=True)
    assert report.model_seconds >= 0.3
    assert report.as_json()["model_seconds"] == round(report.model_seconds, 3)
    assert SlowLoading.loads >= 1 and report.events == 1


def test_default_batch_is_what_a_share_of_the_free_memory_holds(fresh_ledger: MemoryLedger,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a batch size a rebuild flushes as many events at once as a quarter of the available memory holds
    (fewer flushes, fewer UPDATEs of rows an earlier flush wrote), never fewer than BATCH nor more than MAX_BATCH."""
    from replay import rebuild as rb

    for free, expected in [(0, rb.BATCH), (10**9, 10**9 // 4 // rb.BYTES_PER_EVENT), (10**15, rb.MAX_BATCH)]:
        monkeypatch.setattr(rb, "_available_memory", lambda free=free: free)
        assert rb.default_batch() == expected
    assert rb.BATCH < 10**9 // 4 // rb.BYTES_PER_EVENT < rb.MAX_BATCH
    assert rb._available_memory() > 0  # read from this machine
    fill(fresh_ledger, users=2)
    flushes: list[int] = []
    monkeypatch.setattr(rb, "default_batch", lambda: 4)
    fresh_ledger.rebuild(["history"], blue_green=True, on_progress=lambda position, head: flushes.append(position))
    assert flushes == [4, 8, 10, 10]  # three flushes of the bulk pass, then the switch
