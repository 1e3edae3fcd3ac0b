"""What per-user encryption (crypto-shredding, docs/erasure.md) costs: writes and reads, encrypted vs plaintext.

Runs, in one process, the same work on a plaintext store (the baseline: ``LedgerApplication`` without a key store)
and on an encrypted one (``SQLiteKeyStore``, or ``PostgresKeyStore`` with ``--pg``), and prints a table with the
median of ``--repeat`` runs and the ratio to the baseline:

* ``append batch``: ``execute()`` of ``--events`` fact commands in batches of 100 (one save per batch) over
  ``--users`` users -- the ingest path;
* ``append single``: one command per save (the agent-turn path), ``--events // 10`` of them;
* ``decode``: select every notification and decode it with the application's mapper -- what catch-up, rebuilds
  and replays pay per event.

Usage: ``python scripts/bench_encryption.py [--events 2000] [--users 20] [--repeat 5] [--pg] [--key-cache-ttl S]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ledger.application import LedgerApplication  # noqa: E402
from ledger.crypto import MASTER_KEY_ENV
from ledger.keystores import PostgresKeyStore, SQLiteKeyStore  # noqa: E402
from ledger.privacy import KEY_CACHE_TTL  # noqa: E402
from ledger.schemas import validate_command  # noqa: E402

PG_DSN = os.environ.get("MEMLEDGER_TEST_DSN") or "postgresql://postgres@127.0.0.1:5432/test"


def commands(n: int, users: int, run: str) -> list:
    return [validate_command({
        "op": "assert", "user_id": f"user-{i % users}", "key": f"memory.k{i}",
        "value": f"{run} value {i}: the user said something personal, 我住在杭州 {i}",
        "observed_at": "2024-01-01T00:00:00Z", "idempotency_key": f"{run}-{i}",
    }) for i in range(n)]


def sqlite_env(d: Path) -> dict[str, str]:
    return {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(d / "events.db")}


def one_run(encrypted: bool, args: argparse.Namespace) -> dict[str, float]:
    run = uuid.uuid4().hex[:8]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        keystore = None
        schema = None
        if encrypted:
            if args.pg:
                schema = f"bench_{run}"
                keystore = PostgresKeyStore(PG_DSN, schema=schema, cache_ttl=args.key_cache_ttl)
            else:
                keystore = SQLiteKeyStore(d / "keys.db", cache_ttl=args.key_cache_ttl)
        app = LedgerApplication(env=sqlite_env(d), keystore=keystore)
        out = {}
        cmds = commands(args.events, args.users, run)
        t = time.perf_counter()
        for i in range(0, len(cmds), 100):
            app.execute(cmds[i:i + 100])
        out["append batch"] = len(cmds) / (time.perf_counter() - t)
        singles = commands(args.events // 10, args.users, run + "s")
        t = time.perf_counter()
        for c in singles:
            app.execute([c])
        out["append single"] = len(singles) / (time.perf_counter() - t)
        t = time.perf_counter()
        n = 0
        start = 1
        while True:
            notes = app.recorder.select_notifications(start=start, limit=1000)
            if not notes:
                break
            for note in notes:
                app.mapper.to_domain_event(note)
            n += len(notes)
            start = notes[-1].id + 1
        out["decode"] = n / (time.perf_counter() - t)
        app.close()
        if keystore is not None:
            keystore.close()
        if schema is not None:
            import psycopg

            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--pg", action="store_true", help="keys in PostgreSQL (the log stays SQLite)")
    ap.add_argument("--key-cache-ttl", type=float, default=KEY_CACHE_TTL,
                    help=f"seconds a live key stays cached (default {KEY_CACHE_TTL}, as MemoryLedger opens it)")
    args = ap.parse_args()
    os.environ.pop(MASTER_KEY_ENV, None)
    results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for _ in range(args.repeat):  # interleaved, so machine load hits both alike
        for enc in (False, True):
            results[enc].append(one_run(enc, args))
    store = "PostgresKeyStore" if args.pg else "SQLiteKeyStore"
    print(f"events={args.events} users={args.users} repeat={args.repeat} keys={store} "
          f"key_cache_ttl={args.key_cache_ttl}s (events/s, median)")
    print(f"| {'operation':<14} | {'plaintext':>10} | {'encrypted':>10} | {'ratio':>6} |")
    print(f"|{'-' * 16}|{'-' * 12}|{'-' * 12}|{'-' * 8}|")
    for op in ("append batch", "append single", "decode"):
        base = statistics.median(r[op] for r in results[False])
        enc = statistics.median(r[op] for r in results[True])
        print(f"| {op:<14} | {base:>10,.0f} | {enc:>10,.0f} | {enc / base:>6.2f} |")


if __name__ == "__main__":
    main()
