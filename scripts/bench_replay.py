"""Benchmark: full rebuild of the profile + history projections, against the library's own decode rate.

    python scripts/bench_replay.py                 # 1,000,000 events (the store is built once, then reused)
    python scripts/bench_replay.py --events 100000 --repeat 3
    python scripts/bench_replay.py --events 200000 --repeat 3 --no-in-place --dsn postgresql://postgres@127.0.0.1:5432/test

Baseline, measured in the same process on the same notifications: eventsourcing's ``select_notifications`` +
``Mapper.to_domain_event`` of every event (select + decode: the least any replay must do). Then ``rebuild`` of
profile + history from position 0, blue/green (build beside, switch, drop) and in place (one transaction); both
take the bulk path (replay/bulk.py), ``--batch-size`` events per flush (default: ``replay.rebuild.default_batch()``, as a rebuild chooses). Each is
run ``--repeat`` times; the table shows medians and the ratio of events/s to the baseline's. Target:
blue/green >= 60% of the decode rate (0.6x).

The store: ``--events`` fact commands through ``LedgerApplication.execute`` in batches of 1000 (one save each):
``--users`` users x 20 keys, mostly changes of mind, with corrections (~5%) and retractions (~2%) - so history
applies the ``changes`` of supersedes and corrections, not only inserts. Per-user encryption is off for this store
(``MEMLEDGER_ENCRYPTION=off``) so the baseline is the library's own Mapper, not our encrypting one.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["MEMLEDGER_ENCRYPTION"] = "off"
os.environ["MEMLEDGER_EMBEDDER"] = "none"  # profile + history only: no vectors projection, no model

KEYS = [f"k{j:02d}" for j in range(20)]


def build_store(home: Path | None, n: int, users: int, dsn: str | None = None, schema: str | None = None) -> None:
    """Write ``n`` events (no projections: they are what the benchmark rebuilds) into the SQLite store ``home``, or
    the PostgreSQL schema ``schema`` of ``dsn``."""
    from ledger.application import LedgerApplication
    from ledger.config import Settings
    from ledger.schemas import validate_command

    if home is not None:
        home.mkdir(parents=True, exist_ok=True)
    settings = Settings.resolve(home, dsn, schema)
    settings.prepare_event_store()
    app = LedgerApplication(env=settings.event_store_env())
    rng = random.Random(6)
    has_value: set[tuple[int, str]] = set()
    t0 = time.perf_counter()
    done = 0
    while done < n:
        batch, streams = [], set()
        while len(batch) < min(1000, n - done, users * len(KEYS)):  # at most one command per stream per batch
            u, k = rng.randrange(users), rng.choice(KEYS)
            if (u, k) in streams:  # one command per stream per batch keeps the policy's input simple
                continue
            streams.add((u, k))
            roll = rng.random()
            if (u, k) in has_value and roll < 0.05:
                cmd = {"op": "correct", "value": rng.randrange(10**6), "reason": "misheard"}
            elif (u, k) in has_value and roll < 0.07:
                cmd = {"op": "retract", "reason": "forget that"}
                has_value.discard((u, k))
            else:
                cmd = {"op": "assert", "value": rng.randrange(10**6)}
                has_value.add((u, k))
            batch.append(validate_command({"user_id": f"user{u}", "key": f"pref.{k}", **cmd}))
        app.execute(batch)
        done += len(batch)
        if done % 100_000 == 0:
            print(f"  built {done:,} events ({done / (time.perf_counter() - t0):,.0f}/s)", file=sys.stderr)
    app.close()


def decode_all(app, page: int = 5000) -> int:
    """The baseline: select every notification and decode it with the application's (library) mapper."""
    n, start = 0, 1
    to_domain_event = app.mapper.to_domain_event
    while True:
        notifications = app.recorder.select_notifications(start=start, limit=page)
        if not notifications:
            return n
        for notification in notifications:
            to_domain_event(notification)
        n += len(notifications)
        start = notifications[-1].id + 1


#: the row timing the rebuilt rows' inserts alone (see :func:`insert_rows_alone`)
INSERTS = "inserts of the rebuilt rows alone"


