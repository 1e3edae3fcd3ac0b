"""Batched append: one query finds which of a batch's fact streams exist (instead of one load per new stream), and
scripts/bench_append.py runs on both backends. Speed itself is measured by the script, never asserted here."""

from __future__ import annotations

import re
import subprocess
import sys

from ledger.domain import fact_id
from ledger.schemas import validate_command
from tests.conftest import ROOT


def _cmd(user: str, key: str, value: str):
    return validate_command({"op": "assert", "user_id": user, "key": key, "value": value})


def test_existing_streams_names_exactly_the_streams_with_events(fresh_ledger):
    fresh_ledger.assert_fact("u1", "preference.drink", "tea")
    fresh_ledger.assert_fact("u2", "preference.drink", "milk")
    ids = {fact_id(u, k) for u, k in [("u1", "preference.drink"), ("u2", "preference.drink"),
                                     ("u1", "preference.food"), ("u3", "preference.drink")]}
    assert fresh_ledger.app.existing_streams(ids) == {fact_id("u1", "preference.drink"),
                                                      fact_id("u2", "preference.drink")}
    many = {fact_id("u9", f"note.n{i}") for i in range(1200)} | {fact_id("u1", "preference.drink")}
    assert fresh_ledger.app.existing_streams(many) == {fact_id("u1", "preference.drink")}  # chunks of 500
    assert fresh_ledger.app.existing_streams(set()) == set()


def test_batch_mixing_new_and_existing_facts(fresh_ledger):
    fresh_ledger.assert_fact("u1", "preference.drink", "tea")
    receipts = fresh_ledger.record([
        {"user_id": "u1", "key": "preference.drink", "value": "coffee"},
        {"user_id": "u1", "key": "preference.food", "value": "rice"},
        {"user_id": "u1", "key": "preference.food", "value": "noodles"},
    ])
    assert [(r.key, r.version, r.effect, r.position) for r in receipts] == [
        ("preference.drink", 2, "supersede", 2), ("preference.food", 1, "new", 3),
        ("preference.food", 2, "supersede", 4)]
    assert {k: f.value for k, f in fresh_ledger.profile("u1").facts.items()} == {
        "preference.drink": "coffee", "preference.food": "noodles"}


def test_a_stale_existence_answer_only_costs_a_retry(fresh_ledger, monkeypatch):
    """Another writer creates the stream after the check: the save conflicts and the command is decided again."""
    fresh_ledger.assert_fact("u1", "preference.drink", "tea")
    real = fresh_ledger.app.existing_streams
    calls = []

    def stale_once(ids):
        calls.append(len(ids))
        return set() if len(calls) == 1 else real(ids)

    monkeypatch.setattr(fresh_ledger.app, "existing_streams", stale_once)
    outcomes = fresh_ledger.app.execute([_cmd("u1", "preference.drink", "coffee"), _cmd("u1", "hobby.x", "chess")])
    assert calls == [2, 2]
    assert [(o.version, o.effect) for o in outcomes] == [(2, "supersede"), (1, "new")]
    assert [(h.value, h.version) for h in fresh_ledger.history("u1", "preference.drink")] == [("tea", 1), ("coffee", 2)]


def test_a_single_command_on_a_new_fact_skips_the_librarys_load(fresh_ledger, monkeypatch):
    """One command per save: a stream with no events is told by one SELECT (SQLite), and the library's
    ``repository.get`` runs only for a stream that exists; on PostgreSQL every load is the library's."""
    app = fresh_ledger.app
    gets = []
    real_get = app.repository.get
    monkeypatch.setattr(app.repository, "get", lambda sid, *a, **k: (gets.append(sid), real_get(sid, *a, **k))[1])
    sqlite = "home" in fresh_ledger_args(fresh_ledger)
    [new] = app.execute([_cmd("u1", "preference.drink", "tea")])
    assert (new.version, new.effect) == (1, "new")
    assert gets == ([] if sqlite else [fact_id("u1", "preference.drink")])
    gets.clear()
    [again] = app.execute([_cmd("u1", "preference.drink", "coffee")])
    assert (again.version, again.effect) == (2, "supersede")
    assert gets == [fact_id("u1", "preference.drink")]
    assert app._stream_absent(fact_id("u1", "preference.drink")) is False
    assert app._stream_absent(fact_id("u1", "preference.food")) is sqlite


def test_a_stale_absence_answer_for_one_command_only_costs_a_retry(fresh_ledger, monkeypatch):
    """The stream is created by another writer after the absence check: the save conflicts, the command is loaded
    in full and decided again (a supersede, never a second version 1)."""
    fresh_ledger.assert_fact("u1", "preference.drink", "tea")
    real = fresh_ledger.app._stream_absent
    calls = []

    def stale_once(sid):
        calls.append(sid)
        return True if len(calls) == 1 else real(sid)

    monkeypatch.setattr(fresh_ledger.app, "_stream_absent", stale_once)
    [outcome] = fresh_ledger.app.execute([_cmd("u1", "preference.drink", "coffee")])
    assert len(calls) == 2
    assert (outcome.version, outcome.effect) == (2, "supersede")
    assert [(h.value, h.version) for h in fresh_ledger.history("u1", "preference.drink")] == [("tea", 1), ("coffee", 2)]


def fresh_ledger_args(ml) -> dict:
    """Which backend a ledger runs on: {"home": ...} for SQLite, {"dsn": ...} for PostgreSQL."""
    return {"dsn": True} if ml.app.recorder.__class__.__module__.endswith("postgres") else {"home": True}


def test_bench_append_prints_its_table(store_args):
    args = ["--dsn", store_args["dsn"]] if "dsn" in store_args else []
    p = subprocess.run([sys.executable, "scripts/bench_append.py", *args, "--single", "2", "--events", "6",
                        "--batch", "3", "--repeat", "1"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    methods = [line.split("|")[1].strip() for line in lines if line.startswith("| ") and "method" not in line]
    raw = (["raw psycopg executemany, 1 transaction", "raw psycopg COPY, 1 transaction"] if args
           else ["raw sqlite3 executemany, 1 transaction"])
    assert methods == ["ledger, 1 per save", "ledger, 1 per save, users known", "ledger, 3 per save", "ledger record(), 3 per save, inline projections",
                       "ledger record(), 3 per save, inline projections, per-event catch-up",
                       "ledger record(), 3 per save, inline projections, read back from the log",
                       "ledger, 3 per save, encryption off", "eventsourcing alone, 3 per save (minimal aggregate)",
                       "eventsourcing alone, 3 per save, the ledger's events",
                       "eventsourcing alone, 1 per save (minimal aggregate)", *raw]
    assert re.match(r"^the library saving the ledger's own events: [\d.]+ x its minimal-aggregate rate; the "
                    r"ledger's append [\d.]+ x, encryption off [\d.]+ x, record\(\) inline [\d.]+ x that rate$",
                    lines[-4])
    assert re.match(r"^one command per save, users known: [\d.]+ x eventsourcing alone one event per save$", lines[-3])
    assert re.match(r"^one command per save: [\d.]+ x eventsourcing alone one event per save \(target >= 0.6\); "
                    r"record\(\) inline: [\d.]+ x eventsourcing alone \(target >= 0.6\); ledger append: [\d.]+ x "
                    r"\(target >= 0.9\)$", lines[-2])
    assert re.match(r"^batched ledger append: [\d,]+ events/s \(target >= (15|30),000: (met|NOT met)\)$", lines[-1])
