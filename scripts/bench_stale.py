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

Free-text mode (``--free-text``): the same protocol with no keys: every statement, the preference, its
update and the distractors, goes through ``remember``, half the users in English and half in Chinese; slot
resolution must put the update in the preference's slot (supersede) and leave the distractors (a brother's drink,
a cafe's latte, what we used to drink) alone. Part 2's writers ``remember`` a new drink each time.

Usage: python scripts/bench_stale.py [--embedder minilm] [--users 8] [--writers 2] [--readers 2] [--seconds 20]
       [--free-text]
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


# free-text mode: EN and ZH, no keys
FREE = {
    "en": {"old": "I like to drink iced americano, no sugar", "new": "I'd rather have a hot latte now",
           "paraphrases": PARAPHRASES, "distractors": [t for _, t in DISTRACTORS],
           "change": "These days I drink {v} (change {n})"},
    "zh": {"old": "我喜欢喝冰美式，不加糖", "new": "我现在改喝热拿铁了",
           "paraphrases": ["用户喜欢喝什么？", "我该给他点什么饮料？", "咖啡还是茶？", "他平时喝什么"],
           "distractors": ["我哥哥每天早上喝冰美式", "公司附近的咖啡店拿铁很好喝", "上周末我去爬了山",
                           "我的猫叫咪咪，喜欢睡沙发", "我在读一本关于灯塔看守人的小说", "小时候我们在奶奶家喝抹茶",
                           "周五的会议改到下午三点", "长途飞行我喜欢靠窗的座位"],
           "change": "我现在改喝{v}了（第{n}次）"},
}
FREE_VALUES = {"en": ["matcha", "oolong tea", "a flat white", "iced tea", "hot chocolate"],
               "zh": ["抹茶", "乌龙茶", "澳白", "冰红茶", "热可可"]}


def lang_of(user: str) -> str:
    return "zh" if int(user.removeprefix("user")) % 2 else "en"


def protocol_free(ml: MemoryLedger, user: str, results: dict) -> None:
    """Part 1 in free-text mode: no keys; the old statement is stale wherever it shows up as current."""
    f = FREE[lang_of(user)]
    first_r = ml.remember(user, f["old"])
    first = ml.search(user, f["paraphrases"][0], k=1)[0]
    results["verify_ok"] += first.text == f["old"]
    receipt = ml.remember(user, f["new"])
    facts = ml.profile(user).facts
    results["confirm_ok"] += (receipt.decision == "supersede" and receipt.key == first_r.key
                              and facts[receipt.key].value == f["new"])
    for t in f["distractors"]:
        d = ml.remember(user, t)
        results["distractor_decisions"][d.decision] = results["distractor_decisions"].get(d.decision, 0) + 1
    results["kept"] += ml.profile(user).facts[receipt.key].value == f["new"]
    for q in f["paraphrases"][1:]:
        for k in range(1, 21):
            hits = ml.search(user, q, k=k)
            results["reads"] += 1
            results["stale"] += any(h.text == f["old"] or (h.key == receipt.key and h.version < receipt.version)
                                    for h in hits)
            results["missing"] += (not any(h.text == f["new"] for h in hits)
                                   and k >= len(f["distractors"]) + 1)
        results["first_ok"] += ml.search(user, q, k=1)[0].text == f["new"]


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


def load(store: dict, embedder: str, users: list[str], writers: int, readers: int, seconds: float,
         free_text: bool = False) -> dict:
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
                if free_text:
                    lang = lang_of(user)
                    value = FREE_VALUES[lang][n % len(FREE_VALUES[lang])]
                    text = value = FREE[lang]["change"].format(v=value, n=n)
                t0 = time.perf_counter()
                if free_text:
                    r = ml.remember(user, text)
                    assert r.decision == "supersede" and r.key == KEY, (r.decision, r.key, r.explanation)
                else:
                    r = ml.assert_fact(user, KEY, value, text=text)
                    assert r.effect == "supersede", r.effect
                t1 = time.perf_counter()
                with lock:
                    texts[user][r.version] = text
                    acked[user] = r.version
                qs = FREE[lang_of(user)]["paraphrases"] if free_text else PARAPHRASES
                hit = ml.search(user, qs[n % len(qs)], k=3)
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
                qs = FREE[lang_of(user)]["paraphrases"] if free_text else PARAPHRASES
                hits = ml.search(user, qs[n % len(qs)], k=1 + n % 10)
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
    ap.add_argument("--free-text", action="store_true", help="no keys: every statement goes through remember "
                    "(half the users in English, half in Chinese)")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    store = {"home": args.home or Path(tmp.name) / "ledger"}
    users = [f"user{i}" for i in range(args.users)]

    res = {"reads": 0, "stale": 0, "missing": 0, "verify_ok": 0, "confirm_ok": 0, "first_ok": 0, "kept": 0,
           "distractor_decisions": {}}
    with MemoryLedger(**store, embedder=args.embedder) as ml:
        t0 = time.perf_counter()
        for u in users:
            (protocol_free if args.free_text else protocol)(ml, u, res)
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
    import os

    mode = "free text, no keys (EN + ZH users)" if args.free_text else "keys"
    print(f"## Part 1: protocol (seed 001), {mode}, {n_users} users, embedder {args.embedder}, {proto_s:.1f} s, "
          f"load average {os.getloadavg()[0]:.2f}")
    print()
    print("| check | result |")
    print("|---|---|")
    if args.free_text:
        zh = sum(lang_of(u) == "zh" for u in users)
        print(f"| users EN / ZH | {n_users - zh} / {zh} |")
        print(f"| distractor decisions | {res['distractor_decisions']} |")
        print(f"| update still current after the distractors | {res['kept']}/{n_users} |")
    print(f"| verify: paraphrase finds the preference first | {res['verify_ok']}/{n_users} |")
    print(f"| confirm: receipt says supersede, profile has the new value | {res['confirm_ok']}/{n_users} |")
    print(f"| re-ask after distractors: new value first (3 paraphrases) | {res['first_ok']}/{3 * n_users} |")
    print(f"| reads at k = 1..20 | {res['reads']} |")
    print(f"| **stale reads** (old text or an older version in the hits) | **{res['stale']}** "
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

    out = load(store, args.embedder, users, args.writers, args.readers, args.seconds, args.free_text)
    print(f"## Part 2: {args.writers} writer + {args.readers} reader threads, each with its own ledger object, "
          f"{args.seconds:.0f} s, load average {os.getloadavg()[0]:.2f}")
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
    wname = ("write (remember: resolution + log + all projections)" if args.free_text
             else "write (assert_fact: log + all projections, embedding)")
    for name, xs in ((wname, out["write_ms"]),
                     ("read-after-write (write start -> search returns the new value)", out["raw_ms"]),
                     ("reader search (other ledger object: refresh + search)", out["read_ms"])):
        m = statistics.median(xs) if xs else float("nan")
        print(f"| {name} | {m:.1f} | {pct(xs, 0.95):.1f} | {m / wm:.2f} |")
    tmp.cleanup()
    if res["stale"] or out["stale"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
