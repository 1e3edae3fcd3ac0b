"""Append throughput of the ledger's write side, beside the raw driver writing equivalent rows, in one run.

    python scripts/bench_append.py                       # SQLite (a temporary home)
    python scripts/bench_append.py --dsn postgresql://postgres@127.0.0.1:5432/test   # PostgreSQL (a temp schema)

What is timed (each ``--repeat`` times on a fresh store, the median reported):

* ``ledger, 1 per save`` — ``LedgerApplication.execute([cmd])`` per command: validate -> load the fact's stream ->
  decide -> one ``save()`` (one transaction) per event. New facts, so each load finds an empty stream.
* ``ledger, 1 per save, users known`` — the same on the same store right after, with new facts of the same 10 users:
  their data keys and per-fact key reserves already exist, as for a running agent's users; the row above also pays
  each user's first write (a data key and a key reserve stored, ~1-3 ms each).
* ``ledger, N per save`` — ``execute(batch)`` with ``--batch`` commands per save (one agent turn = one save).
* ``ledger record(), inline projections`` — ``MemoryLedger.record(batch)``: the above plus catching every
  projection up in process before returning (what an embedded agent pays per turn); a batch of at least
  ``replay.catchup.BULK_MIN`` events is caught up by the bulk writers. ``..., per-event catch-up``: the same with
  the per-event catch-up forced (the two alternate in order from run to run, on the same store). ``..., read back
  from the log``: the shipped catch-up, but with the command's events read back from the log and decoded as before
  instead of projected from memory (``replay.bulk.from_memory`` disabled for that row only).
* ``eventsourcing alone`` — the library saving minimal one-event aggregates, ``--batch`` per save: its ceiling here;
  and one per save (``--single`` saves), the ceiling of the ``1 per save`` row. ``..., the ledger's events``: the
  library saving the very events the ledger wrote (decoded from its log, plaintext) with its own mapper and
  transcoder, ``--batch`` per save: what the library alone pays for the ledger's event shape, so the gap between it
  and the ledger rows is the ledger's own work (policy, per-fact keys, encryption, projections).
* ``--profile PATH``: afterwards, one more ``record()`` of ``--events`` commands in batches of ``--batch`` on a fresh
  store under pyinstrument (the test extra installs it); its text report goes to PATH (docs/performance.md).
* baselines, the same rows (the stored events the ledger wrote: originator_id, originator_version, topic, state
  bytes, read back from its log) written by the driver alone in one transaction: ``sqlite3 executemany`` on
  SQLite; ``psycopg executemany`` and ``psycopg COPY`` on PostgreSQL.

The ledger's events are real: encrypted per user (the default, docs/erasure.md), so the state bytes the baselines
write are the same size; one more row times the batched append on a store with ``MEMLEDGER_ENCRYPTION=off``. Ratios are against the fastest raw baseline of the same run. Nothing here is an
assertion: speed is reported, never tested (tests/ stay fast on the shared 2-core machine).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MEMLEDGER_EMBEDDER", "none")  # the append path; the vectors projection is not timed here

from eventsourcing.domain import Aggregate  # noqa: E402

from memledger import MemoryLedger  # noqa: E402
from ledger.schemas import validate_command  # noqa: E402
from replay import bulk as replay_bulk  # noqa: E402
from replay import catchup  # noqa: E402


class Note(Aggregate):
    """A minimal aggregate for the library's own ceiling: one creation event with one short string."""

    def __init__(self, text: str) -> None:
        self.text = text


def commands(n: int, run: int) -> list[Any]:
    """``n`` validated assert commands on new facts, spread over 10 users (like a busy multi-user agent)."""
    return [validate_command({"op": "assert", "user_id": f"user{i % 10}", "key": f"note.r{run}_{i}",
                              "value": f"value {i}", "text": f"the user said note {i} (run {run})"})
            for i in range(n)]


