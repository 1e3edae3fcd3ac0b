#!/usr/bin/env python
"""Latency of ``remember`` (issue 13: warm, in process, English, 1k memories per user, embedding included).

One store, one user holding ``--memories`` free-text memories (recorded in bulk, then embedded by one search), a
few warm-up calls, then ``--n`` remembers of new English statements (new slots, changes of mind, paraphrases,
unslotted memories, in a fixed mix), measured one by one. In the same process, interleaved round by round with
the remembers so that machine load hits all alike, two baselines:

* ``assert_fact`` of a keyed fact (the write without resolution; the vectors projection is deferred, so no
  embedding), and
* one MiniLM ``embed_query`` of a new sentence (what the machine's load does to the model alone), and
* ``search(k=8)`` of a new question (query embedding + dense and BM25 ranking): the retrieval half of a remember.

A remember embeds its sentence once (the candidate search's vector is reused for the index when the model is
symmetric, as MiniLM is), so its cost is about one search plus the typing, the rules and one save.

Medians of ``--rounds`` rounds, p50/p95 over all calls, ratios vs the baselines, and the 1-minute load average
before and after each round (2-core machine shared with other jobs: compare ratios, not absolute figures).

    .venv/bin/python scripts/bench_remember.py [--embedder minilm] [--memories 1000] [--n 60] [--rounds 3]
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

SUBJECTS = ["the garden", "my commute", "the book club", "a work trip", "the new cafe", "our neighbours",
            "the weekend market", "a podcast", "the football match", "the museum", "my sister's wedding",
            "the team meeting", "a rainy afternoon", "the train strike", "a birthday dinner", "the gym class"]
VERBS = ["talked about", "remembered", "complained about", "laughed at", "wrote a note on", "planned around",
         "took photos of", "read an article on", "argued about", "made a list for"]
STATEMENTS = [
    "I switched to oat flat whites", "I moved to Porto in the spring", "I now work as a data analyst",
    "My favourite food is dumplings now", "We adopted a kitten named Pico", "I am allergic to kiwi",
    "I dropped the plan to learn the cello", "My brother lives in Oslo", "I listen to a lot of soul music now",
    "The plumber is coming on Thursday", "I started playing badminton on Sundays", "I drive a Volvo now",
    "I got a new ThinkPad for work", "My phone number is 555 0142", "Sorry, I meant I was born in 1987",
    "I'm still living in Porto", "I speak Portuguese too", "The landlord raised the rent again",
]


def filler(n: int) -> list[str]:
    out = []
    for i in range(n):
        s, v = SUBJECTS[i % len(SUBJECTS)], VERBS[(i // len(SUBJECTS)) % len(VERBS)]
        out.append(f"On day {i} we {v} {s} (note {i})")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--memories", type=int, default=1000)
    ap.add_argument("--n", type=int, default=60, help="remembers per round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    from memledger import MemoryLedger

    with tempfile.TemporaryDirectory() as d, MemoryLedger(home=Path(d) / "ledger", embedder=args.embedder) as ml:
        user = "bench"
        texts = filler(args.memories)
        for i in range(0, len(texts), 500):
            ml.record([{"user_id": user, "key": f"memory.f{i + j}", "value": t, "text": t}
                       for j, t in enumerate(texts[i:i + 500])])
        ml.search(user, "warm up", k=1)  # embeds the 1k memories once (not timed)
        for t in ("I like green tea", "I live in Lyon", "My cat is called Tofu"):
            ml.remember(user, t)  # warm: model, indexes, catalogue regexes
        rows = []
        all_rem, all_ass, all_sea = [], [], []
        n_mem = len(ml.profile(user).facts)
        for rnd in range(args.rounds):
            load0 = os.getloadavg()[0]
            rem, ass, sea, emb = [], [], [], []
            for i in range(args.n):
                text = STATEMENTS[i % len(STATEMENTS)]
                if rnd or i >= len(STATEMENTS):
                    text += f" (round {rnd}, {i})"
                t = time.perf_counter()
                ml.remember(user, text)
                rem.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                ml.assert_fact(user, f"bench.k{rnd}_{i}", i, text=text)
                ass.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                ml.search(user, f"what did I say about: {text}?", k=8)  # a query not embedded before
                sea.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                ml.vectors_projection.embedder.embed_query(f"one sentence never seen, {rnd} {i}: {text}")
                emb.append((time.perf_counter() - t) * 1000)
            load1 = os.getloadavg()[0]
            rows.append((rnd + 1, statistics.median(rem), statistics.median(ass), statistics.median(sea), load0,
                         load1, statistics.median(emb)))
            all_rem += rem
            all_ass += ass
            all_sea += sea

        def p(xs: list[float], q: float) -> float:
            xs = sorted(xs)
            return xs[min(len(xs) - 1, int(q * len(xs)))]

        print(f"## remember latency: embedder {ml.vectors_projection.model_id}, {n_mem} memories of one user at "
              f"start, {args.n} calls x {args.rounds} rounds, warm, in process")
        print()
        print("| round | remember p50 ms | assert_fact p50 ms | search k=8 p50 ms | one embedding p50 ms | "
              "remember / assert | remember / search | remember / embedding | load avg before / after |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r, a, b, c, l0, l1, e in rows:
            print(f"| {r} | {a:.1f} | {b:.1f} | {c:.1f} | {e:.1f} | {a / b:.1f} | {a / c:.2f} | {a / e:.2f} | "
                  f"{l0:.2f} / {l1:.2f} |")
        ma, mb, mc, me = (statistics.median(x[i] for x in rows) for i in (1, 2, 3, 6))
        print(f"| median of rounds | {ma:.1f} | {mb:.1f} | {mc:.1f} | {me:.1f} | {ma / mb:.1f} | {ma / mc:.2f} | "
              f"{ma / me:.2f} | |")
        print()
        print(f"all calls: remember p50 {p(all_rem, 0.5):.1f} ms, p95 {p(all_rem, 0.95):.1f} ms; "
              f"assert_fact p50 {p(all_ass, 0.5):.1f} ms; search p50 {p(all_sea, 0.5):.1f} ms; "
              f"target p50 <= 25 ms: {'met' if p(all_rem, 0.5) <= 25 else 'NOT MET'}")


if __name__ == "__main__":
    main()
