"""Upcasting: events written by the v1 schema of Fact.Event (a committed fixture database) are read through
``Fact.Event.upcast_v1_v2`` and project exactly like the same facts written with today's schema.

The fixture (tests/fixtures/ledger_v1/, made by tests/fixtures/make_ledger_v1.py): ``events.db`` holds 13 v1
events (the JSON value under ``value``, no ``role``/``sensitivity``, no ``class_version``); ``facts.json`` holds the
same events in today's field names, which the tests write with today's mapper.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from datetime import datetime
from pathlib import Path
from uuid import UUID

import pytest
from eventsourcing.utils import resolve_topic

from memledger import MemoryLedger
from ledger.domain import Fact
from replay.verify import checksum

FIXTURE = Path(__file__).parent / "fixtures" / "ledger_v1"
INSTANTS = ("timestamp", "observed_at", "valid_from", "valid_to")


def v1_home(tmp_path: Path) -> Path:
    home = tmp_path / "v1"
    home.mkdir()
    shutil.copy(FIXTURE / "events.db", home / "events.db")  # never touch the committed file
    return home


def today_home(tmp_path: Path) -> Path:
    """A store holding facts.json written through today's mapper (class_version 2, encryption as configured)."""
    home = tmp_path / "today"
    facts = json.loads((FIXTURE / "facts.json").read_text())
    with MemoryLedger(home=home) as ml:
        stored = []
        for f in facts:
            state = dict(f["state"])
            for k in INSTANTS:
                if state.get(k) is not None:
                    state[k] = datetime.fromisoformat(state[k])
            state["originator_id"] = UUID(f["originator_id"])
            state["originator_version"] = f["originator_version"]
            event = object.__new__(resolve_topic(f["topic"]))
            object.__setattr__(event, "__dict__", state)
            stored.append(ml.app.mapper.to_stored_event(event))
        ml.app.recorder.insert_events(stored)
    return home


def stored_states(db: Path) -> list[dict]:
    conn = sqlite3.connect(db)
    try:
        return [json.loads(s) for (s,) in conn.execute("SELECT state FROM stored_events ORDER BY rowid")]
    finally:
        conn.close()


def test_fixture_is_really_v1() -> None:
    states = stored_states(FIXTURE / "events.db")
    assert len(states) == 13
    assert all("value" in s and "value_json" not in s and "class_version" not in s for s in states)
    assert all("role" not in s and "sensitivity" not in s for s in states)
    assert states[7]["value"] == {"since": 2020, "city": "Lisbon", "area": "Alfama"}  # caller's key order


def test_upcaster_gives_todays_fields(tmp_path: Path) -> None:
    with MemoryLedger(home=v1_home(tmp_path)) as ml:
        events = [ml.app.mapper.to_domain_event(n) for n in ml.app.recorder.select_notifications(start=1, limit=50)]
    assert [e.value_json for e in events] == [
        '"tea"', '"coffee"', '"coffee"', '"matcha"', '"water"', "1990", "1995",
        '{"area":"Alfama","city":"Lisbon","since":2020}', '["cat","dog"]', None, '"café com leite ☕"', '"crêpes"',
        None,
    ]
    assert {(e.role, e.sensitivity) for e in events} == {(None, None)}
    assert not any(hasattr(e, "value") for e in events)
    assert Fact.Event.class_version == 4
    assert {e.hygiene for e in events} == {None}  # v2 -> v3: events before hygiene marks carry none
    assert {e.fact_key_id for e in events} == {None}  # v3 -> v4: events before per-fact keys have none (forget)


def test_projections_from_v1_equal_projections_from_today(tmp_path: Path) -> None:
    old, new = v1_home(tmp_path), today_home(tmp_path)
    with MemoryLedger(home=old) as a, MemoryLedger(home=new) as b:
        a.catch_up()
        b.catch_up()
        with a.db.read() as ca, b.db.read() as cb:
            sums_a = {p.name: checksum(ca, p) for p in a.projections}
            sums_b = {p.name: checksum(cb, p) for p in b.projections}
        assert sums_a == sums_b
        assert a.profile("u1").model_dump(mode="json") == b.profile("u1").model_dump(mode="json")
        for user in ("u1", "u2"):
            assert [r.model_dump(mode="json") for r in a.history(user)] == \
                [r.model_dump(mode="json") for r in b.history(user)]
        facts = a.profile("u1").facts
        assert {k: f.value for k, f in facts.items()} == {
            "home.address": {"area": "Alfama", "city": "Lisbon", "since": 2020},
            "preference.drink": "coffee",
            "profile.birth_year": 1995,
        }
        assert facts["preference.drink"].status == "contested"
        assert [(r.version, r.kind, r.status) for r in a.history("u1", "profile.birth_year")] == [
            (1, "asserted", "misreported"), (2, "corrected", "current")]
        assert a.profile("u2").facts == {}
        assert [r.value for r in a.history("u2")] == ["café com leite ☕", "crêpes", None]
        # A full replay of the upcast log agrees with itself too.
        assert all(r.ok for r in a.verify())


def test_rebuild_of_v1_store_reproduces_the_same_content(tmp_path: Path) -> None:
    with MemoryLedger(home=v1_home(tmp_path)) as ml:
        ml.catch_up()
        with ml.db.read() as cur:
            before = {p.name: checksum(cur, p) for p in ml.projections}
        report = ml.rebuild(blue_green=True)
        assert report.events == 13
        with ml.db.read() as cur:
            after = {p.name: checksum(cur, p) for p in ml.projections}
    assert after == before


@pytest.mark.parametrize("encryption", ["off", "on"])
def test_new_events_store_class_version_4(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, encryption: str) -> None:
    monkeypatch.setenv("MEMLEDGER_ENCRYPTION", encryption)
    with MemoryLedger(home=tmp_path / "l") as ml:
        ml.assert_fact("u1", "preference.drink", "tea")
    [state] = stored_states(tmp_path / "l" / "events.db")
    assert state["class_version"] == 4
    assert "value" not in state and "value_json" in state
    assert isinstance(state["fact_key_id"], str) and state["fact_key_id"]  # v4: its own per-fact key (forget)