class Store:
    """A fresh, empty ledger store on the chosen backend (a temp dir, or a temp PostgreSQL schema)."""

    def __init__(self, dsn: str | None) -> None:
        self.dsn = dsn
        self.dir = tempfile.mkdtemp(prefix="bench_append_")
        self.schema = f"bench_{uuid.uuid4().hex[:10]}"

    def open(self) -> MemoryLedger:
        if self.dsn:
            return MemoryLedger(dsn=self.dsn, schema=self.schema)
        return MemoryLedger(home=Path(self.dir) / "ledger")

    def drop(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.dsn:
            import psycopg

            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')


class Timing(NamedTuple):
    """Seconds by the wall clock and of this process's CPU (steadier on a shared machine; on PostgreSQL the
    server's CPU is not in it)."""

    wall: float
    cpu: float

    def __truediv__(self, n: float) -> Timing:  # type: ignore[override]
        return Timing(self.wall / n, self.cpu / n)


def timed(fn: Callable[[], Any]) -> Timing:
    t, c = time.perf_counter(), time.process_time()
    fn()
    return Timing(time.perf_counter() - t, time.process_time() - c)


def stored_rows(ml: MemoryLedger) -> list[tuple[uuid.UUID, int, str, bytes]]:
    """The stored events of the ledger's log, as (originator_id, originator_version, topic, state)."""
    rows = []
    start = 1
    while True:
        ns = ml.app.recorder.select_notifications(start=start, limit=1000)
        if not ns:
            return rows
        rows += [(n.originator_id, n.originator_version, n.topic, bytes(n.state)) for n in ns]
        start = ns[-1].id + 1


def bench_ledger(dsn: str | None, n_single: int, n_batch: int, batch: int, run: int,
                 bulk_min: int | None = None) -> dict[str, Timing]:
    store = Store(dsn)
    try:
        with store.open() as ml:
            out = {}
            cmds = commands(n_single, run * 10 + 1)
            out["ledger, 1 per save"] = timed(lambda: [ml.app.execute([c]) for c in cmds]) / n_single
            # the same users again: their data keys and key reserves exist (a running agent's steady state)
            cmds = commands(n_single, run * 10 + 7)
            out["ledger, 1 per save, users known"] = timed(lambda: [ml.app.execute([c]) for c in cmds]) / n_single
            cmds = commands(n_batch, run * 10 + 2)
            out[f"ledger, {batch} per save"] = timed(
                lambda: [ml.app.execute(cmds[i:i + batch]) for i in range(0, n_batch, batch)]) / n_batch
            ml.catch_up()  # untimed: bring projections to the head so record() times only its own batches
            # record() with the inline catch-up as shipped (bulk writers for spans >= catchup.BULK_MIN), and with
            # the per-event catch-up forced; on the same store, in alternating order from run to run.
            threshold_shipped = catchup.BULK_MIN if bulk_min is None else bulk_min
            modes = [("inline projections", threshold_shipped, 3, True),
                     ("inline projections, per-event catch-up", 1 << 62, 5, True),
                     ("inline projections, read back from the log", threshold_shipped, 6, False)]
            for name, threshold, seed, memory in (modes if run % 2 == 0 else modes[::-1]):
                cmds = commands(n_batch, run * 10 + seed)
                shipped, catchup.BULK_MIN = catchup.BULK_MIN, threshold
                served = replay_bulk.from_memory, catchup.from_memory
                if not memory:
                    replay_bulk.from_memory = catchup.from_memory = lambda *a: None  # type: ignore[assignment]
                try:
                    out[f"ledger record(), {batch} per save, {name}"] = timed(
                        lambda: [ml.record(cmds[i:i + batch]) for i in range(0, n_batch, batch)]) / n_batch
                finally:
                    catchup.BULK_MIN = shipped
                    replay_bulk.from_memory, catchup.from_memory = served
            rows = stored_rows(ml)[-n_batch:]
            events = ledger_events(ml, n_batch)
    finally:
        store.drop()
    # The same batched append on a store without per-user encryption: what crypto-shredding costs per event.
    store = Store(dsn)
    os.environ["MEMLEDGER_ENCRYPTION"] = "off"
    try:
        with store.open() as ml:
            cmds = commands(n_batch, run * 10 + 4)
            out[f"ledger, {batch} per save, encryption off"] = timed(
                lambda: [ml.app.execute(cmds[i:i + batch]) for i in range(0, n_batch, batch)]) / n_batch
    finally:
        del os.environ["MEMLEDGER_ENCRYPTION"]
        store.drop()
    out[f"eventsourcing alone, {batch} per save (minimal aggregate)"] = bench_library(dsn, n_batch, batch)
    out[f"eventsourcing alone, {batch} per save, the ledger's events"] = bench_library(dsn, n_batch, batch, events)
    out["eventsourcing alone, 1 per save (minimal aggregate)"] = bench_library(dsn, n_single, 1)
    out.update(bench_raw(dsn, rows))
    return out


def ledger_events(ml: MemoryLedger, n: int) -> list[Any]:
    """The last ``n`` events of the ledger's log as domain events, decoded (and decrypted) by its own mapper: the
    payload the ``the ledger's events`` row hands the library."""
    stored = ml.app.recorder.select_notifications(start=max(1, ml.app.recorder.max_notification_id() - n + 1),
                                                  limit=n)
    return [ml.app.mapper.to_domain_event(s) for s in stored]


def bench_library(dsn: str | None, n: int, batch: int, events: list[Any] | None = None) -> Timing:
    """Per-event seconds of eventsourcing itself, ``batch`` per save: new one-event aggregates with a small payload
    (``events`` None), or the ledger's own events saved as they are (``events``: plaintext, the library's mapper and
    transcoder, none of the ledger's policy, keys or encryption).

    The library's ceiling on this machine, in this run: the gap between the minimal row and the ledger rows is ours
    (policy, validation, encryption, stream-existence checks) plus what the library itself pays for the ledger's
    larger events, which the ``events`` row measures alone; the gap between it and the raw rows is the library's.
    """
    from eventsourcing.application import Application

    d = tempfile.mkdtemp(prefix="bench_lib_")
    schema = f"bench_lib_{uuid.uuid4().hex[:10]}"
    if dsn:
        from ledger.config import Settings
        from projections.db import ensure_schema

        ensure_schema(dsn, schema)
        env = Settings.resolve(dsn=dsn, schema=schema).event_store_env()
    else:
        env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": os.path.join(d, "lib.db")}
    app = Application(env=env)
    try:
        def run() -> None:
            for i in range(0, n, batch):
                if events is None:
                    app.save(*[Note(f"the user said note {j}") for j in range(i, min(n, i + batch))])
                else:
                    app.save(*events[i:i + batch])

        return timed(run) / n
    finally:
        app.close()
        shutil.rmtree(d, ignore_errors=True)
        if dsn:
            import psycopg

            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def bench_raw(dsn: str | None, rows: list[tuple[uuid.UUID, int, str, bytes]]) -> dict[str, Timing]:
    """Per-row seconds of the driver alone writing ``rows`` into an equivalent table, one transaction each way."""
    n = len(rows)
    out = {}
    if dsn is None:
        import sqlite3

        d = tempfile.mkdtemp(prefix="bench_raw_")
        try:
            conn = sqlite3.connect(os.path.join(d, "raw.db"), isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE stored_events (originator_id TEXT, originator_version INTEGER, topic TEXT, "
                         "state BLOB, notification_id INTEGER PRIMARY KEY AUTOINCREMENT, "
                         "UNIQUE (originator_id, originator_version))")
            srows = [(str(a), b, c, s) for a, b, c, s in rows]

            def insert() -> None:
                conn.execute("BEGIN")
                conn.executemany("INSERT INTO stored_events (originator_id, originator_version, topic, state) "
                                 "VALUES (?, ?, ?, ?)", srows)
                conn.execute("COMMIT")

            out["raw sqlite3 executemany, 1 transaction"] = timed(insert) / n
            conn.close()
        finally:
            shutil.rmtree(d, ignore_errors=True)
        return out

    import psycopg

    schema = f"bench_raw_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        try:
            for how in ("executemany", "COPY"):
                table = f'"{schema}".events_{how.lower()}'
                conn.execute(f"CREATE TABLE {table} (originator_id uuid NOT NULL, originator_version bigint NOT "
                             "NULL, topic text, state bytea, notification_id bigserial, "
                             "PRIMARY KEY (originator_id, originator_version))")

                def insert(table: str = table, how: str = how) -> None:
                    with conn.transaction(), conn.cursor() as cur:
                        if how == "COPY":
                            with cur.copy(f"COPY {table} (originator_id, originator_version, topic, state) "
                                          "FROM STDIN") as cp:
                                for r in rows:
                                    cp.write_row(r)
                        else:
                            cur.executemany(f"INSERT INTO {table} (originator_id, originator_version, topic, state) "
                                            "VALUES (%s, %s, %s, %s)", rows)

                out[f"raw psycopg {how}, 1 transaction"] = timed(insert) / n
        finally:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default=None, help="postgresql://... to bench PostgreSQL (default: SQLite)")
    ap.add_argument("--single", type=int, default=300, help="commands timed one per save (default 300)")
    ap.add_argument("--events", type=int, default=5000, help="commands timed in batches (default 5000)")
    ap.add_argument("--batch", type=int, default=100, help="commands per save when batched (default 100)")
    ap.add_argument("--repeat", type=int, default=3, help="runs, each on a fresh store; medians (default 3)")
    ap.add_argument("--bulk-min", type=int, default=None,
                    help="catch-up span from which record() uses the bulk writers in the 'inline projections' row "
                         f"(default replay.catchup.BULK_MIN = {catchup.BULK_MIN}; to choose it)")
    ap.add_argument("--profile", default=None, metavar="PATH",
                    help="profile one more batched record() with pyinstrument; write its text report to PATH")
    a = ap.parse_args(argv)
    for name in ("single", "events", "batch", "repeat"):
        if getattr(a, name) < 1:
            ap.error(f"--{name} must be at least 1")
    if a.bulk_min is not None and a.bulk_min < 1:
        ap.error("--bulk-min must be at least 1")
    load = os.getloadavg()
    runs = [bench_ledger(a.dsn, a.single, a.events, a.batch, r, a.bulk_min) for r in range(a.repeat)]
    med = {k: Timing(statistics.median(r[k].wall for r in runs), statistics.median(r[k].cpu for r in runs))
           for k in runs[0]}
    baseline = min((k for k in med if k.startswith("raw")), key=lambda k: med[k].wall)
    library = f"eventsourcing alone, {a.batch} per save (minimal aggregate)"
    backend = "PostgreSQL" if a.dsn else "SQLite"
    print(f"bench_append: {backend}, {a.single} commands one per save, {a.events} in batches of {a.batch}, "
          f"median of {a.repeat} runs; ratio = events/s / {baseline!r}; load average {load[0]:.2f} at start, "
          f"{os.getloadavg()[0]:.2f} at end")
    width = max(len(k) for k in med)
    print("(events/s and us/event by the wall clock; CPU: this process's CPU time per event; ratio: wall, to the "
          "raw baseline; vs library: wall events/s over 'eventsourcing alone' of the same runs)")
    print(f"| {'method':<{width}} | {'events/s':>10} | {'us/event':>9} | {'CPU us/ev':>9} | {'ratio':>6} | "
          f"{'vs library':>10} |")
    print(f"|{'-' * (width + 2)}|{'-' * 12}:|{'-' * 10}:|{'-' * 10}:|{'-' * 7}:|{'-' * 11}:|")
    for k, per in med.items():
        print(f"| {k:<{width}} | {1 / per.wall:>10,.0f} | {per.wall * 1e6:>9.1f} | {per.cpu * 1e6:>9.1f} | "
              f"{med[baseline].wall / per.wall:>6.3f} | {med[library].wall / per.wall:>10.2f} |")
    single_lib = med["eventsourcing alone, 1 per save (minimal aggregate)"].wall
    shaped = med[f"eventsourcing alone, {a.batch} per save, the ledger's events"].wall
    print(f"the library saving the ledger's own events: {med[library].wall / shaped:.2f} x its minimal-aggregate rate; "
          f"the ledger's append {shaped / med[f'ledger, {a.batch} per save'].wall:.2f} x, encryption off "
          f"{shaped / med[f'ledger, {a.batch} per save, encryption off'].wall:.2f} x, record() inline "
          f"{shaped / med[f'ledger record(), {a.batch} per save, inline projections'].wall:.2f} x that rate")
    print(f"one command per save, users known: {single_lib / med['ledger, 1 per save, users known'].wall:.2f} x "
          "eventsourcing alone one event per save")
    print(f"one command per save: {single_lib / med['ledger, 1 per save'].wall:.2f} x eventsourcing alone one event "
          f"per save (target >= 0.6); record() inline: "
          f"{med[library].wall / med[f'ledger record(), {a.batch} per save, inline projections'].wall:.2f} x "
          f"eventsourcing alone (target >= 0.6); ledger append: "
          f"{med[library].wall / med[f'ledger, {a.batch} per save'].wall:.2f} x (target >= 0.9)")
    batched = 1 / med[f"ledger, {a.batch} per save"].wall
    target = 15_000 if a.dsn else 30_000
    print(f"batched ledger append: {batched:,.0f} events/s (target >= {target:,}: "
          f"{'met' if batched >= target else 'NOT met'})")
    if a.profile:
        profile_record(a.dsn, a.events, a.batch, a.profile)
    return 0


def profile_record(dsn: str | None, n: int, batch: int, path: str) -> None:
    """``record()`` of ``n`` commands, ``batch`` per save, on a fresh store under pyinstrument -> text at ``path``."""
    from pyinstrument import Profiler

    store = Store(dsn)
    try:
        with store.open() as ml:
            cmds = commands(n, 99)
            ml.record(commands(batch, 98))  # untimed: first-use costs (table creation, key creation)
            prof = Profiler(interval=0.0005)
            prof.start()
            for i in range(0, n, batch):
                ml.record(cmds[i:i + batch])
            prof.stop()
    finally:
        store.drop()
    Path(path).write_text(prof.output_text(unicode=True, color=False, show_all=False), encoding="utf-8")
    print(f"profile of record(): {path}")


if __name__ == "__main__":
    sys.exit(main())
