"""How fast ``believed`` answers from the index, beside the naive replay-to-cutoff, in the same run.

Builds a ledger of ``--events`` fact events over ``--users`` users (default 1,000,000 over 10,000: ~100 events a
user over 8 keys — changes of mind, reaffirmations, corrections, retractions, backfills and contests, observed
over two years), then times, for random (user, as-of instant) pairs:

* ``believed (API)``: :meth:`MemoryLedger.believed` — catch-up check, indexed lookup, pydantic models;
* ``believed (SQL)``: the indexed lookup alone (``TimeTravelQueries.beliefs``), both axes;
* ``replay to cutoff``: ``replay.cutoff.replay_believed`` — fold the log up to the instant (the slow truth);

and prints a table of medians / p95 in milliseconds with each one's ratio to the replay's median. Every indexed
answer timed is also checked equal to the replayed one for the pairs that were replayed.

The build writes through the application in big batches (one ``save()`` per ``--batch`` commands; aggregates are
kept in memory so nothing is re-loaded), then catches the projections up once; both times are printed. The
semantic index is off (``MEMLEDGER_EMBEDDER=none``): embedding a million texts is another benchmark.

Usage: ``python scripts/bench_timetravel.py [--events 1000000] [--users 10000] [--queries 300] [--replays 5]
[--home DIR] [--keep]``. Target: believed p50 <= 5 ms and >= 1000x faster than replay.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MEMLEDGER_EMBEDDER", "none")

from memledger import MemoryLedger  # noqa: E402
from ledger.domain import Fact, fact_id  # noqa: E402
from ledger.schemas import validate_command  # noqa: E402
from ledger.timeutil import OPEN, from_micros, now_utc, to_micros  # noqa: E402
from projections.timetravel_queries import Cutoff  # noqa: E402
from replay.cutoff import replay_believed  # noqa: E402

KEYS = ["preference.drink", "preference.food", "profile.city", "profile.job", "hobby", "pet.name",
        "plan.trip", "relationship.partner"]
START = datetime(2023, 1, 1, tzinfo=timezone.utc)


def next_command(rng: random.Random, user: str, step: int, per_user: int, fact: Fact | None) -> dict:
    """One command for ``user``, valid against the fact's current state (the policy refuses correct/retract of
    nothing). Observed times advance over two years along the user's steps."""
    key = rng.choice(KEYS)
    observed = START + timedelta(days=730 * step / per_user, seconds=rng.randrange(86_400))
    head = None if fact is None else fact.current()
    r = rng.random()
    data = {"user_id": user, "key": key, "observed_at": observed.isoformat(), "source_ref": f"m{step}"}
    if head is not None and r < 0.05:
        data.update(op="correct", value=rng.randrange(50), reason="misheard")
    elif head is not None and r < 0.08:
        data.update(op="retract", reason="forget that")
        if rng.random() < 0.5:
            data["valid_to"] = (observed - timedelta(days=rng.randrange(1, 30))).isoformat()
    elif r < 0.13:  # imported history, said long before
        data.update(op="assert", value=rng.randrange(50), source="external_import",
                    valid_from=(observed - timedelta(days=rng.randrange(30, 300))).isoformat())
    elif r < 0.18:
        data.update(op="assert", value=rng.randrange(50), source="agent_inference")
    else:
        data.update(op="assert", value=rng.randrange(8))
    return data


