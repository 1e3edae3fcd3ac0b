"""Benchmark of sessions: logging messages, and reading resume / context, against baselines in-process.

Writes: N messages logged one per save and in batches (``record_session``), against N fact assertions in the same
batches (``record``) as the baseline — both are one aggregate event per command through the same Application and
catch-up loop. Reads: ``resume`` and ``context`` against ``profile`` (the plainest read) on the same store.

Runs with ``MEMLEDGER_EMBEDDER=none`` (no vectors projection) unless ``--embedder`` says otherwise, so the write
ratios compare the event paths, not the embedding model. Prints tables with medians (and ratios to the baseline).

    python scripts/bench_sessions.py [--n 400] [--repeat 5] [--embedder none]
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


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=400, help="events per write run")
    ap.add_argument("--repeat", type=int, default=5, help="runs per row (median reported)")
    ap.add_argument("--embedder", default="none", help="MEMLEDGER_EMBEDDER for the store (default none)")
    args = ap.parse_args()
    os.environ["MEMLEDGER_EMBEDDER"] = args.embedder
    from memledger import MemoryLedger

    n, repeat = args.n, args.repeat
    rows: list[tuple[str, float, float]] = []  # (label, median seconds per run, events per second)
    with tempfile.TemporaryDirectory() as home, MemoryLedger(home=home) as ml:
        def facts(run: int, batch: int) -> None:
            cmds = [{"user_id": f"f{run}-{batch}", "key": f"memory.k{i}", "value": f"fact {i}",
                     "observed_at": "2024-01-01T00:00:00Z"} for i in range(n)]
            for s in range(0, n, batch):
                ml.record(cmds[s:s + batch])

        def messages(run: int, batch: int) -> None:
            cmds = [{"op": "log", "user_id": f"m{run}-{batch}", "session_id": f"s{i // 50}", "role": "user",
                     "message_id": f"m{i}", "text": f"message {i}: see you next Friday",
                     "observed_at": "2024-01-01T00:00:00Z"} for i in range(n)]
            for s in range(0, n, batch):
                ml.record_session(cmds[s:s + batch])

        for label, fn, batch in (("facts, 100 per save (baseline)", facts, 100),
                                 ("messages, 100 per save", messages, 100),
                                 ("facts, 1 per save", facts, 1),
                                 ("messages, 1 per save", messages, 1)):
            times = []
            for run in range(repeat):
                t = time.perf_counter()
                fn(run, batch)
                times.append(time.perf_counter() - t)
            med = statistics.median(times)
            rows.append((label, med, n / med))
        base = rows[0][1]
        print(f"\nwrites: {n} events per run, median of {repeat} runs, embedder={args.embedder}")
        print(f"{'what':<34} {'median s':>9} {'events/s':>9} {'vs baseline':>11}")
        for label, med, eps in rows:
            print(f"{label:<34} {med:9.3f} {eps:9.0f} {med / base:10.2f}x")

        # Reads on one user with a 3-day-old task, 60 messages over 3 sessions, 40 facts, 3 summaries.
        u = "reader"
        ml.record([{"user_id": u, "key": f"memory.r{i}", "value": f"remembered thing {i}",
                    "observed_at": f"2024-05-0{1 + i % 5}T08:00:00Z"} for i in range(40)]
                  + [{"user_id": u, "key": "profile.timezone", "value": "Asia/Shanghai"}])
        for s in range(3):
            sid = f"day{s}"
            ml.session_start(u, sid, task="report", observed_at=f"2024-05-0{s + 1}T09:00:00Z")
            ml.record_session([{"op": "log", "user_id": u, "session_id": sid, "role": "user" if i % 2 else
                                "assistant", "message_id": f"x{i}", "text": f"turn {i}: let's do it in three "
                                "days, 三天后", "observed_at": f"2024-05-0{s + 1}T09:{i:02d}:00Z"}
                               for i in range(20)])
            ml.update_card(u, sid, add_decisions=[f"decision {s}"], add_questions=[f"question {s}?"])
            ml.summarize(u, sid, text=f"Summary of day {s}.")
        reads = (("profile (baseline)", lambda: ml.profile(u)),
                 ("resume", lambda: ml.resume(u, now="2024-05-06T09:00:00Z")),
                 ("context, budget 2000", lambda: ml.context(u, now="2024-05-06T09:00:00Z", budget=2000)),
                 ("context, budget 300", lambda: ml.context(u, now="2024-05-06T09:00:00Z", budget=300)))
        for _, fn in reads:  # warm up (tokenizer load, dateparser caches)
            fn()
        results = []
        for label, fn in reads:
            times = []
            for _ in range(max(repeat * 4, 20)):
                t = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t)
            results.append((label, _median_ms(times)))
        print(f"\nreads: one user (41 facts, 3 sessions x 20 messages, 3 summaries), median of "
              f"{max(repeat * 4, 20)} calls")
        print(f"{'what':<34} {'median ms':>10} {'vs baseline':>11}")
        for label, ms in results:
            print(f"{label:<34} {ms:10.2f} {ms / results[0][1]:10.2f}x")


if __name__ == "__main__":
    main()
