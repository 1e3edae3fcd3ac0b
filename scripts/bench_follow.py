"""What read-your-writes costs with a projection worker, beside inline projection, in one run.

    python scripts/bench_follow.py                       # SQLite (worker polls every 20 ms by default)
    python scripts/bench_follow.py --dsn postgresql://postgres@127.0.0.1:5432/test   # PostgreSQL (LISTEN/NOTIFY)

Each sample is one agent turn: write one fact, then read the user's profile and see that write.

* ``inline`` — ``MemoryLedger`` default: the write catches the projections up in process before it returns.
* ``worker`` — the writer opens the ledger with ``projection_mode="worker"`` (the write returns once the log has
  committed); a ``memledger project --follow`` **process** applies it; the read passes the receipt
  (``profile(user, after=receipt)``) and waits until the projections' tracking rows reach it.

Reported per mode (median and 90th percentile over ``--turns`` turns, after ``--warmup`` untimed ones): the write's
latency, the read's (including its wait), and the turn's total; the ratio is total vs inline's total. Speed is
measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MEMLEDGER_EMBEDDER", "none")  # the vectors projection's model is not what is measured

from memledger import MemoryLedger  # noqa: E402


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def turns(ml: MemoryLedger, n: int, warmup: int, worker: bool) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"write": [], "read": [], "turn": []}
    for i in range(n + warmup):
        t0 = time.perf_counter()
        r = ml.assert_fact("u1", f"note.n{i % 20}", f"value {i}")
        t1 = time.perf_counter()
        prof = ml.profile("u1", after=r if worker else None, timeout=30)
        t2 = time.perf_counter()
        assert prof.facts[f"note.n{i % 20}"].value == f"value {i}"  # read-your-writes held
        if i >= warmup:
            out["write"].append(t1 - t0)
            out["read"].append(t2 - t1)
            out["turn"].append(t2 - t0)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default=None, help="postgresql://... (default: SQLite in a temp directory)")
    ap.add_argument("--turns", type=int, default=100, help="timed turns per mode (default 100)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed turns first (default 5)")
    ap.add_argument("--interval", type=float, default=None, help="the worker's --interval (default: its own)")
    a = ap.parse_args(argv)
    if a.turns < 1 or a.warmup < 0:
        ap.error("--turns must be >= 1 and --warmup >= 0")
    tmp = tempfile.mkdtemp(prefix="bench_follow_")
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    store = {"dsn": a.dsn, "schema": schema} if a.dsn else {"home": str(Path(tmp) / "ledger")}
    flags = ["--dsn", a.dsn] if a.dsn else ["--home", store["home"]]
    env = dict(os.environ, MEMLEDGER_SCHEMA=schema)
    results = {}
    worker = None
    try:
        with MemoryLedger(**store) as ml:
            results["inline"] = turns(ml, a.turns, a.warmup, worker=False)
        cmd = [sys.executable, "-m", "memledger", *flags, "project", "--follow"]
        if a.interval is not None:
            cmd += ["--interval", str(a.interval)]
        worker = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True)
        worker.stderr.readline()  # "following the log ...": caught up and listening
        with MemoryLedger(**store, projection_mode="worker") as ml:
            results["worker"] = turns(ml, a.turns, a.warmup, worker=True)
    finally:
        if worker is not None:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
        if a.dsn:
            import psycopg

            with psycopg.connect(a.dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    backend = "PostgreSQL (worker wakes on LISTEN/NOTIFY)" if a.dsn else \
        f"SQLite (worker polls every {a.interval or 0.02:g} s)"
    print(f"bench_follow: {backend}; {a.turns} turns per mode (write one fact, read the profile that shows it); "
          "ms, median / p90; ratio = median turn vs inline")
    print("| mode   | write ms (med / p90) | read ms (med / p90) | turn ms (med / p90) | ratio |")
    print("|--------|---------------------:|--------------------:|--------------------:|------:|")
    base = statistics.median(results["inline"]["turn"])
    for mode, r in results.items():
        cells = [f"{statistics.median(r[k]) * 1e3:7.1f} / {pct(r[k], 0.9) * 1e3:6.1f}" for k in ("write", "read", "turn")]
        print(f"| {mode:<6} | {cells[0]:>20} | {cells[1]:>19} | {cells[2]:>19} | "
              f"{statistics.median(r['turn']) / base:5.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
