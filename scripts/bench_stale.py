#!/usr/bin/env python
"""Stale-dependency benchmark (the protocol of ../shared/seeds/001: "implicit stale dependency").

Part 1, the protocol, per user: set a preference ("I like to drink iced americano, no sugar"), verify it (a search
by a paraphrase finds it first), update it ("I'd rather have a hot latte now"), confirm (the receipt and the
profile show the new value), add distractor facts (other drinks mentioned in other keys, unrelated memories), and
re-ask by another paraphrase at every k from 1 to 20. A **stale read** is a hit that is an older version of the
preference (its text, or a version number below the last acknowledged one).

Part 2, under load: W writer threads keep changing their users' preferences while R reader threads search them;
writers and readers use *different* ledger objects on the same store (each with its own in-memory index, as
separate processes would). A reader notes the last version whose write had *returned* before its search began; a
hit older than that is a stale read. Read-after-write latency is the time from the start of a write until a
search returns the new value (inline mode: the write itself catches the projections up, so the first search
already does).

Baseline, in the same process: ``profile()`` (a key lookup on the profile projection, no embedding) after the same
writes: the search's cost is reported as a ratio of it.

Usage: python scripts/bench_stale.py [--embedder minilm] [--users 8] [--writers 2] [--readers 2] [--seconds 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from memledger import MemoryLedger  # noqa: E402

KEY = "preference.drink"
VALUES = [
    ("iced americano", "I like to drink iced americano, no sugar"),
    ("hot latte", "I'd rather have a hot latte now"),
    ("matcha", "These days my drink of choice is a matcha"),
    ("oolong tea", "I have switched to oolong tea"),
    ("flat white", "My usual order is a flat white"),
]
PARAPHRASES = ["what does the user like to drink?", "which beverage should I order for them?",
               "coffee or tea preference", "what is their usual drink"]
DISTRACTORS = [
    ("memory.d1", "My brother drinks iced americano every morning"),
    ("memory.d2", "The cafe near the office serves a great hot latte"),
    ("memory.d3", "I went hiking in the mountains last weekend"),
    ("memory.d4", "My cat is called Miso and likes to sleep on the sofa"),
    ("memory.d5", "I am reading a novel about a lighthouse keeper"),
    ("memory.d6", "We used to drink matcha at my grandmother's house"),
    ("memory.d7", "The meeting on Friday was moved to 3 pm"),
    ("memory.d8", "I prefer window seats on long flights"),
]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def protocol(ml: MemoryLedger, user: str, results: dict) -> None:
    """Part 1 for one user; counts stale hits and checks (verify, confirm, re-ask first)."""
    old_value, old_text = VALUES[0]
    new_value, new_text = VALUES[1]
    ml.assert_fact(user, KEY, old_value, text=old_text)
    first = ml.search(user, PARAPHRASES[0], k=1)[0]
    results["verify_ok"] += first.key == KEY and first.value == old_value
    receipt = ml.assert_fact(user, KEY, new_value, text=new_text)
    results["confirm_ok"] += (receipt.effect == "supersede"
                              and ml.profile(user).facts[KEY].value == new_value)
    ml.record([{"user_id": user, "key": k, "value": t, "text": t} for k, t in DISTRACTORS])
    for q in PARAPHRASES[1:]:
        for k in range(1, 21):
            hits = ml.search(user, q, k=k)
            results["reads"] += 1
            mine = [h for h in hits if h.key == KEY]
            results["stale"] += any(h.text == old_text or h.version < receipt.version for h in mine)
            results["missing"] += not mine and k >= len(DISTRACTORS) + 1
        results["first_ok"] += ml.search(user, q, k=1)[0].value == new_value


def load(store: dict, embedder: str, users: list[str], writers: int, readers: int, seconds: float) -> dict:
    acked: dict[str, int] = {}  # user -> version of the last write that returned
    texts: dict[str, dict[int, str]] = {u: {} for u in users}
    lock = threading.Lock()
    stop = threading.Event()
    out = {"reads": 0, "stale": 0, "missing": 0, "writes": 0, "raw_ms": [], "write_ms": [], "read_ms": [],
           "errors": []}
    ledgers = [MemoryLedger(**store, embedder=embedder) for _ in range(writers + readers)]

    def writer(i: int) -> None:
        ml = ledgers[i]
        mine = users[i::writers]
        n = 0
        try:
            while not stop.is_set():
                user = mine[n % len(mine)]
                value, text = VALUES[n % len(VALUES)]
                # a new value every time: repeating the current one would be a reaffirmation (no new version)
                value, text = f"{value} (change {n})", f"{text} (change {n})"
                t0 = time.perf_counter()
                r = ml.assert_fact(user, KEY, value, text=text)
                assert r.effect == "supersede", r.effect
                t1 = time.perf_counter()
                with lock:
                    texts[user][r.version] = text
                    acked[user] = r.version
                hit = ml.search(user, PARAPHRASES[n % len(PARAPHRASES)], k=3)
                t2 = time.perf_counter()
                got = [h for h in hit if h.key == KEY]
                with lock:
                    out["writes"] += 1
                    out["write_ms"].append((t1 - t0) * 1000)
                    if got and got[0].version >= r.version:
                        out["raw_ms"].append((t2 - t0) * 1000)
                    elif got:
                        out["stale"] += 1
                        out["errors"].append(f"stale: {user} v{got[0].version} < v{r.version}")
                    else:  # not in this paraphrase's top 3 (a ranking miss, not a stale read): ask by value
                        again = [h for h in ml.search(user, value, k=3) if h.key == KEY]
                        if again and again[0].version >= r.version:
                            out["raw_ms"].append((time.perf_counter() - t0) * 1000)
                        else:
                            out["stale"] += bool(again)
                            out["missing"] += not again
                n += 1
        except BaseException as exc:  # noqa: BLE001 - reported in the table
            out["errors"].append(repr(exc))

    def reader(i: int) -> None:
        ml = ledgers[writers + i]
        n = 0
        try:
            while not stop.is_set():
                user = users[(n * 7 + i) % len(users)]
                with lock:
                    floor = acked.get(user, 0)
                t0 = time.perf_counter()
                hits = ml.search(user, PARAPHRASES[n % len(PARAPHRASES)], k=1 + n % 10)
                dt = (time.perf_counter() - t0) * 1000
                mine = [h for h in hits if h.key == KEY]
                with lock:
                    out["reads"] += 1
                    out["read_ms"].append(dt)
                    old = {t for v, t in texts[user].items() if v < floor}
                    if any(h.version < floor or h.text in old for h in mine):
                        out["stale"] += 1
                        out["errors"].append(f"stale: {user} {[h.version for h in mine]} < v{floor}")
                    out["missing"] += floor > 0 and not mine and len(hits) > len(DISTRACTORS)
                n += 1
        except BaseException as exc:  # noqa: BLE001
            out["errors"].append(repr(exc))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    threads += [threading.Thread(target=reader, args=(i,)) for i in range(readers)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    for ml in ledgers:
        ml.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--users", type=int, default=8)
    ap.add_argument("--writers", type=int, default=2)
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--home", type=Path, help="store directory (default: a temporary one)")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    store = {"home": args.home or Path(tmp.name) / "ledger"}
    users = [f"user{i}" for i in range(args.users)]

    res = {"reads": 0, "stale": 0, "missing": 0, "verify_ok": 0, "confirm_ok": 0, "first_ok": 0}
    with MemoryLedger(**store, embedder=args.embedder) as ml:
        t0 = time.perf_counter()
        for u in users:
            protocol(ml, u, res)
        proto_s = time.perf_counter() - t0
        # the baseline and the search, same process, same store, after the same writes
        prof_ms, search_ms = [], []
        for i in range(200):
            u = users[i % len(users)]
            t = time.perf_counter()
            ml.profile(u)
            prof_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            ml.search(u, PARAPHRASES[i % len(PARAPHRASES)], k=10)
            search_ms.append((time.perf_counter() - t) * 1000)
    n_users = len(users)
    print(f"## Part 1: protocol (seed 001), {n_users} users, embedder {args.embedder}, {proto_s:.1f} s")
    print()
    print("| check | result |")
    print("|---|---|")
    print(f"| verify: paraphrase finds the preference first | {res['verify_ok']}/{n_users} |")
    print(f"| confirm: receipt says supersede, profile has the new value | {res['confirm_ok']}/{n_users} |")
    print(f"| re-ask after distractors: new value first (3 paraphrases) | {res['first_ok']}/{3 * n_users} |")
    print(f"| reads at k = 1..20 | {res['reads']} |")
    print(f"| **stale reads** (old text or older version in the hits) | **{res['stale']}** "
          f"({100 * res['stale'] / res['reads']:.2f} %) |")
    print(f"| preference missing when k > distractors | {res['missing']} |")
    print()
    print("| read (same process, same store) | median ms | p95 ms | ratio vs baseline |")
    print("|---|---|---|---|")
    pm = statistics.median(prof_ms)
    print(f"| baseline: profile(user) | {pm:.2f} | {pct(prof_ms, 0.95):.2f} | 1.00 |")
    sm = statistics.median(search_ms)
    print(f"| search(user, paraphrase, k=10) incl. query embedding | {sm:.2f} | {pct(search_ms, 0.95):.2f} | "
          f"{sm / pm:.2f} |")
    print()

    out = load(store, args.embedder, users, args.writers, args.readers, args.seconds)
    print(f"## Part 2: {args.writers} writer + {args.readers} reader threads, each with its own ledger object, "
          f"{args.seconds:.0f} s")
    print()
    print("| metric | value |")
    print("|---|---|")
    print(f"| writes (each followed by the writer's own search) | {out['writes']} |")
    print(f"| reader searches | {out['reads']} |")
    total = out["reads"] + out["writes"]
    print(f"| **stale reads** (readers + writers' read-after-write) | **{out['stale']}** "
          f"({100 * out['stale'] / max(1, total):.2f} %) |")
    print(f"| preference missing from a reader's hits | {out['missing']} |")
    print(f"| errors | {len(out['errors'])} {out['errors'][:3] if out['errors'] else ''} |")
    print()
    print("| latency under load | median ms | p95 ms | ratio vs write |")
    print("|---|---|---|---|")
    wm = statistics.median(out["write_ms"]) if out["write_ms"] else float("nan")
    for name, xs in (("write (assert_fact: log + all projections, embedding)", out["write_ms"]),
                     ("read-after-write (write start -> search returns the new value)", out["raw_ms"]),
                     ("reader search (other ledger object: refresh + search)", out["read_ms"])):
        m = statistics.median(xs) if xs else float("nan")
        print(f"| {name} | {m:.1f} | {pct(xs, 0.95):.1f} | {m / wm:.2f} |")
    tmp.cleanup()
    if res["stale"] or out["stale"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
