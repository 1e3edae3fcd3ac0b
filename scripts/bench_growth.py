"""Does appending slow down as the store grows? Throughput per window of events, from an empty store to ``--events``.

    python scripts/bench_growth.py                      # SQLite, 200k facts, batches of 2000, windows of 20k
    python scripts/bench_growth.py --compare            # beside a store built with random (uuid4) event ids
    python scripts/bench_growth.py --dsn postgresql://postgres@127.0.0.1:5432/test --events 50000

The store is built through the public API, ``MemoryLedger.record(batch)`` (validation, policy, encryption, one save,
inline catch-up of the non-deferred projections), with the shape of scripts/bench_search.py: ``--batch`` new facts
per call, one user per ``--per-user`` facts. For each window of ``--window`` events it prints events/s by the wall
clock and by this process's CPU time (the CPU figure is steadier on a shared machine), and on SQLite what the
process asked of the kernel per event (``/proc/self/io``: read syscalls and KB written, i.e. SQLite page reads and
WAL / checkpoint writes). ``ratio`` = the window's events/s over the first window's: 1.0 means no slowdown.

``--compare`` builds a second store in lockstep (batch for batch, so both see the same machine load) whose facts get
uuid4 event ids, as before ledger.domain.new_event_id; the difference between the two columns is what the
time-ordered ids buy. Nothing here is asserted: speed is reported, never tested.
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MEMLEDGER_EMBEDDER", "hash")  # vectors are deferred: record() never embeds

import ledger.domain as domain  # noqa: E402
from memledger import MemoryLedger  # noqa: E402


def proc_io() -> dict[str, int]:
    """This process's I/O counters (Linux ``/proc/self/io``); empty where there is none."""
    try:
        with open("/proc/self/io") as f:
            return {k: int(v) for k, v in (line.split(":") for line in f)}
    except OSError:
        return {}


class Store:
    """One ledger being grown, with its counters for the current window."""

    def __init__(self, name: str, dsn: str | None, random_ids: bool) -> None:
        self.name, self.dsn, self.random_ids = name, dsn, random_ids
        self.dir = tempfile.mkdtemp(prefix="bench_growth_")
        self.schema = f"bench_growth_{uuid.uuid4().hex[:10]}"
        self.ml = MemoryLedger(dsn=dsn, schema=self.schema) if dsn else MemoryLedger(home=Path(self.dir) / "l")
        self.wall = self.cpu = 0.0
        self.io: dict[str, int] = {}
        self.rows: list[tuple[float, float]] = []  # (wall events/s, cpu events/s) per window

    def record(self, cmds: list[dict[str, Any]]) -> None:
        saved = domain.new_event_id
        if self.random_ids:
            domain.new_event_id = lambda: str(uuid.uuid4())
        before = proc_io()
        w, c = time.perf_counter(), time.process_time()
        try:
            self.ml.record(cmds)
        finally:
            self.wall += time.perf_counter() - w
            self.cpu += time.process_time() - c
            domain.new_event_id = saved
            for k, v in proc_io().items():
                self.io[k] = self.io.get(k, 0) + v - before.get(k, 0)

    def window(self, n: int) -> str:
        """Close the current window of ``n`` events; returns its table cells."""
        self.rows.append((n / self.wall, n / self.cpu))
        first = self.rows[0]
        cells = (f"{n / self.wall:>8,.0f} | {n / self.cpu:>8,.0f} | {self.rows[-1][1] / first[1]:>5.2f} | "
                 + (f"{self.io.get('syscr', 0) / n:>5.1f} | {self.io.get('wchar', 0) / n / 1024:>6.1f}"
                    if self.io else "    - |      -"))
        self.wall = self.cpu = 0.0
        self.io = {}
        return cells

    def close(self) -> None:
        self.ml.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.dsn:
            import psycopg

            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')


def batch(start: int, n: int, per_user: int) -> list[dict[str, Any]]:
    """``n`` assert commands on new facts ``memory.m<i>``, one user per ``per_user`` facts."""
    return [{"user_id": f"user{(start + j) // per_user:05d}", "key": f"memory.m{start + j}", "value": start + j,
             "text": f"the user mentioned thing number {start + j} in passing"} for j in range(n)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default=None, help="postgresql://... to grow a PostgreSQL store (default: SQLite)")
    ap.add_argument("--events", type=int, default=200_000, help="facts recorded in all (default 200000)")
    ap.add_argument("--batch", type=int, default=2000, help="facts per record() call (default 2000)")
    ap.add_argument("--per-user", type=int, default=5000, help="facts per user (default 5000)")
    ap.add_argument("--window", type=int, default=20_000, help="events per reported window (default 20000)")
    ap.add_argument("--compare", action="store_true", help="grow a store with uuid4 event ids alongside")
    a = ap.parse_args(argv)
    for name in ("events", "batch", "per_user", "window"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if a.window % a.batch or a.events % a.window:
        ap.error("--window must be a multiple of --batch, and --events a multiple of --window")
    stores = [Store("uuid7 ids (now)", a.dsn, False)]
    if a.compare:
        stores.append(Store("uuid4 ids (before)", a.dsn, True))
    load = os.getloadavg()
    print(f"bench_growth: {'PostgreSQL' if a.dsn else 'SQLite'}, {a.events:,} facts by record() of {a.batch}, "
          f"{a.per_user} per user; load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("per store: events/s wall | events/s CPU | CPU ratio to first window | read syscalls/event | KB "
          "written/event")
    print("| events | " + " | ".join(f"{s.name}: wall/s | CPU/s | ratio | rd/ev | KB/ev" for s in stores) + " |")
    print("|---:|" + "---:|" * 5 * len(stores))
    try:
        for start in range(0, a.events, a.batch):
            for s in stores:
                s.record(batch(start, a.batch, a.per_user))
            done = start + a.batch
            if done % a.window == 0:
                print(f"| {done:>7,} | " + " | ".join(s.window(a.window) for s in stores) + " |", flush=True)
    finally:
        for s in stores:
            s.close()
    for s in stores:
        cpu = [c for _, c in s.rows]
        half = max(1, len(cpu) // 4)
        print(f"{s.name}: CPU events/s, median of the last {half} windows / the first {half}: "
              f"{statistics.median(cpu[-half:]) / statistics.median(cpu[:half]):.2f}")
    print(f"load average at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
