"""Real races on one fact: threads with their own MemoryLedger on one store. No update is lost."""

from __future__ import annotations

import threading

from ledger import MemoryLedger


def test_racing_writers_on_one_fact_lose_nothing(store_args):
    n_threads, per_thread = 4, 10
    barrier = threading.Barrier(n_threads)
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        try:
            with MemoryLedger(**store_args) as ml:
                barrier.wait()
                for j in range(per_thread):
                    ml.assert_fact("u1", "counter.value", f"w{i}-{j}")
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    with MemoryLedger(**store_args) as ml:
        ml.assert_fact("u1", "counter.value", "start")
    threads = [threading.Thread(target=writer, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with MemoryLedger(**store_args) as ml:
        rows = ml.history("u1", "counter.value")
        head = ml.profile("u1").facts["counter.value"]
    values = [r.value for r in rows]
    assert len(values) == 1 + n_threads * per_thread
    assert sorted(values[1:]) == sorted(f"w{i}-{j}" for i in range(n_threads) for j in range(per_thread))
    assert [r.version for r in rows] == list(range(1, 2 + n_threads * per_thread))
    assert [r.position for r in rows] == sorted(r.position for r in rows)
    # The head is the last one recorded, and every earlier version is closed.
    assert head.version == rows[-1].version and head.value == rows[-1].value
    assert all(r.status == "superseded" for r in rows[:-1])


def test_concurrent_idempotent_retries_record_one_event(store_args):
    barrier = threading.Barrier(4)
    receipts = []
    lock = threading.Lock()

    def retry() -> None:
        with MemoryLedger(**store_args) as ml:
            barrier.wait()
            r = ml.assert_fact("u1", "preference.drink", "tea", idempotency_key="once")
            with lock:
                receipts.append(r)

    threads = [threading.Thread(target=retry) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({r.event_id for r in receipts}) == 1
    assert sum(not r.replayed for r in receipts) == 1
    with MemoryLedger(**store_args) as ml:
        assert len(ml.history("u1")) == 1
