"""Concurrency proven with real processes (each with threads), on both backends: several OS processes, each
opening its own MemoryLedger on one store, race on the same streams.

* two concurrent asserts of one fact with one idempotency key -> exactly one event;
* 100 asserts for user A interleaved with 100 for user B from several workers -> each user has exactly its own 100;
* many writers on one fact -> every accepted command appears exactly once in history, none lost, versions contiguous.

Workers are started with ``spawn`` (a fresh interpreter: no inherited database connections) and released together
by a barrier once each has opened its ledger, so the writes really overlap.
"""

from __future__ import annotations

import multiprocessing as mp
import threading
from collections import Counter
from typing import Any

import pytest

from memledger import MemoryLedger

CTX = mp.get_context("spawn")
TIMEOUT = 240


def _run_workers(target, store_args: dict[str, Any], jobs: list[Any], threads: int = 1) -> list[Any]:
    """Run ``target(ml, job)`` for each job: one process per job, ``threads`` threads each; returns results."""
    barrier = CTX.Barrier(len(jobs) * threads)
    results = CTX.Queue()
    procs = [CTX.Process(target=_worker, args=(target, store_args, job, threads, barrier, results))
             for job in jobs]
    for p in procs:
        p.start()
    out = [results.get(timeout=TIMEOUT) for _ in range(len(jobs) * threads)]
    for p in procs:
        p.join(timeout=TIMEOUT)
    errors = [r for r in out if isinstance(r, str) and r.startswith("ERROR")]
    assert errors == []
    assert [p.exitcode for p in procs] == [0] * len(procs)
    return out


def _worker(target, store_args, job, threads, barrier, results) -> None:
    def one(t: int) -> None:
        try:
            with MemoryLedger(**store_args) as ml:
                barrier.wait(timeout=TIMEOUT)
                results.put(target(ml, job, t))
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, with where it happened
            import traceback

            results.put(f"ERROR {type(exc).__name__}: {exc}\n{traceback.format_exc()}")

    ts = [threading.Thread(target=one, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


@pytest.fixture
def store(store_args):
    # Create the store once before the workers open it (also proves reopening is safe).
    with MemoryLedger(**store_args):
        pass
    return store_args


def _same_idempotent_assert(ml: MemoryLedger, job: int, thread: int) -> tuple[str, bool, int, int]:
    r = ml.assert_fact("u1", "preference.drink", "tea", idempotency_key="turn-42")
    return (r.event_id, r.replayed, r.version, r.position)


def test_two_processes_same_idempotency_key_record_exactly_one_event(store):
    results = _run_workers(_same_idempotent_assert, store, jobs=[0, 1])
    assert len({event_id for event_id, *_ in results}) == 1
    assert sorted(replayed for _, replayed, _, _ in results) == [False, True]
    assert {(v, p) for _, _, v, p in results} == {(1, 1)}
    with MemoryLedger(**store) as ml:
        rows = ml.history("u1")
        assert ml._head() == 1  # the log itself holds one event
    assert [(r.value, r.version, r.event_id) for r in rows] == [("tea", 1, results[0][0])]


def _two_users(ml: MemoryLedger, job: list[int], thread: int) -> list[tuple[str, str, int]]:
    seen = []
    for i in job:  # A, B, A, B, ... interleaved within each worker, and across workers
        for user in ("A", "B"):
            r = ml.assert_fact(user, f"note.n{i:03d}", f"{user}-{i}")
            seen.append((user, r.key, r.position))
    return seen


def test_interleaved_users_each_see_exactly_their_own_100(store):
    jobs = [list(range(w, 100, 4)) for w in range(4)]  # 4 processes x 25 indexes x 2 users = 200 asserts
    results = _run_workers(_two_users, store, jobs=jobs)
    positions = [p for seen in results for _, _, p in seen]
    assert sorted(positions) == list(range(1, 201))  # 200 distinct log positions, no gaps, none lost
    with MemoryLedger(**store) as ml:
        for user in ("A", "B"):
            facts = ml.profile(user).facts
            assert {k: f.value for k, f in facts.items()} == {f"note.n{i:03d}": f"{user}-{i}" for i in range(100)}
            rows = ml.history(user)
            assert len(rows) == 100
            assert {r.value for r in rows} == {f"{user}-{i}" for i in range(100)}
            assert {(r.version, r.kind) for r in rows} == {(1, "asserted")}


def _hammer_one_fact(ml: MemoryLedger, job: int, thread: int) -> list[tuple[str, str, int, bool]]:
    out = []
    for j in range(6):
        r = ml.assert_fact("u1", "counter.value", f"p{job}-t{thread}-{j}")
        out.append((r.event_id, f"p{job}-t{thread}-{j}", r.version, r.replayed))
    return out


def test_many_writers_on_one_fact_lose_nothing(store):
    # 3 processes x 2 threads x 6 asserts = 36 commands racing on one stream.
    results = _run_workers(_hammer_one_fact, store, jobs=[0, 1, 2], threads=2)
    accepted = [r for rs in results for r in rs]
    assert len(accepted) == 36 and not any(replayed for *_, replayed in accepted)
    with MemoryLedger(**store) as ml:
        rows = ml.history("u1", "counter.value")
        head = ml.profile("u1").facts["counter.value"]
    # Every accepted command appears exactly once, with the version its receipt gave.
    assert Counter(r.event_id for r in rows) == Counter(e for e, *_ in accepted)
    assert {(r.event_id, r.value, r.version) for r in rows} == {(e, v, ver) for e, v, ver, _ in accepted}
    assert [r.version for r in rows] == list(range(1, 37))  # contiguous, in log order
    assert (head.version, head.value) == (36, rows[-1].value)
    assert [r.status for r in rows] == ["superseded"] * 35 + ["current"]


def _open_fresh(ml: MemoryLedger, job: int, thread: int) -> int:
    return ml.assert_fact(f"u{job}", "preference.drink", "tea").position


def test_processes_opening_a_fresh_store_at_once(store_args):
    """No store is created beforehand: four processes create the schema/tables concurrently, then write."""
    results = _run_workers(_open_fresh, store_args, jobs=[0, 1, 2, 3])
    assert sorted(results) == [1, 2, 3, 4]
