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


def test_bench_growth_prints_a_row_per_window():
    import re
    import subprocess
    import sys

    from tests.conftest import ROOT

    p = subprocess.run([sys.executable, "scripts/bench_growth.py", "--events", "600", "--batch", "100", "--window",
                        "200", "--per-user", "250", "--compare"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    rows = [line for line in p.stdout.splitlines() if re.match(r"^\|\s+[\d,]+ \|", line)]
    assert [r.split("|")[1].strip() for r in rows] == ["200", "400", "600"]
    assert all(len(r.split("|")) == 2 + 1 + 10 for r in rows)  # events + 5 cells per store, two stores
    assert all(r.split("|")[4].strip() == "1.00" for r in rows[:1])  # the first window is its own baseline
    ratios = [line for line in p.stdout.splitlines() if "median of the last" in line]
    assert [line.split(":")[0] for line in ratios] == ["uuid7 ids (now)", "uuid4 ids (before)"]
    p = subprocess.run([sys.executable, "scripts/bench_growth.py", "--events", "500", "--window", "200"],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert p.returncode == 2 and "multiple of --batch" in p.stderr
