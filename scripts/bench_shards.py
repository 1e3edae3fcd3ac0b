"""A sharded ledger (memledger.sharding.sharded.ShardedLedger) on 1, 2 and 3 PostgreSQL servers, in one process (docs/scale.md).

    bash scripts/pg_shards.sh 3          # servers mlshard1..3 on ports 5433..5435
    MEMLEDGER_CJK_EMBEDDER=none flock /tmp/memledger-heavy.lock .venv/bin/python scripts/bench_shards.py
    .venv/bin/python scripts/bench_shards.py --users 20 --facts-per-user 3 --repeat 1     # a quick smoke run

For each shard count k of ``--shards-list`` and each of ``--repeat`` runs, a TOML shard map is written to a temp dir
(shards s1..sk on ports 5433..5432+k, a fresh ``bench_<hex>`` schema on each, the ``[directory]`` on 5433 in its own
schema), and measured:

* appends/s: ``--users`` users x ``--facts-per-user`` facts, one ``record()`` batch per user (a batch stays on one
  shard), by 1 thread, then by 4 threads splitting another set of users as many (events/s);
* single-command appends/s: 200 ``assert_fact`` calls;
* search p50/p95 (ms): 200 ``search(user, query, k=5)`` after a warm-up search of each user queried;
* CPU seconds of each PostgreSQL server (postmaster, its live children, and its reaped children) over both append
  phases, from /proc; the directory is on the first server, so its lease work is in shard s1's figure;
* bytes per user and per event on each shard: ``pg_total_relation_size`` of the schema's tables, indexes, TOAST.

Medians over the repeats; "x 1 shard" is the ratio to the 1-shard run of the same process; "load" is the 1-minute
load average read right after the figure was measured (median over repeats). Then once: ``--users`` users written
on 2 shards, the map extended to 3, and ``rebalance()`` (what ``memledger shards rebalance`` runs) timed: users
moved and seconds per user. Every schema made is dropped at the end (DROP SCHEMA ... CASCADE), also on failure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

os.environ.setdefault("MEMLEDGER_CJK_EMBEDDER", "none")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg  # noqa: E402

from memledger.sharding.rebalance import _user_events, rebalance  # noqa: E402
from memledger.sharding.sharded import ShardedLedger  # noqa: E402

DSN = "postgresql://postgres@127.0.0.1:{port}/postgres"
SIZE_SQL = ("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'i', 't', 'm')")
QUERIES = ["what drink does the user like", "where does the user live", "favourite hobby", "travel plans",
           "which books were read", "allergies and health", "work and job", "music taste"]
TOPICS = ["green tea", "hiking", "Lisbon", "jazz", "sourdough", "chess", "Kyoto trip", "peanut allergy", "cycling"]
CREATED: list[tuple[int, str]] = []  # (port, schema) to drop


def load1() -> float:
    return os.getloadavg()[0]


def write_map(tmp: Path, ports: list[int], schema: str, directory: str) -> Path:
    lines = ["[directory]", f'dsn = "{DSN.format(port=5433)}"', f'schema = "{directory}"', ""]
    CREATED.append((5433, directory))
    for i, port in enumerate(ports, 1):
        lines += [f"[shards.s{i}]", f'dsn = "{DSN.format(port=port)}"', f'schema = "{schema}"', ""]
        CREATED.append((port, schema))
    path = tmp / f"{schema}_{len(ports)}.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def pid_file(shard: int) -> Path:
    p = Path(f"/var/run/postgresql/15-mlshard{shard}.pid")
    if p.exists():
        return p
    found = sorted(Path("/var/run/postgresql").glob(f"*-mlshard{shard}.pid"))
    if not found:
        sys.exit(f"bench_shards: no pid file for mlshard{shard} in /var/run/postgresql: run bash scripts/pg_shards.sh 3")
    return found[-1]


def server_cpu(shard: int) -> float:
    """CPU seconds (user+system) of the server's postmaster, its reaped children and its live children."""
    tick = os.sysconf("SC_CLK_TCK")
    pm = int(pid_file(shard).read_text().split()[0])
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended meanwhile (its time is now in the postmaster's cutime)
        pid, ppid = int(stat.parent.name), int(fields[1])
        if pid == pm:
            total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        elif ppid == pm:
            total += int(fields[11]) + int(fields[12])
    return total / tick


def batch(user: str, facts: int, tag: str) -> list[dict]:
    return [{"user_id": user, "key": f"bench.{tag}{j}", "value": TOPICS[j % len(TOPICS)],
             "text": f"{user} mentioned {TOPICS[j % len(TOPICS)]} ({tag}{j})"} for j in range(facts)]


def append(ml: ShardedLedger, users: list[str], facts: int, threads: int) -> float:
    """events/s writing one record() batch per user, ``threads`` threads splitting the users."""
    errors: list[BaseException] = []

    def work(part: list[str]) -> None:
        try:
            for u in part:
                ml.record(batch(u, facts, "f"))
        except BaseException as exc:  # reported after the join
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(users[i::threads],)) for i in range(threads)]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    dt = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return len(users) * facts / dt


