#!/usr/bin/env python
"""Many users in bounded memory: ``serve http --index-memory-mb`` searched over many users in a random order.

A store of ``--users`` users with ``--per-user`` memories each (vectors from the ``hash:384`` test double: the same
bytes per vector as MiniLM, built in minutes instead of hours) is served by ``memledger serve http`` with an index
budget of ``--budget-mb``. Through HTTP (httpx, keep-alive, an admin key):

* **warm**, the baseline: ``--searches`` searches of users whose indexes are loaded (a few users, searched in turn);
* **random**: ``--searches`` searches of users drawn uniformly from all of them: most are not loaded, so each is read
  from the projection table and the least recently searched users are evicted to stay in the budget.

For each: p50/p95 wall ms and the ratio to warm. Memory of the server process (``/proc/PID/status``): VmRSS before
the first search (the baseline), VmRSS after each phase, and the peak (VmHWM) against the bound the budget promises:
peak <= budget + VmRSS before the first search. The load average is printed beside the figures; nothing is asserted
(run it alone: ``flock /tmp/memledger-heavy.lock python scripts/bench_users.py``).

Usage: python scripts/bench_users.py [--users 10000] [--per-user 100] [--budget-mb 256] [--searches 2000]
"""

from __future__ import annotations

import argparse
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


def build(home: Path, users: int, per_user: int) -> str:
    """The store, every user's vectors built, and an admin key's secret."""
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
        if batch:
            ml.record(batch)
        print(f"  recorded {users * per_user} memories in {time.perf_counter() - t0:.0f} s (load {load()})")
        t0 = time.perf_counter()
        ml.limit_index_memory(64)  # this process only builds the vectors; it need not hold every user's index
        ml.search("user0", "warm up", k=10)  # the vectors projection catches up: every vector is built
        print(f"  vectors built in {time.perf_counter() - t0:.0f} s (load {load()})")
        return APIKeyStore(ml).create([], admin=True).secret


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=10000)
    ap.add_argument("--per-user", type=int, default=100)
    ap.add_argument("--budget-mb", type=float, default=256.0)
    ap.add_argument("--searches", type=int, default=2000)
    ap.add_argument("--warm-users", type=int, default=8, help="users searched in turn for the warm baseline")
    args = ap.parse_args()

    import httpx

    tmp = Path(tempfile.mkdtemp(prefix="bench_users_"))
    home = tmp / "h"
    print(f"load average before: {load()}  (cpus: {os.cpu_count()})")
    print(f"building {args.users} users x {args.per_user} memories (hash:384 vectors)")
    secret = build(home, args.users, args.per_user)
    proc, base = start_http(home, dict(os.environ), "--index-memory-mb", str(args.budget_mb))
    rng = random.Random(5)
    rows: list[tuple[str, list[float], int]] = []
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
            rows.append(("warm (loaded users, baseline)", warm, status_kb(proc.pid, "VmRSS")))
            rand = [search(f"user{rng.randrange(args.users)}") for _ in range(args.searches)]
            rows.append((f"random over {args.users} users", rand, status_kb(proc.pid, "VmRSS")))
        peak = status_kb(proc.pid, "VmHWM")
    finally:
        proc.terminate()
        proc.wait(30)
    base_p50 = statistics.median(rows[0][1])
    print(f"\nserve http --index-memory-mb {args.budget_mb:g}: {args.users} users x {args.per_user} memories, "
          f"{args.searches} searches per row (load {load()})")
    print(f"{'row':34} {'p50 ms':>8} {'p95 ms':>8} {'ratio':>6} {'VmRSS MB after':>15}")
    for name, xs, rss in rows:
        p50 = statistics.median(xs)
        print(f"{name:34} {1000 * p50:8.2f} {1000 * pct(xs, 95):8.2f} {p50 / base_p50:6.2f} {rss / 1024:15.1f}")
    bound = args.budget_mb * 1e6 / 2**20 + rss_before / 1024
    print(f"\nVmRSS before the first search {rss_before / 1024:.1f} MB; peak (VmHWM) {peak / 1024:.1f} MB; "
          f"bound (budget {args.budget_mb * 1e6 / 2**20:.1f} MiB + before) {bound:.1f} MB: "
          f"{'held' if peak / 1024 <= bound else 'NOT HELD'}")
    from projections.retrieval.mirror import DOC_OVERHEAD_BYTES, USER_OVERHEAD_BYTES

    whole = args.users * (USER_OVERHEAD_BYTES + args.per_user * (2 * 384 + DOC_OVERHEAD_BYTES))
    print(f"every user loaded would take about {whole / 2**20:.0f} MB (projections/retrieval/mirror.py user_bytes)")


if __name__ == "__main__":
    main()
