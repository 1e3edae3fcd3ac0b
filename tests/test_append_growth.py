"""Appends do not slow down as the store grows (scripts/bench_growth.py measures it): the properties behind that.

Event ids are time-ordered (UUIDv7), so the history projection's unique index on ``event_id`` takes each new id at
its right edge; with uuid4 ids every insert landed on a random leaf of an index that outgrows SQLite's page cache.
"""

from __future__ import annotations

import uuid

from ledger.domain import new_event_id


def test_new_event_ids_are_uuid7_and_increase():
    ids = [new_event_id() for _ in range(2000)]
    assert all(uuid.UUID(i).version == 7 for i in ids)
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)


def test_event_ids_sort_in_log_order(fresh_ledger):
    ml = fresh_ledger
    receipts = []
    for b in range(3):
        receipts += ml.record([{"user_id": f"u{i % 3}", "key": f"note.b{b}_{i}", "value": i} for i in range(40)])
        receipts.append(ml.assert_fact("u1", "preference.drink", f"tea {b}"))  # one stream, several versions
    receipts.append(ml.correct_fact("u1", "preference.drink", "coffee", reason="misheard"))
    by_position = [r.event_id for r in sorted(receipts, key=lambda r: r.position)]
    assert len(by_position) == 3 * 41 + 1
    assert by_position == sorted(by_position)  # string order (the index's order) is log order
    # the ids the projections stored are the receipts' ids
    history = ml.history("u1", "preference.drink")
    assert [h.event_id for h in history] == [r.event_id for r in receipts if r.key == "preference.drink"]