def one_run(args: argparse.Namespace, tmp: Path, k: int) -> dict:
    tag = uuid.uuid4().hex[:10]
    path = write_map(tmp, list(range(5433, 5433 + k)), f"bench_{tag}", f"bench_{tag}_dir")
    res: dict = {}
    with ShardedLedger(path, embedder=args.embedder) as ml:
        list(ml.each())  # open every shard before the threads start
        one = [f"u1-{tag}-{i}" for i in range(args.users)]
        four = [f"u4-{tag}-{i}" for i in range(args.users)]
        cpu0, me0 = [server_cpu(s) for s in range(1, k + 1)], sum(os.times()[:2])
        res["appends/s, record() per user, 1 thread"] = (append(ml, one, args.facts_per_user, 1), load1())
        res["appends/s, record() per user, 4 threads"] = (append(ml, four, args.facts_per_user, 4), load1())
        cpu1, me1 = [server_cpu(s) for s in range(1, k + 1)], sum(os.times()[:2])
        for s in range(k):
            res[f"PG CPU s during appends, shard s{s + 1}"] = (cpu1[s] - cpu0[s], load1())
        res["PG CPU s during appends, all shards"] = (sum(cpu1) - sum(cpu0), load1())
        res["PG CPU ms per appended event, all shards"] = (
            1000 * (sum(cpu1) - sum(cpu0)) / (2 * args.users * args.facts_per_user), load1())
        res["client (this process) CPU s during appends"] = (me1 - me0, load1())
        rng = random.Random(7)
        sample = [rng.choice(one) for _ in range(200)]
        t0 = time.perf_counter()
        for i, u in enumerate(sample):
            ml.assert_fact(u, f"bench.single{i}", i)
        res["single assert_fact/s"] = (len(sample) / (time.perf_counter() - t0), load1())
        users = one + four
        queried = [rng.choice(users) for _ in range(200)]
        for u in dict.fromkeys(queried):  # warm-up: catches the vectors up and loads each queried user's index
            ml.search(u, "warm up", k=5)
        lat = []
        for i, u in enumerate(queried):
            t0 = time.perf_counter()
            ml.search(u, QUERIES[i % len(QUERIES)], k=5)
            lat.append((time.perf_counter() - t0) * 1000)
        lat.sort()
        res["search p50 ms"] = (lat[len(lat) // 2], load1())
        res["search p95 ms"] = (lat[int(len(lat) * 0.95) - 1], load1())
        per_shard = {name: 0 for name in ml.map.names}
        for u in users:
            per_shard[ml.shard_of(u)] += 1
        events = len(users) * args.facts_per_user  # + the 200 singles, on their users' shards
        total_bytes = 0
        for s, name in enumerate(ml.map.names):
            with psycopg.connect(DSN.format(port=5433 + s)) as conn:
                size = int(conn.execute(SIZE_SQL, (f"bench_{tag}",)).fetchone()[0])
            total_bytes += size
            res[f"bytes per user, shard {name}"] = (size / max(1, per_shard[name]), load1())
            res[f"users on shard {name}"] = (per_shard[name], load1())
        res["bytes per event, all shards"] = (total_bytes / (events + len(sample)), load1())
    drop_all()
    return res


def measure_rebalance(args: argparse.Namespace, tmp: Path) -> dict:
    """Users written on 2 shards, the map extended to a 3rd with the same schemas, rebalance() timed."""
    tag = uuid.uuid4().hex[:10]
    schema, directory = f"bench_{tag}", f"bench_{tag}_dir"
    users = [f"r-{tag}-{i}" for i in range(args.users)]
    with ShardedLedger(write_map(tmp, [5433, 5434], schema, directory), embedder=args.embedder) as ml:
        list(ml.each())
        append(ml, users, args.facts_per_user, 4)
        before = {u: len(ml.profile(u).facts) for u in users}
    with ShardedLedger(write_map(tmp, [5433, 5434, 5435], schema, directory), embedder=args.embedder) as ml:
        src = ml.shard("s1")  # a rebalance reads each source shard's whole log once (then the tail per chunk)
        t0 = time.perf_counter()
        _user_events(src, {"nobody"})
        scan_us = (time.perf_counter() - t0) * 1e6 / max(1, src.head())
        report = rebalance(ml)
        moved = [m for m in report.moves if m.status == "moved"]
        failed = [m for m in report.moves if m.status.startswith("failed")]
        lost = [u for u in users if len(ml.profile(u).facts) != before[u]]
        wrong = [m.user_id for m in moved if ml.shard_of(m.user_id) != "s3"]
    drop_all()
    return {"users": len(users), "moved": len(moved), "failed": len(failed), "seconds": report.seconds,
            "s_per_moved_user": report.seconds / max(1, len(moved)), "events_per_user": args.facts_per_user,
            "users_with_other_facts_after": len(lost), "moved_not_on_s3": len(wrong), "log_pass_us_per_event": scan_us, "load": load1()}


def drop_all() -> None:
    while CREATED:
        port, schema = CREATED.pop()
        try:
            with psycopg.connect(DSN.format(port=port), autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        except psycopg.Error as exc:
            print(f"bench_shards: could not drop {schema} on {port}: {exc}", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--users", type=int, default=300)
    ap.add_argument("--facts-per-user", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--shards-list", default="1,2,3")
    ap.add_argument("--embedder", default="hash", help="hash (64 dims, no model), hash:384 (MiniLM's size) or minilm")
    ap.add_argument("--no-rebalance", action="store_true", help="skip the rebalance measurement")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    ks = [int(x) for x in args.shards_list.split(",")]
    if any(k < 1 or k > 3 for k in ks):
        sys.exit("bench_shards: --shards-list takes counts from 1 to 3 (ports 5433..5435)")
    results: dict[int, dict[str, tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for k in ks:
                runs = [one_run(args, Path(tmp), k) for _ in range(args.repeat)]
                results[k] = {m: (statistics.median(r[m][0] for r in runs), statistics.median(r[m][1] for r in runs))
                              for m in runs[0]}
            reb = None if args.no_rebalance else measure_rebalance(args, Path(tmp))
        finally:
            drop_all()
    base = results.get(1, {})
    rows = []
    for k, res in results.items():
        for m, (v, load) in res.items():
            b = base.get(m, (None,))[0] if "shard s" not in m or k == 1 else base.get(
                m.rsplit("s", 1)[0] + "s1", (None,))[0]
            rows.append({"measure": m, "shards": k, "median": v, "x 1 shard": (v / b) if b else None, "load": load})
    if args.json:
        print(json.dumps({"args": vars(args), "cpus": os.cpu_count(), "rows": rows, "rebalance": reb}, indent=1))
        return
    print(f"bench_shards: {args.users} users x {args.facts_per_user} facts per append phase, {args.repeat} repeats, "
          f"embedder {args.embedder}; {os.cpu_count()} CPUs, and the PostgreSQL servers share them with this client, "
          "so more shards cannot show more throughput here (they show the routing's cost and the spread of load)\n")
    print("| measure | shards | median | x 1 shard | load |\n|---|---:|---:|---:|---:|")
    for r in rows:
        ratio = f"{r['x 1 shard']:.2f}" if r["x 1 shard"] is not None else "-"
        v = r["median"]
        fmt = f"{v:,.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"
        print(f"| {r['measure']} | {r['shards']} | {fmt} | {ratio} | {r['load']:.2f} |")
    if reb:
        print(f"\nrebalance 2 -> 3 shards: {reb['users']} users of {reb['events_per_user']} events, {reb['moved']} moved,"
              f" {reb['failed']} failed, {reb['seconds']:.1f} s, {reb['s_per_moved_user']:.3f} s per moved user; after:"
              f" {reb['users_with_other_facts_after']} users with other facts, {reb['moved_not_on_s3']} moved users "
              f"not on s3; one pass over a source log: {reb['log_pass_us_per_event']:.0f} us per event "
              f"(load {reb['load']:.2f})")


if __name__ == "__main__":
    main()
