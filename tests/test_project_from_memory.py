"""A command's events are projected from memory, not read back from the log, with the same rows."""

from __future__ import annotations

from typing import Any

import pytest

from memledger import MemoryLedger
from replay.bulk import from_memory


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLEDGER_EMBEDDER", "hash")


class _Ev:
    def __init__(self, micros: int) -> None:
        from datetime import datetime, timedelta, timezone

        self.timestamp = datetime(2024, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=micros)


def test_from_memory_serves_only_a_gap_free_run_from_the_start():
    from ledger.timeutil import to_micros

    recent = [(5, _Ev(30)), (6, _Ev(10)), (7, _Ev(40))]
    base = to_micros(_Ev(0).timestamp)
    events, recorded = from_memory(recent, 5, 7, 100, base)
    # positions as given; system time made monotonic along them (6 keeps 5's time, as decode does)
    assert [(le.position, le.recorded_at - base) for le in events] == [(5, 30), (6, 30), (7, 40)]
    assert recorded - base == 40
    assert [le.position for le in from_memory(recent, 6, 7, 1, base)[0]] == [6]  # limit
    assert [le.position for le in from_memory(recent, 5, 6, 100, base)[0]] == [5, 6]  # stop
    assert from_memory(recent, 4, 7, 100, base) is None  # position 4 is not in memory: read the log
    assert from_memory(recent, 5, 8, 100, base) is None  # nor 8
    assert from_memory([(5, _Ev(1)), (7, _Ev(2))], 5, 7, 100, base) is None  # a gap
    assert from_memory(None, 5, 7, 100, base) is None and from_memory([], 5, 7, 100, base) is None


def _count_reads(ml: MemoryLedger, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = ml.app.recorder.select_notifications

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(ml.app.recorder, "select_notifications", counting)
    return calls


@pytest.mark.parametrize("n", [1, 3, 25])  # per-event catch-up, and the bulk writers (>= catchup.BULK_MIN)
def test_record_projects_its_events_without_reading_the_log(fresh_ledger: MemoryLedger,
                                                            monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    ml = fresh_ledger
    ml.record([{"user_id": "u1", "key": "preference.drink", "value": "tea", "observed_at": "2024-01-01T09:00:00Z"}])
    ml.profile("u1")  # every projection at the head: the next record's catch-up starts right after it
    reads = _count_reads(ml, monkeypatch)
    receipts = ml.record(
        [{"user_id": "u1", "key": "preference.drink", "value": "coffee", "observed_at": "2024-02-01T09:00:00Z"}]
        + [{"user_id": f"u{i % 3}", "key": f"note.n{i}", "value": i, "text": f"note {i}"} for i in range(n - 1)])
    assert reads == []  # projected from memory
    assert [r.position for r in receipts] == list(range(2, n + 2))
    monkeypatch.undo()
    fact = ml.profile("u1").facts["preference.drink"]
    assert (fact.value, fact.version) == ("coffee", 2)
    assert [(h.version, h.status) for h in ml.history("u1", "preference.drink")] == [(1, "superseded"),
                                                                                     (2, "current")]
    assert [(r.projection, r.ok) for r in ml.verify()] == [(p.name, True) for p in ml.projections]


@pytest.mark.parametrize("n", [1, 25])
def test_the_first_record_into_a_fresh_store_projects_from_memory(fresh_ledger: MemoryLedger,
                                                                  monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """A fresh store's first catch-up takes the bulk path for copies at position 0; it read the command's own
    events back from the log (an ingest into a new store decoded every fact it had just saved)."""
    ml = fresh_ledger
    reads = _count_reads(ml, monkeypatch)
    receipts = ml.record([{"user_id": f"u{i % 3}", "key": f"note.n{i}", "value": i, "text": f"note {i}"}
                          for i in range(n)])
    assert reads == []
    assert [r.position for r in receipts] == list(range(1, n + 1))
    monkeypatch.undo()
    assert ml.profile("u0").facts["note.n0"].value == 0
    assert [(r.projection, r.ok) for r in ml.verify()] == [(p.name, True) for p in ml.projections]


def test_a_gap_before_the_commands_events_reads_the_log(fresh_ledger: MemoryLedger,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # another writer's event lands between the projections' position and this command's: it is read from the log
    ml = fresh_ledger
    ml.record([{"user_id": "u1", "key": "a", "value": 1}])
    ml.app.execute([ml_command("u2", "b", 2)])  # saved, not projected (as a second process would)
    reads = _count_reads(ml, monkeypatch)
    ml.record([{"user_id": "u1", "key": "a", "value": 3}])
    assert reads != []
    monkeypatch.undo()
    assert ml.profile("u2").facts["b"].value == 2 and ml.profile("u1").facts["a"].value == 3
    assert all(r.ok for r in ml.verify())


def ml_command(user_id: str, key: str, value: Any) -> Any:
    from ledger.schemas import validate_command

    return validate_command({"op": "assert", "user_id": user_id, "key": key, "value": value})


@pytest.mark.parametrize("n", [1, 30])  # per-event catch-up, and the bulk writers
def test_session_commands_project_their_events_without_reading_the_log(fresh_ledger: MemoryLedger,
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       n: int) -> None:
    """Messages (an ingest's turns) are projected from memory too, the implicit SessionStarted included; a batch of
    new messages learns which streams exist in one query instead of loading each (ledger/sessions.py)."""
    ml = fresh_ledger
    ml.record([{"user_id": "u1", "key": "a", "value": 1}])
    ml.profile("u1")
    ml.log_message("u1", "s0", role="user", message_id="m0", text="hello")  # a message stream that exists
    reads = _count_reads(ml, monkeypatch)
    loads: list[Any] = []
    original_get = ml.app.repository.get
    monkeypatch.setattr(ml.app.repository, "get", lambda *a, **k: loads.append(a) or original_get(*a, **k))
    receipts = ml.record_session(
        [{"op": "log", "user_id": "u1", "session_id": "s1", "role": "user", "message_id": f"m{i}",
          "text": f"turn {i}"} for i in range(n)]
        + [{"op": "log", "user_id": "u1", "session_id": "s0", "role": "user", "message_id": "m0", "text": "hello"}])
    assert reads == []
    if n > 1:
        assert len(loads) == 3  # the two sessions and the one message that exists, not every message
    assert [r.replayed for r in receipts] == [False] * n + [True]
    monkeypatch.undo()
    assert [m["text"] for m in ml.messages("u1", "s1")] == [f"turn {i}" for i in range(n)]
    assert [(r.projection, r.ok) for r in ml.verify()] == [(p.name, True) for p in ml.projections]
