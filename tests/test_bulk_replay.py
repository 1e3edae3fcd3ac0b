"""The bulk replay path (replay/bulk.py) leaves exactly the rows of the per-event path, table by table, row by row.

One log holds every case the projections' rules have: upcast v1 events (tests/fixtures/ledger_v1), supersedes,
corrections, retractions with and without a valid end, backfills, contests and their settling, reaffirmations,
sessions and messages (per-event projections riding along), plaintext events of a user who is then erased
(``SubjectErased`` purges rows built from them), and events after the erasure. It is replayed from position 0 by
the per-event catch-up loop and by the bulk path with chunks of 1, 2, 7 and 10,000 events (so streams span flushes
and every statement kept for flushed rows runs), and the copies are compared row by row. Runs on every backend of
tests/conftest.py (PostgreSQL writes through COPY).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.persistence import StoredEvent

from memledger import MemoryLedger
from projections.history import HistoryBulk, HistoryProjection
from projections.profile import ProfileProjection
from replay.bulk import bulk_catch_up
from replay.catchup import catch_up
from replay.verify import rows

V1_EVENTS = Path(__file__).parent / "fixtures" / "ledger_v1" / "events.db"
T = ["2024-01-0%dT09:00:00Z" % d for d in range(1, 10)]


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLEDGER_EMBEDDER", "hash")


def v1_events() -> list[StoredEvent]:
    conn = sqlite3.connect(f"file:{V1_EVENTS}?mode=ro", uri=True)
    try:
        return [StoredEvent(UUID(o), v, t, s) for o, v, t, s in conn.execute(
            "SELECT originator_id, originator_version, topic, state FROM stored_events ORDER BY rowid")]
    finally:
        conn.close()


def write_log(store_args: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The log described in the module doc (about 90 events)."""
    monkeypatch.setenv("MEMLEDGER_ENCRYPTION", "off")  # a store written before encryption was on
    with MemoryLedger(**store_args) as ml:
        ml.app.recorder.insert_events(v1_events())  # positions 1-13: u1 and u2, schema v1
        ml.assert_fact("alice", "preference.drink", "tea", observed_at=T[0])
        ml.assert_fact("alice", "preference.drink", "coffee", observed_at=T[1])
        ml.assert_fact("alice", "home.city", "Lisbon", observed_at=T[0])
    monkeypatch.setenv("MEMLEDGER_ENCRYPTION", "on")
    with MemoryLedger(**store_args) as ml:
        ml.assert_fact("u1", "preference.drink", "green tea")  # settles the v1 contest; supersedes a v1 version
        ml.correct_fact("u1", "profile.birth_year", 1996, reason="typo again")
        for u in range(4):
            user = f"user{u}"
            ml.record([{"user_id": user, "key": "preference.drink", "value": d, "observed_at": T[i + 2]}
                       for i, d in enumerate(["tea", "coffee", "matcha"])])
            ml.assert_fact(user, "home.city", "Berlin", observed_at=T[6])
            ml.assert_fact(user, "home.city", "Paris", observed_at=T[3], source="external_import")  # backfill
            ml.assert_fact(user, "home.city", "Rome", observed_at=T[1], source="external_import")  # backfill
            ml.assert_fact(user, "profile.birth_year", 1990)
            ml.correct_fact(user, "profile.birth_year", 1995, reason="typo")
            ml.assert_fact(user, "mood", "calm")
            ml.assert_fact(user, "mood", "tense", source="agent_inference", confidence=0.3)  # contest
            if u % 2:
                ml.assert_fact(user, "mood", "calm")  # the user settles it (reaffirm)
            ml.assert_fact(user, "hobby.a", "chess", observed_at=T[0])
            ml.retract_fact(user, "hobby.a", valid_to=T[4], reason="stopped")
            ml.assert_fact(user, "hobby.b", "golf")
            ml.retract_fact(user, "hobby.b", reason="misheard")
            ml.session_start(user, "s1", task="plan a trip")
            ml.log_message(user, "s1", role="user", message_id="m1", text=f"hello from {user}")
            ml.update_card(user, "s1", progress="booked")
        ml.assert_fact("alice", "preference.drink", "water")  # encrypted; alice's first ones are plaintext
        ml.erase("alice")  # SubjectErased: the plaintext events' rows are purged again at its position
        ml.assert_fact("user0", "preference.drink", "juice")  # after the erasure
        ml.correct_fact("user1", "profile.birth_year", 1994, reason="again")