def insert_rows_alone(ml) -> float:
    """Seconds to write every row the rebuild wrote — profile and history, read back from the serving copies (not
    timed) — into empty copies without secondary indexes, with the flush's own ``insert_rows`` (executemany on
    SQLite, COPY on PostgreSQL), in one transaction: what a rebuild keeping these rows pays for its writes even
    with no rules applied and no reads. Beside select + decode it bounds the rate a single-threaded rebuild can
    reach."""
    from projections.base import insert_rows

    copies = []
    for p in ml.projections:
        if p.name in ("profile", "history"):
            with ml.db.read() as cur:
                held = {}
                for short in p.tables:
                    cur.execute(f"SELECT * FROM {p.table(short)}")
                    cols = [d[0] for d in cur.raw.description]
                    held[short] = (cols, [tuple(r) for r in cur.fetchall()])
            copies.append((p.clone("insertsonly"), held))
    with ml.db.transaction() as cur:
        for c, _ in copies:
            c.drop(cur)
            c.indexes = []
            c.create(cur)
    t = time.perf_counter()
    with ml.db.transaction() as cur:
        for c, held in copies:
            for short, (cols, table_rows) in held.items():
                insert_rows(cur, c.table(short), cols, table_rows)
    took = time.perf_counter() - t
    with ml.db.transaction() as cur:
        for c, _ in copies:
            c.drop(cur)
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--users", type=int, default=None, help="default: events / 100")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=None, help="events per flush (default: replay.rebuild.default_batch())")
    ap.add_argument("--no-in-place", action="store_true", help="skip the in-place rebuild (halves the run time)")
    ap.add_argument("--verify", action="store_true", help="afterwards, verify the copies against a full replay")
    ap.add_argument("--home", default=None, help="store directory (default /tmp/memledger-bench-replay-<events>)")
    ap.add_argument("--dsn", default=None, help="postgresql://... : bench PostgreSQL instead of SQLite")
    ap.add_argument("--schema", default=None, help="PostgreSQL schema (default bench_replay_<events>)")
    args = ap.parse_args()
    users = args.users or max(1, args.events // 100)
    if args.batch_size is None:
        from replay.rebuild import default_batch

        args.batch_size = default_batch()
    from memledger import MemoryLedger
    from replay.catchup import max_position

    if args.dsn is None:
        home: Path | None = Path(args.home or f"/tmp/memledger-bench-replay-{args.events}")
        store = {"home": home}
        if not (home / "events.db").exists():
            print(f"building a store of {args.events:,} events in {home} (once) ...", file=sys.stderr)
            build_store(home, args.events, users)
        args.where = str(home)
    else:
        args.schema = args.schema or f"bench_replay_{args.events}"
        store = {"dsn": args.dsn, "schema": args.schema}
        with MemoryLedger(**store) as ml:
            empty = max_position(ml.app) == 0
        if empty:
            print(f"building a store of {args.events:,} events in schema {args.schema} (once) ...", file=sys.stderr)
            build_store(None, args.events, users, args.dsn, args.schema)
        args.where = f"PostgreSQL schema {args.schema}"
    with MemoryLedger(**store) as ml:
        import eventsourcing.persistence

        assert type(ml.app.mapper) is eventsourcing.persistence.Mapper, "baseline must be the library's Mapper"
        n = max_position(ml.app)
        rows: dict[str, list[float]] = {"select + decode (eventsourcing Mapper)": [],
                                        "rebuild profile+history --blue-green": [],
                                        "rebuild profile+history in place": [],
                                        INSERTS: []}
        for r in range(args.repeat):
            t = time.perf_counter()
            assert decode_all(ml.app) == n
            rows["select + decode (eventsourcing Mapper)"].append(time.perf_counter() - t)
            modes = [("--blue-green", True)] + ([] if args.no_in_place else [("in place", False)])
            for mode, blue_green in modes:
                report = ml.rebuild(["profile", "history"], blue_green=blue_green, batch_size=args.batch_size)
                assert report.events == n, report
                rows[f"rebuild profile+history {mode}"].append(report.seconds)
            rows[INSERTS].append(insert_rows_alone(ml))
            print(f"  round {r + 1}/{args.repeat} done", file=sys.stderr)
        report_table(rows, n, users, args)
        if args.verify:  # a sanity check, as long as one more rebuild: after the table
            from replay.verify import verify

            two = [p for p in ml.projections if p.name in ("profile", "history")]
            assert all(v.ok for v in verify(ml.app, ml.db, two)), "rebuilt copies differ from a replay"
            print("verify: profile and history equal a full replay", file=sys.stderr)


def report_table(rows: dict[str, list[float]], n: int, users: int, args: argparse.Namespace) -> None:
    """Print the markdown table: median seconds, events/s and the ratio to the select + decode baseline."""
    base = statistics.median(rows["select + decode (eventsourcing Mapper)"])
    print(f"\nreplay benchmark: {n:,} events (store {args.where}), batch {args.batch_size}, "
          f"median of {args.repeat} (python {sys.version.split()[0]}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f} at the end)\n")
    print(f"| {'what':<40} | {'median s':>9} | {'events/s':>10} | {'vs decode':>9} |")
    print(f"|{'-' * 42}|{'-' * 11}|{'-' * 12}|{'-' * 11}|")
    for what, times in rows.items():
        if not times:
            continue
        med = statistics.median(times)
        print(f"| {what:<40} | {med:>9.2f} | {n / med:>10,.0f} | {base / med:>8.0%} |")
    if rows.get(INSERTS):
        floor = base + statistics.median(rows[INSERTS])
        print(f"\nselect + decode and the inserts alone, one after the other (no rules, no reads): {floor:.2f} s, "
              f"{base / floor:.0%} of the decode rate: the most a single-threaded rebuild writing these rows reaches")
    ratio = base / statistics.median(rows["rebuild profile+history --blue-green"])
    print(f"\nblue/green rebuild runs at {ratio:.0%} of the library's decode rate (target >= 60%)")


if __name__ == "__main__":
    main()