def build(ml: MemoryLedger, n_events: int, n_users: int, batch: int, rng: random.Random) -> tuple[float, float]:
    """Write ``n_events`` through the application (one save per batch), then catch up. Returns (write s, catch-up s)."""
    app = ml.app
    facts: dict = {}
    per_user = max(1, n_events // n_users)
    steps = [0] * n_users
    t0 = time.perf_counter()
    written = 0
    while written < n_events:
        recorded_at = now_utc()
        touched = {}
        for _ in range(min(batch, n_events - written)):
            u = rng.randrange(n_users)
            user = f"user-{u}"
            data = None
            for _attempt in range(4):
                data = next_command(rng, user, steps[u], per_user, None)
                sid = fact_id(user, data["key"])
                fact = facts.get(sid)
                if data["op"] == "assert" or (fact is not None and fact.current() is not None):
                    break
            else:
                data = {**data, "op": "assert", "value": 1}
                data.pop("valid_to", None), data.pop("reason", None)
            if data["op"] == "assert":
                data.pop("valid_to", None)
            steps[u] += 1
            cmd = validate_command(data)
            sid = fact_id(user, cmd.key)
            fact = facts.get(sid)
            if fact is None:
                fact = facts[sid] = Fact.shell(sid, recorded_at)
            fact.record(cmd, recorded_at)
            touched[sid] = fact
            written += 1
        app.save(*touched.values())
        if written % 100_000 < batch:
            print(f"  wrote {written:,} events ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    t_write = time.perf_counter() - t0
    t0 = time.perf_counter()
    ml.catch_up(on_batch=lambda n, pos: print(f"  projected {pos:,}", file=sys.stderr, flush=True)
                if pos % 100_000 < 1000 else None)
    return t_write, time.perf_counter() - t0


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=1000, help="commands per save() while building")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--replays", type=int, default=5)
    ap.add_argument("--home", default=None, help="store directory (default: a fresh temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the store afterwards")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="bench_tt_"))
    fresh = not (home / "events.db").exists()
    try:
        with MemoryLedger(home=home) as ml:
            if fresh:
                t_write, t_project = build(ml, args.events, args.users, args.batch, rng)
            else:
                t_write = t_project = float("nan")
                ml.catch_up()
            head = ml._head()
            q = ml.timetravel_queries
            with ml.db.read() as cur:
                cur.execute(f"SELECT MIN(recorded_at), MAX(recorded_at), MIN(observed_at), MAX(observed_at) "
                            f"FROM {ml.history_projection.table('versions')}")
                r_lo, r_hi, o_lo, o_hi = cur.fetchone()
                cur.execute(f"SELECT COUNT(*) FROM {ml.history_projection.table('timeline')}")
                n_rows = cur.fetchone()[0]
            print(f"\nledger: {head:,} events, {args.users:,} users, {n_rows:,} timeline rows at {home}")
            if fresh:
                print(f"build: write {t_write:.1f} s ({head / t_write:,.0f} events/s), catch-up "
                      f"{t_project:.1f} s ({head / t_project:,.0f} events/s)")

            def pick() -> tuple[str, int, int]:
                return f"user-{rng.randrange(args.users)}", rng.randint(r_lo, r_hi), rng.randint(o_lo, o_hi)

            pairs = [pick() for _ in range(args.queries)]
            api_ms, sql_ms, obs_ms = [], [], []
            for user, t, _ in pairs[:20]:  # warm the page cache and the code paths
                ml.believed(user, from_micros(t))
            for user, t, o in pairs:
                t0 = time.perf_counter()
                ml.believed(user, from_micros(t))
                api_ms.append((time.perf_counter() - t0) * 1000)
                with ml.db.read() as cur:
                    t0 = time.perf_counter()
                    q.beliefs(cur, user, Cutoff("system", t), t)
                    sql_ms.append((time.perf_counter() - t0) * 1000)
                    t0 = time.perf_counter()
                    q.beliefs(cur, user, Cutoff("observed", o), o)
                    obs_ms.append((time.perf_counter() - t0) * 1000)
            replay_ms = []
            for user, t, _ in pairs[: args.replays]:
                t0 = time.perf_counter()
                slow = replay_believed(ml.app, user, t, t)
                replay_ms.append((time.perf_counter() - t0) * 1000)
                fast = ml.believed(user, from_micros(t))
                got = [(k, b.version, to_micros(b.valid_from), to_micros(b.valid_to, OPEN), b.status)
                       for k, b in fast.facts.items()]
                want = [(b.key, b.version, b.valid_from, b.valid_to, b.status) for b in slow]
                assert got == want, (user, t, got, want)
    finally:
        if not args.keep and not args.home:
            shutil.rmtree(home, ignore_errors=True)

    base = statistics.median(replay_ms)
    rows = [
        ("replay to cutoff (baseline)", replay_ms),
        ("believed (API), system axis", api_ms),
        ("believed (SQL), system axis", sql_ms),
        ("believed (SQL), observed axis", obs_ms),
    ]
    print(f"\n{'method':<32}{'n':>6}{'p50 ms':>12}{'p95 ms':>12}{'x faster than replay (p50)':>30}")
    for name, xs in rows:
        p50 = statistics.median(xs)
        print(f"{name:<32}{len(xs):>6}{p50:>12.3f}{pct(xs, 0.95):>12.3f}{base / p50:>30,.0f}")
    p50 = statistics.median(api_ms)
    print(f"\ntarget: believed p50 <= 5 ms: {'met' if p50 <= 5 else 'MISSED'} ({p50:.3f} ms); "
          f">= 1000x replay: {'met' if base / p50 >= 1000 else 'MISSED'} ({base / p50:,.0f}x). "
          f"Replayed answers equal indexed ones for {len(replay_ms)} pairs.")


if __name__ == "__main__":
    main()