def fresh_copies(ml: MemoryLedger, suffix: str) -> list[Any]:
    copies = [p.clone(suffix) for p in ml.projections if not p.deferred]
    with ml.db.transaction() as cur:
        for c in copies:
            c.drop(cur)
            c.create(cur)
    return copies


def content(ml: MemoryLedger, copies: list[Any]) -> dict[str, list[tuple]]:
    """Every row of every table of the copies, in full column order; and their tracking rows."""
    out: dict[str, list[tuple]] = {}
    with ml.db.read() as cur:
        for c in copies:
            for short in c.tables:
                out[f"{c.name}_{short}"] = list(rows(cur, c.table(short)))
            cur.execute("SELECT position, recorded_at FROM projection_tracking WHERE projection = ?",
                        (c.tracking_name,))
            out[f"{c.name} tracking"] = [tuple(cur.fetchone())]
    return out


def test_bulk_equals_per_event_row_by_row(store_args: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    write_log(store_args, monkeypatch)
    with MemoryLedger(**store_args) as ml:
        head = ml._head()
        per_event = content(ml, _per_event(ml))
        # The log really has every case: each effect, each status, the purge of rows built from plaintext events.
        versions = per_event["history_versions"]
        assert {r[5] for r in versions} == {"new", "supersede", "correct", "backfill", "contest", "reaffirm",
                                            "retract"}
        assert {r[13] for r in versions} >= {"current", "superseded", "misreported", "retracted", "closed",
                                             "contesting", "reaffirmation", "retraction"}
        assert not any(r[0] == "alice" for r in versions)
        assert {r[0] for r in versions} == {"u1", "u2", "user0", "user1", "user2", "user3"}
        # 13 v1 events, 2 of u1, 14 per user (+1 reaffirm for two of them), 2 after the erasure; alice's 4: purged
        assert len(versions) == 13 + 2 + 4 * 14 + 2 + 2
        assert len(per_event["history_timeline"]) > len(versions)
        assert per_event["profile tracking"][0][0] == head
        for chunk in (1, 2, 7, 10_000):
            calls = count_calls(monkeypatch)
            copies = fresh_copies(ml, f"bulk{chunk}")
            bulk_catch_up(ml.app, ml.db, copies, chunk=chunk)
            assert calls["apply"] == 0 and calls["flush"] == -(-head // chunk), chunk  # the bulk path, chunked
            assert content(ml, copies) == per_event, f"chunk {chunk}"
        # The copies the ledger kept up event by event while the log was written agree too.
        ml.catch_up()
        assert content(ml, [p for p in ml.projections if not p.deferred]) == per_event


def test_interrupted_bulk_build_resumes_to_the_same_rows(store_args: dict[str, Any],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    write_log(store_args, monkeypatch)
    with MemoryLedger(**store_args) as ml:
        per_event = content(ml, _per_event(ml))
        copies = fresh_copies(ml, "resumed")
        seen: list[int] = []

        def stop_after_two(n: int, position: int) -> None:
            seen.append(position)
            if len(seen) == 2:
                raise KeyboardInterrupt  # the process dies between two flushes

        with pytest.raises(KeyboardInterrupt):
            bulk_catch_up(ml.app, ml.db, copies, chunk=25, on_batch=stop_after_two)
        assert seen == [25, 50]
        assert content(ml, copies)["history tracking"][0][0] == 50  # the two committed flushes stay
        assert bulk_catch_up(ml.app, ml.db, copies, chunk=25) == ml._head()  # resumed from 50, in memory again
        assert content(ml, copies) == per_event


def test_a_copy_moved_by_another_catch_up_is_left_to_it(store_args: dict[str, Any],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    write_log(store_args, monkeypatch)
    with MemoryLedger(**store_args) as ml:
        per_event = content(ml, _per_event(ml))
        copies = fresh_copies(ml, "raced")

        def another_process(n: int, position: int) -> None:
            if position == 10:  # after the first flush, another catch-up applies events 11-30 event by event
                catch_up(ml.app, ml.db, copies, until=30, bulk=False)

        # The second flush finds the copies at 30, not 10: it rolls back and returns where they are.
        assert bulk_catch_up(ml.app, ml.db, copies, chunk=10, on_batch=another_process) == 30
        assert content(ml, copies)["history tracking"][0][0] == 30
        catch_up(ml.app, ml.db, copies, bulk=False)
        assert content(ml, copies) == per_event


def test_fresh_stores_first_catch_up_is_bulk_and_verifies(store_args: dict[str, Any],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    write_log(store_args, monkeypatch)
    with MemoryLedger(**store_args) as ml:
        expected = content(ml, _per_event(ml))
        with ml.db.transaction() as cur:  # forget every projection: the next catch-up starts from position 0
            for p in ml.projections:
                p.drop(cur)
                p.create(cur)
    calls = count_calls(monkeypatch)
    with MemoryLedger(**store_args) as ml:
        assert ml.profile("user1").facts["profile.birth_year"].value == 1994  # a read catches up first: in bulk
        assert calls == {"apply": 0, "flush": 1}
        assert content(ml, [p for p in ml.projections if not p.deferred]) == expected
        ml.assert_fact("user1", "mood", "happy")  # later catch-ups are per event
        assert calls == {"apply": 2, "flush": 1}  # one event, by profile and history
        assert all(r.ok for r in ml.verify())


@pytest.mark.parametrize("blue_green", [True, False])
def test_rebuild_is_bulk_and_verifies(store_args: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
                                      blue_green: bool) -> None:
    write_log(store_args, monkeypatch)
    with MemoryLedger(**store_args) as ml:
        expected = content(ml, _per_event(ml))
        calls = count_calls(monkeypatch)
        report = ml.rebuild(blue_green=blue_green, batch_size=10)
        assert (report.events, report.position) == (ml._head(), ml._head())
        assert calls == {"apply": 0, "flush": -(-ml._head() // 10)}
        assert content(ml, [p for p in ml.projections if not p.deferred]) == expected
        assert all(r.ok for r in ml.verify())


def _per_event(ml: MemoryLedger) -> list[Any]:
    copies = fresh_copies(ml, "perevent")
    catch_up(ml.app, ml.db, copies, bulk=False)
    return copies


def count_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts per-event ``apply`` calls of history and profile, and bulk flushes of history, from now on."""
    calls = {"apply": 0, "flush": 0}
    for cls in (HistoryProjection, ProfileProjection):
        original = cls.apply

        def apply(self: Any, cur: Any, le: Any, _original: Any = original) -> None:
            calls["apply"] += 1
            _original(self, cur, le)

        monkeypatch.setattr(cls, "apply", apply)
    flush = HistoryBulk.flush

    def counted_flush(self: Any, cur: Any) -> None:
        calls["flush"] += 1
        flush(self, cur)

    monkeypatch.setattr(HistoryBulk, "flush", counted_flush)
    return calls


def later_batch(n: int) -> list[dict[str, Any]]:
    """One ``record()`` batch of 5 commands per user whose every event hits rows an *earlier* batch wrote (write_log):
    supersede, correct, a backfill under the current value, a contest and a retraction with a valid end."""
    out: list[dict[str, Any]] = []
    for u in range(4):
        user = f"user{u}"
        out += [
            {"user_id": user, "key": "preference.drink", "value": f"cocoa {n}", "observed_at": T[8]},
            {"op": "correct", "user_id": user, "key": "profile.birth_year", "value": 1980 + n, "reason": "typo"},
            {"user_id": user, "key": "home.city", "value": f"Oslo {n}", "observed_at": T[0],
             "source": "external_import"},
            {"user_id": user, "key": "mood", "value": f"sleepy {n}", "source": "agent_inference", "confidence": 0.2},
            {"op": "retract", "user_id": user, "key": "preference.drink", "valid_to": f"2030-01-0{n}T09:00:00Z",
             "reason": "stopped"},
        ]
    return out


@pytest.mark.parametrize("bulk_min", [1, 3])
def test_inline_catch_up_in_bulk_equals_per_event(store_args: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
                                                   bulk_min: int) -> None:
    """Every inline catch-up of a log written in many saves goes through the bulk writers (``bulk_min`` 1), or the
    batches do and the single writes stay per event (3), on copies that already hold the rows of earlier saves;
    the serving tables end row for row as a per-event replay leaves them. Erasure included: a user erased by
    another process, whose late event (a writer still held its key) comes in the same catch-up as a batch."""
    from ledger.schemas import validate_command
    from replay import catchup

    monkeypatch.setattr(catchup, "BULK_MIN", bulk_min)
    calls = count_calls(monkeypatch)
    write_log(store_args, monkeypatch)
    with MemoryLedger(**store_args) as ml:
        for n in (1, 2):
            receipts = ml.record(later_batch(n))
            assert written(ml) >= max(r.position for r in receipts)  # projected before record() returned
        ml.assert_fact("eve", "pref.secret", "zebra-first")  # ml now holds eve's data key in its cache
        with MemoryLedger(**store_args) as eraser:
            eraser.erase("eve")  # the register gets eve; ml's copies are one event behind
        late = validate_command({"op": "assert", "user_id": "eve", "key": "pref.secret", "value": "zebra-late"})
        assert ml.app.execute([late])[0].position == ml._head()  # appended after the tombstone
        flushes = calls["flush"]
        ml.record(later_batch(3))  # tombstone, late event, 20 events: one bulk catch-up (bulk_min 3 too)
        assert calls["flush"] == flushes + 1
        assert ml.profile("eve").facts == {} and ml.history("eve") == []
        if bulk_min == 1:
            assert calls["apply"] == 0  # no event went the per-event way
        else:
            assert calls["apply"] > 0 and calls["flush"] > 3  # both paths took turns on the same copies
        serving = content(ml, [p for p in ml.projections if not p.deferred])
        per_event = content(ml, _per_event(ml))
        assert serving == per_event
        # The later batches really hit earlier rows: closed, misreported, contested versions of earlier saves.
        statuses = {(r[0], r[1], r[13]) for r in per_event["history_versions"] if r[0] == "user2"}
        assert {("user2", "preference.drink", "closed"), ("user2", "profile.birth_year", "misreported"),
                ("user2", "mood", "contesting")} <= statuses
        assert all(r.ok for r in ml.verify())


def test_bulk_gives_up_when_another_copy_erased_a_user_meanwhile(store_args: dict[str, Any],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The register of erased users is read when a bulk pass starts; a tombstone another copy applies meanwhile
    would make the per-event path skip that user's events, which the pass may hold in memory: its next flush rolls
    back and the ordinary loop finishes, to the per-event rows."""
    from projections.base import note_erased

    write_log(store_args, monkeypatch)
    with MemoryLedger(**store_args) as ml:
        copies = fresh_copies(ml, "erasedmeanwhile")

        def another_copy_erases(n: int, position: int) -> None:
            if position == 10:
                with ml.db.transaction() as cur:
                    note_erased(cur, "user2", ml._head())

        assert bulk_catch_up(ml.app, ml.db, copies, chunk=10, on_batch=another_copy_erases) == 10
        catch_up(ml.app, ml.db, copies, bulk=False)
        rebuilt = content(ml, copies)
        assert not any(r[0] == "user2" for r in rebuilt["history_versions"])  # skipped from position 11 on
        assert rebuilt == content(ml, _per_event(ml))


def test_a_record_whose_bulk_catch_up_is_overtaken_still_returns_projected(
        store_args: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process catches the copies up while this record()'s bulk pass applies in memory: the flush rolls back,
    the per-event loop finds the events applied, and record() returns with them projected (read-your-writes)."""
    import replay.bulk
    from replay import catchup

    monkeypatch.setattr(catchup, "BULK_MIN", 1)
    write_log(store_args, monkeypatch)
    with MemoryLedger(**store_args) as ml, MemoryLedger(**store_args) as other:
        decode, from_memory, gave_up = replay.bulk.decode, replay.bulk.from_memory, []

        def overtaken(read: Any) -> Any:
            def read_then_overtaken(*args: Any) -> Any:
                out = read(*args)
                if out is not None and not gave_up:
                    gave_up.append(0)
                    other.catch_up(deferred=False)  # moves the copies' tracking rows past this pass's start
                return out
            return read_then_overtaken

        low = replay.bulk._low
        # the pass reads its events from memory (record()'s own events) or from the log: overtaken after either
        monkeypatch.setattr(replay.bulk, "decode", overtaken(decode))
        monkeypatch.setattr(replay.bulk, "from_memory", overtaken(from_memory))
        monkeypatch.setattr(replay.bulk, "_low", lambda *a: gave_up.append(1) or low(*a))
        receipts = ml.record(later_batch(1))
        assert gave_up == [0, 1]  # the bulk pass was overtaken and gave up
        assert written(ml) == max(r.position for r in receipts) == ml._head()
        assert content(ml, [p for p in ml.projections if not p.deferred]) == content(ml, _per_event(ml))


def written(ml: MemoryLedger) -> int:
    """The lowest position of the copies a write catches up (all but the deferred vectors), from their tracking rows."""
    from projections.base import position_of

    with ml.db.read() as cur:
        return min(position_of(cur, p.tracking_name)[0] for p in ml.projections if not p.deferred)


def _record_batches(ml: MemoryLedger, job: tuple[int, int], t: int) -> list[int]:
    """A writer process: BULK_MIN 2, so each 6-command record() is caught up in bulk, racing the other writer on
    the same users' facts; returns how far the copies were after each record() minus its last receipt's position."""
    from replay import catchup

    catchup.BULK_MIN = 2
    worker, rounds = job
    gaps = []
    for n in range(rounds):
        receipts = ml.record([{"user_id": f"user{u}", "key": k, "value": f"w{worker} n{n}"}
                              for u in range(3) for k in ("pref.a", "pref.b")])
        gaps.append(written(ml) - max(r.position for r in receipts))
    return gaps


def test_two_processes_catching_up_in_bulk_at_once(store_args: dict[str, Any]) -> None:
    """Two writer processes record batches at once, each catching up in bulk (a flush that finds the copies moved by
    the other process gives up: the test above forces that; here it is up to timing): every record() returns with
    its events projected, and the tables equal a per-event replay."""
    from tests.test_concurrent_processes import _run_workers

    gaps = _run_workers(_record_batches, store_args, [(0, 8), (1, 8)])
    assert all(g >= 0 for gap in gaps for g in gap), gaps
    with MemoryLedger(**store_args) as ml:
        serving = content(ml, [p for p in ml.projections if not p.deferred])
        assert serving["history tracking"][0][0] == ml._head()
        assert len(serving["history_versions"]) == 2 * 8 * 6  # (PostgreSQL's positions have gaps: retried saves)
        assert serving == content(ml, _per_event(ml))


@pytest.mark.parametrize("blue_green", [True, False])
def test_rebuilt_profile_is_derived_from_the_new_history(store_args: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
                                                         blue_green: bool) -> None:
    """A rebuild of profile and history fills the new profile from the new history in one statement (no event is
    applied to it, in memory or by SQL), and its rows and tracking row equal the profile kept up event by event while
    the log was written, row for row: supersedes, corrections, retractions with and without a valid end, backfills,
    contests settled and not, an erased user, a forgotten head (then a new value), a forgotten head left empty, a
    forgotten older version under a head that stays. A profile rebuilt without history beside it is applied as before."""
    from projections.profile import ProfileBulk

    write_log(store_args, monkeypatch)
    with MemoryLedger(**store_args) as ml:
        ml.forget("user2", "preference.drink")  # every version, the head among them: no current value ...
        ml.assert_fact("user2", "preference.drink", "water")  # ... until a new one
        ml.forget("user0", "mood")  # the head (contested, never settled) and the rest: the row goes
        ml.forget("user1", "preference.drink", version=1)  # an older version: the head stays
        serving = content(ml, [p for p in ml.projections if not p.deferred])
        assert serving == content(ml, _per_event(ml))
        facts = {(r[0], r[1]): r for r in serving["profile_facts"]}
        assert facts[("user2", "preference.drink")][3] == '"water"' and ("user0", "mood") not in facts
        assert {r[10] for r in facts.values()} == {"current", "contested"}
        assert ("user0", "hobby.b") not in facts and not any(u == "alice" for u, _ in facts)
        effects = {r[5] for r in serving["history_versions"]}
        assert {"forget", "correct", "retract", "backfill", "contest", "reaffirm", "supersede"} <= effects
        derived: list[str] = []
        derive = ProfileProjection.derive
        monkeypatch.setattr(ProfileProjection, "derive",
                            lambda self, cur, source: derived.append(self.suffix) or derive(self, cur, source))
        calls = count_calls(monkeypatch)
        flush = ProfileBulk.flush
        monkeypatch.setattr(ProfileBulk, "flush", lambda self, cur: calls.update(profile=1) or flush(self, cur))
        report = ml.rebuild(["profile", "history"], blue_green=blue_green, batch_size=7)
        assert derived == [report.serving["profile"]] and calls["apply"] == 0 and "profile" not in calls
        assert content(ml, [p for p in ml.projections if not p.deferred]) == serving
        ml.rebuild(["profile"], blue_green=blue_green, batch_size=7)
        assert len(derived) == 1 and calls["profile"] == 1  # alone: built from the events, in bulk
        assert content(ml, [p for p in ml.projections if not p.deferred]) == serving
        assert all(r.ok for r in ml.verify())
