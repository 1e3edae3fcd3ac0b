"""Real races on one fact: threads with their own MemoryLedger on one store. No update is lost."""

from __future__ import annotations

import threading

from memledger import MemoryLedger


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
    # A timeout and abort(): a thread that fails before the barrier must fail the test, not hang it (it did, when
    # opening a fresh store raced; see test_threads_opening_a_fresh_store_together_all_succeed).
    barrier = threading.Barrier(4, timeout=120)
    receipts = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def retry() -> None:
        try:
            with MemoryLedger(**store_args) as ml:
                barrier.wait()
                r = ml.assert_fact("u1", "preference.drink", "tea", idempotency_key="once")
                with lock:
                    receipts.append(r)
        except BaseException as exc:  # reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=retry) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len({r.event_id for r in receipts}) == 1
    assert sum(not r.replayed for r in receipts) == 1
    with MemoryLedger(**store_args) as ml:
        assert len(ml.history("u1")) == 1


def test_threads_opening_a_fresh_store_together_all_succeed(tmp_path):
    """``PRAGMA journal_mode=WAL`` on a new SQLite file fails at once ("database is locked") while another
    connection opens it; eventsourcing and the projections database both issued it, so one of several threads
    opening a fresh store died (it hung the test above). projections/db.py ``use_wal`` retries; 30 rounds of 6."""
    for round_ in range(30):
        home = tmp_path / f"store{round_}"
        barrier = threading.Barrier(6, timeout=120)
        errors: list[BaseException] = []

        def open_and_write(i: int) -> None:
            try:
                barrier.wait()
                with MemoryLedger(home=home) as ml:
                    ml.assert_fact(f"u{i}", "preference.drink", "tea")
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=open_and_write, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == [], errors
        with MemoryLedger(home=home) as ml:
            assert sorted(len(ml.history(f"u{i}")) for i in range(6)) == [1] * 6


def test_a_write_between_the_two_reads_of_the_damage_check_is_no_damage(tmp_path, monkeypatch):
    """Opening a store checks that the projections have not passed the log's end. Another writer may append and
    project between the check's two reads; the projections are read first, so the log read after can only be
    further on. Here the write happens right after the log's end is read, the moment a concurrent opener hit."""
    import replay.events
    from memledger.store import check_log_not_behind

    with MemoryLedger(home=tmp_path / "h") as ml:
        ml.assert_fact("u1", "preference.drink", "tea")
        real = replay.events.max_position

        def head_then_a_write(app):
            head = real(app)
            ml.assert_fact("u2", "preference.drink", "coffee")  # another writer, projected at once
            return head

        monkeypatch.setattr(replay.events, "max_position", head_then_a_write)
        check_log_not_behind(ml.app, ml.db, str(tmp_path / "h" / "events.db"))  # raised StoreDamaged when read the other way round
