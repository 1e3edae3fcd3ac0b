"""A catch-up decodes in full only the events its projections read (``Projection.reads``, replay/events.py
``decode``): the others are read for their system time and user only, never decrypted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ledger.domain import Fact
from memledger import MemoryLedger
from projections.base import Projection
from replay import events as replay_events
from replay.events import Unread, decode, reads_of

ROOT = Path(__file__).resolve().parents[1]


def _mixed_log(ml: MemoryLedger) -> None:
    ml.assert_fact("ana", "preference.drink", "tea", text="Ana drinks tea")
    for i in range(30):
        ml.log_message("ana", "s1", role="user" if i % 2 else "assistant", message_id=f"m{i}", text=f"turn {i} of a chat")
    ml.assert_fact("ana", "preference.drink", "coffee", text="Ana switched to coffee")
    ml.log_message("bo", "s2", role="user", message_id="b1", text="hello")
    ml.assert_fact("bo", "home.city", "Lisbon", text="Bo lives in Lisbon")
    ml.retract_fact("bo", "home.city", reason="moved away")


def test_unread_events_keep_the_clock_and_user_of_a_full_decode(store_args: dict[str, Any]) -> None:
    with MemoryLedger(**store_args, embedder="hash") as ml:
        _mixed_log(ml)
        notes = ml.app.recorder.select_notifications(start=1, limit=1000)
        full, end_full = decode(ml.app, notes, 0)
        part, end_part = decode(ml.app, notes, 0, reads_of([ml.vectors_projection]))
    assert end_part == end_full
    assert [(le.position, le.recorded_at, le.clock) for le in part] == [
        (le.position, le.recorded_at, le.clock) for le in full]
    unread = [le for le in part if isinstance(le.event, Unread)]
    assert len(unread) == 31 + 2  # the 31 messages and their 2 sessions' starts are read for their time only
    for le, whole in zip(part, full):
        if isinstance(le.event, Unread):
            assert not isinstance(whole.event, Fact.Event)
            assert (le.event.user_id, le.event.timestamp) == (whole.event.user_id, whole.event.timestamp)
        else:
            assert le.event == whole.event


def test_a_search_after_messages_decrypts_no_message(store_args: dict[str, Any], monkeypatch: Any) -> None:
    with MemoryLedger(**store_args, embedder="hash") as ml:
        _mixed_log(ml)
        decoded: list[str] = []
        mapper = ml.app.mapper
        many = getattr(mapper, "to_domain_events", None)
        if many is not None:
            monkeypatch.setattr(mapper, "to_domain_events",
                                lambda ses: (decoded.extend(type_name(s.topic) for s in ses), many(ses))[1])
        one = mapper.to_domain_event
        monkeypatch.setattr(mapper, "to_domain_event", lambda se: (decoded.append(type_name(se.topic)), one(se))[1])
        hits = ml.search("ana", "what does Ana drink", k=3)
        assert [h.key for h in hits] == ["preference.drink"] and "coffee" in hits[0].text
        assert decoded and set(decoded) <= {"FactAsserted", "FactRetracted", "FactCorrected"}
        assert not ml.search("bo", "Lisbon", k=3)  # the retraction was applied
        monkeypatch.undo()
        assert all(r.ok for r in ml.verify())


def type_name(topic: str) -> str:
    return topic.rsplit(":", 1)[-1].rsplit(".", 1)[-1]


def test_reads_of_is_everything_when_one_projection_reads_everything() -> None:
    class Everything(Projection):
        name = "everything"

    class Facts(Projection):
        name = "facts"
        reads = (Fact.Event,)

    assert reads_of([Facts(), Everything()]) is None
    got = reads_of([Facts()])
    assert got is not None and got[0] is Fact.Event and len(got) == 3  # + SubjectErased, UserArrived
    assert replay_events._is_read("no.such.module:Nothing", got)  # an unknown topic is decoded in full (and fails there)
