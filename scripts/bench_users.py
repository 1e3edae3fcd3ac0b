#!/usr/bin/env python
"""Many users in bounded memory: ``serve http --index-memory-mb`` searched over many users in a random order.

A store of ``--users`` users with ``--per-user`` memories each (vectors from the ``hash:384`` test double: the same
bytes per vector as MiniLM, built in minutes instead of hours) is served by ``memledger serve http`` with an index
budget of ``--budget-mb``. Through HTTP (httpx, keep-alive, an admin key):

* **warm**, the baseline: ``--searches`` searches of users whose indexes are loaded (a few users, searched in turn);
* **random**: ``--searches`` searches of users drawn uniformly from all of them: most are not loaded, so each is read
  from the projection table and the least recently searched users are evicted to stay in the budget.

* **again**: the users of the random row searched again in the same order, each evicted since: loaded from what
  their first load left (their BM25 file, written as they were evicted, and their vector packs).

For each: p50/p95 wall ms and the ratio to warm. Memory of the server process (``/proc/PID/status``): VmRSS before
the first search (the baseline), VmRSS after each phase, and the peak (VmHWM) against the bound the budget promises:
peak <= budget + VmRSS before the first search. With ``--big-user N`` the store also holds a user of N memories,
searched once by the building process (so their BM25 file is there, as a CLI call or an earlier server leaves it);
after the rows above the server searches them for the first time, then another user (which evicts them: they are
over the budget alone), then them again: each search's wall ms (the peak above is taken before). The load average
is printed beside each figure; nothing is asserted (run it alone: ``flock /tmp/memledger-heavy.lock python
scripts/bench_users.py``). ``--home DIR`` builds the store there once and reuses it in later runs (copy it first to
run two servers from the same state: the second row writes BM25 files into it).

Usage: python scripts/bench_users.py [--users 10000] [--per-user 100] [--budget-mb 256] [--searches 2000]
       [--big-user 100000] [--home DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["MEMLEDGER_EMBEDDER"] = "hash:384"
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench_serve import start_http  # noqa: E402  (scripts/: serve http on a free port, once healthy)

WORDS = ("tea coffee cello piano Leeds Berlin bike code garden dentist landlord rent tram bus sister brother cat "
         "dog paella ramen hiking chess gym yoga novel podcast laptop phone plate locker wifi school office").split()


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def build(home: Path, users: int, per_user: int, big: int = 0) -> str:
    """The store, every user's vectors built, and an admin key's secret (``big``: one more user, ``big``, with that
    many memories, searched once here)."""
    from memledger import MemoryLedger
    from memledger.servers.keys import APIKeyStore

    rng = random.Random(11)
    t0 = time.perf_counter()
    with MemoryLedger(home=home) as ml:
        batch: list[dict] = []
        for u in range(users):
            for j in range(per_user):
                a, b, c = rng.sample(WORDS, 3)
                batch.append({"user_id": f"user{u}", "key": f"memory.m{j}", "value": f"{a} {b}",
                              "text": f"I like {a} and {b}, not {c} (note {j})"})
            if len(batch) >= 2000:
                ml.record(batch)
                batch = []
        for j in range(big):
            a, b, c = rng.sample(WORDS, 3)
            batch.append({"user_id": "big", "key": f"memory.m{j}", "value": f"{a} {b}",
                          "text": f"I like {a} and {b}, not {c} (note {j})"})
            if len(batch) >= 2000:
                ml.record(batch)
                batch = []
        if batch:
            ml.record(batch)
        print(f"  recorded {users * per_user + big} memories in {time.perf_counter() - t0:.0f} s (load {load()})")
        t0 = time.perf_counter()
        ml.limit_index_memory(64)  # this process only builds the vectors; it need not hold every user's index
        ml.search("user0", "warm up", k=10)  # the vectors projection catches up: every vector is built
        print(f"  vectors built in {time.perf_counter() - t0:.0f} s (load {load()})")
        if big:
            ml.search("big", "warm up", k=10)
        return APIKeyStore(ml).create([], admin=True).secret


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=10000)
    ap.add_argument("--per-user", type=int, default=100)
    ap.add_argument("--budget-mb", type=float, default=256.0)
    ap.add_argument("--searches", type=int, default=2000)
    ap.add_argument("--warm-users", type=int, default=8, help="users searched in turn for the warm baseline")
    ap.add_argument("--big-user", type=int, default=0, help="memories of one more user, searched at the end")
    ap.add_argument("--home", type=Path, help="build the store here once, reuse it after (default: a temp dir)")
    ap.add_argument("--build-only", action="store_true", help="build the store (--home) and stop")
    args = ap.parse_args()

    import httpx

    home = args.home or Path(tempfile.mkdtemp(prefix="bench_users_")) / "h"
    print(f"load average before: {load()}  (cpus: {os.cpu_count()})")
    made = home / "bench_users.json"
    if made.is_file():
        kept = json.loads(made.read_text())
        if [kept["users"], kept["per_user"], kept["big"]] != [args.users, args.per_user, args.big_user]:
            raise SystemExit(f"{home} holds {kept}: another size; give another --home")
        secret = kept["secret"]
        print(f"reusing {home}: {args.users} users x {args.per_user} memories, big user {args.big_user}")
    else:
        print(f"building {args.users} users x {args.per_user} memories (hash:384 vectors)")
        secret = build(home, args.users, args.per_user, args.big_user)
        made.write_text(json.dumps({"users": args.users, "per_user": args.per_user, "big": args.big_user,
                                    "secret": secret}))
    if args.build_only:
        return
    proc, base = start_http(home, dict(os.environ), "--index-memory-mb", str(args.budget_mb))
    rng = random.Random(5)
    rows: list[tuple[str, list[float], int, str]] = []
    big_rows: list[tuple[str, float, str]] = []
    peak_all = 0
    try:
        hdr = {"Authorization": f"Bearer {secret}"}
        rss_before = status_kb(proc.pid, "VmRSS")
        with httpx.Client(base_url=base, headers=hdr, timeout=60) as client:
            def search(user: str) -> float:
                q = " ".join(rng.sample(WORDS, 2))
                t = time.perf_counter()
                r = client.post(f"/v1/users/{user}/search", json={"query": q, "k": 10})
                dt = time.perf_counter() - t
                if r.status_code != 200 or not r.json():
                    raise SystemExit(f"search of {user} answered {r.status_code}: {r.text[:300]}")
                return dt

            warm_users = [f"user{u}" for u in range(args.warm_users)]
            for u in warm_users:  # load them
                search(u)
            warm = [search(warm_users[i % len(warm_users)]) for i in range(args.searches)]
            rows.append(("warm (loaded users, baseline)", warm, status_kb(proc.pid, "VmRSS"), load()))
            drawn = [f"user{rng.randrange(args.users)}" for _ in range(args.searches)]
            rand = [search(u) for u in drawn]
            rows.append((f"random over {args.users} users", rand, status_kb(proc.pid, "VmRSS"), load()))
            again = [search(u) for u in drawn]
            rows.append(("the same users again (evicted)", again, status_kb(proc.pid, "VmRSS"), load()))
            peak = status_kb(proc.pid, "VmHWM")
            if args.big_user:
                big_rows.append(("big user: first search", search("big"), load()))
                big_rows.append(("big user: second search", search("big"), load()))
                search("user1")  # loaded in their place: the big user is over the budget alone
                big_rows.append(("big user: search after eviction", search("big"), load()))
                peak_all = status_kb(proc.pid, "VmHWM")
    finally:
        proc.terminate()
        proc.wait(30)
    base_p50 = statistics.median(rows[0][1])
    print(f"\nserve http --index-memory-mb {args.budget_mb:g}: {args.users} users x {args.per_user} memories, "
          f"{args.searches} searches per row (load {load()})")
    print(f"{'row':34} {'p50 ms':>8} {'p95 ms':>8} {'ratio':>6} {'VmRSS MB after':>15}  load")
    for name, xs, rss, at in rows:
        p50 = statistics.median(xs)
        print(f"{name:34} {1000 * p50:8.2f} {1000 * pct(xs, 95):8.2f} {p50 / base_p50:6.2f} {rss / 1024:15.1f}  {at}")
    for name, dt, at in big_rows:
        print(f"{name:34} {1000 * dt:8.1f} ms (big user of {args.big_user} memories)  load {at}")
    if peak_all:
        print(f"peak (VmHWM) after the big user's searches {peak_all / 1024:.1f} MB")
    bound = args.budget_mb * 1e6 / 2**20 + rss_before / 1024
    print(f"\nVmRSS before the first search {rss_before / 1024:.1f} MB; peak (VmHWM) {peak / 1024:.1f} MB; "
          f"bound (budget {args.budget_mb * 1e6 / 2**20:.1f} MiB + before) {bound:.1f} MB: "
          f"{'held' if peak / 1024 <= bound else 'NOT HELD'}")
    from projections.retrieval.mirror import DOC_OVERHEAD_BYTES, USER_OVERHEAD_BYTES

    whole = args.users * (USER_OVERHEAD_BYTES + args.per_user * (2 * 384 + DOC_OVERHEAD_BYTES))
    print(f"every user loaded would take about {whole / 2**20:.0f} MB (projections/retrieval/mirror.py user_bytes)")


if __name__ == "__main__":
    main()
