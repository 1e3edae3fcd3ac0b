#!/usr/bin/env python
"""Latency of a Chinese question over a user holding English memories (projections/retrieval/cross_language.py).

One store, one user with ``--memories`` English memories and 20 Chinese ones. Measured, in process:

* the first CJK query (it makes the companion vectors of the newest English memories itself, hands the rest to a
  worker) and how long the worker takes;
* warm CJK queries (``--n``, p50 / p95) with the cross-language path on and off (off: the companion judges the
  Chinese memories only, the English ones by their words);
* a reopened store's first CJK query (every vector from the embedding cache, no model run).

The 1-minute load average is printed beside each figure (2-core machine shared with other jobs).

    .venv/bin/python scripts/bench_crosslang.py [--memories 1000] [--n 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from scripts.bench_remember import filler  # noqa: E402

QUESTIONS = ["我们在花园里做了什么？", "我记得关于读书会的什么？", "出差的时候发生了什么？", "我对邻居有什么抱怨？",
             "我们拍了哪些照片？", "周末集市怎么样？", "我们讨论过哪个播客？", "博物馆那天我们做了什么？"]


def load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memories", type=int, default=1000)
    ap.add_argument("--n", type=int, default=30)
    args = ap.parse_args()
    from memledger import MemoryLedger

    def timed(ml, q: str) -> float:
        t = time.perf_counter()
        ml.search("u", q, k=8)
        return (time.perf_counter() - t) * 1000

    def warm(ml, tag: str) -> tuple[float, float]:  # new questions each time: no query vector cached
        xs = [timed(ml, QUESTIONS[i % len(QUESTIONS)] + f"（{tag}{i}）") for i in range(args.n)]
        return statistics.median(xs), sorted(xs)[int(0.95 * (len(xs) - 1))]

    with tempfile.TemporaryDirectory() as d:
        home = Path(d) / "l"
        with MemoryLedger(home=home, embedder="minilm") as ml:
            texts = filler(args.memories) + filler(20, "zh")
            ml.record([{"user_id": "u", "key": f"memory.m{i}", "value": t, "text": t} for i, t in enumerate(texts)])
            ml.search("u", "warm up", k=1)  # the main model's 1k vectors and the companion's 20, not timed
            proj = ml.vectors_projection
            proj.embed_cjk_query("热身")  # the companion's model loaded, not timed
            print(f"## a Chinese question over {args.memories} English and 20 Chinese memories of one user; "
                  f"embedder {proj.model_id}, companion {proj.cjk_model_id}\n")
            print("| measure | ms | load |")
            print("|---|---|---|")
            proj.cross_language = False
            p50, p95 = warm(ml, "关")
            print(f"| warm CJK query, cross-language path off: p50 / p95 | {p50:.1f} / {p95:.1f} | {load()} |")
            proj.cross_language = True
            first = timed(ml, "我们在花园里做了什么？")
            print(f"| first CJK query (embeds the newest {proj.cross_sync_docs} English memories, a worker the rest)"
                  f" | {first:.0f} | {load()} |")
            t = time.perf_counter()
            proj.cross_wait()
            print(f"| the worker: {args.memories - proj.cross_sync_docs} English memories embedded after it | "
                  f"{(time.perf_counter() - t) * 1000 + first:.0f} | {load()} |")
            timed(ml, "我们在花园里做了什么？")  # picks the worker's vectors up from the cache
            p50, p95 = warm(ml, "开")
            print(f"| warm CJK query, cross-language path on: p50 / p95 | {p50:.1f} / {p95:.1f} | {load()} |")
        with MemoryLedger(home=home, embedder="minilm") as ml:
            ml.search("u", "warm up", k=1)
            ml.vectors_projection.cross_language = False
            timed(ml, "热身了吗？")  # the companion's first real query, not timed
            ml.vectors_projection.cross_language = True
            first = timed(ml, "我记得关于读书会的什么？")
            print(f"| reopened store, first CJK query (companion vectors from the embedding cache) | {first:.0f} | "
                  f"{load()} |")


if __name__ == "__main__":
    main()
