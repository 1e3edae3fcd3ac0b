"""What projection sealing (ledger/sealing.py) costs on reads: the same store content written with sealing on and
off, in one process, then a warm ``profile`` read, a warm ``search`` and a first search (the user's index loaded
from the rows) timed on each. Prints medians and the ratio sealed / unsealed (target: within 1.15 for profile and
warm search), with the load average.

Usage: python scripts/bench_sealing.py [--facts 300] [--repeat 200] [--embedder hash]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memledger import MemoryLedger  # noqa: E402

WORDS = "tea coffee Lyon Berlin chess violin dentist locker rent train bike garden piano sister Monday 杭州 西湖".split()


def fill(ml: MemoryLedger, facts: int) -> None:
    ml.record([{"user_id": "u1", "key": f"memory.n{i}", "value": f"note {i}",
                "text": " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(10)) + f" number {i}"}
               for i in range(facts)])


def timed(fn, n: int) -> float:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out) * 1000


def run(sealing: str, args: argparse.Namespace, home: Path) -> dict[str, float]:
    os.environ["MEMLEDGER_PROJECTION_SEALING"] = sealing
    with MemoryLedger(home=home, embedder=args.embedder) as ml:
        fill(ml, args.facts)
        ml.search("u1", "warm up", k=10)
    res = {}
    with MemoryLedger(home=home, embedder=args.embedder) as ml:  # a fresh process's view: the index is loaded
        t = time.perf_counter()
        ml.profile("u1")
        res["profile (first read)"] = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        ml.search("u1", "violin lessons", k=10)
        res["first search (index load)"] = (time.perf_counter() - t) * 1000
        res["profile (warm)"] = timed(lambda: ml.profile("u1"), args.repeat)
        res["search k=10 (warm)"] = timed(lambda: ml.search("u1", "piano and chess on Monday", k=10), args.repeat)
        res["history one key"] = timed(lambda: ml.history("u1", "memory.n7"), args.repeat)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--facts", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--embedder", default="hash")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        off = run("off", args, Path(d) / "off")
        on = run("on", args, Path(d) / "on")
        off2 = run("off", args, Path(d) / "off2")  # the baseline twice: the spread of the machine itself
    load = os.getloadavg()
    print(f"projection sealing, {args.facts} facts of one user, {args.repeat} reads each, embedder {args.embedder}, "
          f"load {load[0]:.2f} {load[1]:.2f}")
    print(f"{'measure':30} {'off ms':>9} {'on ms':>9} {'on/off':>7} {'off2/off':>9}")
    for k in off:
        base = min(off[k], off2[k])
        print(f"{k:30} {base:9.3f} {on[k]:9.3f} {on[k] / base:7.2f} {off2[k] / off[k]:9.2f}")


if __name__ == "__main__":
    main()
