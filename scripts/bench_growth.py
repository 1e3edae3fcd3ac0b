"""Growth and footprint: does the store slow down or bloat as it grows? From an empty store to ``--facts``.

    python scripts/bench_growth.py                                  # SQLite, 20k facts: a quick run
    python scripts/bench_growth.py --footprint                      # + bytes per LoCoMo observation (MiniLM)
    python scripts/bench_growth.py --facts 1000000 --footprint --rss-memories 100000 --rss-minilm
    python scripts/bench_growth.py --compare                        # beside a store built with uuid4 event ids
    python scripts/bench_growth.py --dsn postgresql://postgres@127.0.0.1:5432/test --facts 50000

Four tables, each figure beside its baseline measured in the same run:

1. **Append throughput per window.** The store is built through the public API, ``MemoryLedger.record(batch)``
   (validation, policy, encryption, one save, inline catch-up of the non-deferred projections): ``--batch`` new
   facts per call, one user per ``--per-user`` facts. For each window of ``--window`` events: events/s by the wall
   clock and by this process's CPU time (steadier on a shared machine), and on SQLite what the process asked of the
   kernel per event (``/proc/self/io``: read syscalls and KB written). ``ratio`` = the window's CPU events/s over
   the first window's. ``--compare`` grows a second store in lockstep whose facts get uuid4 event ids.
2. **Latency at ``--early`` facts (baseline) and at ``--facts``.** ``--probes`` single-command ``record()`` calls
   (one new fact each: one save, one commit) and ``believed(user, as_of=now)`` on a user of 20 facts recorded first
   and on a full user of ``--per-user`` facts; p50/p95 wall ms, p50 CPU ms, ratio = at ``--facts`` / at ``--early``.
   On SQLite also the home directory's bytes per fact (every file: log, projections, key store, WAL).
3. **Footprint of the LoCoMo observations** (``--footprint``, SQLite, ``--footprint-embedder``, default the real
   MiniLM): every observation recorded as ``ingest --format locomo`` records it
   (``memledger.ingest.locomo_commands``; the turns are not logged as messages here) and every user searched
   once (vectors built), then the bytes of every file of the home directory per memory, each SQLite database
   broken down by table and index (the ``dbstat`` virtual table), and the stored event's fields. Baseline: the
   observations' own text (UTF-8 bytes).
4. **Resident memory** (``--rss-memories N``, SQLite): one user with N memories (vectors by the ``hash:384``
   test double: the same bytes per vector as MiniLM, built in seconds instead of hours), then a fresh process opens
   that store and serves searches; VmRSS after the imports (its baseline), after opening, after the first search
   (index loaded), after ``--probes`` more, peak (VmHWM), and with ``--rss-minilm`` after the MiniLM query encoder
   is loaded too; the first search's time and the warm searches' p50/p95; each beside the same for a user with 1,000
   memories in the same run. Also that store's bytes on disk per memory, all files counted, vectors included.

Nothing here is asserted: speed and size are reported, never tested. Run it alone on a shared machine
(``flock /tmp/memledger-heavy.lock python scripts/bench_growth.py ...``); the load average is printed beside each
figure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MEMLEDGER_EMBEDDER", "hash")  # vectors are deferred: record() never embeds
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import ledger.domain as domain  # noqa: E402
from memledger import MemoryLedger  # noqa: E402

LOCOMO = Path("/work/shared/data/locomo/locomo_sample.json")
SAMPLE = ROOT / "samples" / "locomo_conv30.json"
PROBE_USER = "probe-small"
RSS_BASELINE = 1000  # table 4's baseline: a user with this many memories, measured in the same run


def load() -> float:
    """The 1-minute load average (other processes share this machine's cores)."""
    return os.getloadavg()[0]


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def proc_io() -> dict[str, int]:
    """This process's I/O counters (Linux ``/proc/self/io``); empty where there is none."""
    try:
        with open("/proc/self/io") as f:
            return {k: int(v) for k, v in (line.split(":") for line in f)}
    except OSError:
        return {}


def proc_status(field: str) -> int:
    """A ``/proc/self/status`` figure in bytes (``VmRSS``, ``VmHWM``); 0 where there is none."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def dir_bytes(path: Path) -> dict[str, int]:
    """Every file under ``path`` (relative name -> bytes); FAISS/BM25 files of one kind are summed."""
    out: dict[str, int] = {}
    for p in sorted(path.rglob("*")):
        if p.is_file():
            rel = p.relative_to(path)
            name = str(rel)
            if p.suffix in (".faiss", ".lex", ".vec") and len(rel.parts) > 1:
                name = f"{rel.parts[0]}/*/*{p.suffix} (per-user index files)"
            out[name] = out.get(name, 0) + p.stat().st_size
    return out


def db_tables(db: Path) -> list[tuple[str, int, int]]:
    """(table or index, bytes of its pages, bytes of payload) from SQLite's ``dbstat``; [] when unavailable."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            return [(n, int(s), int(p or 0)) for n, s, p in c.execute(
                "SELECT name, SUM(pgsize), SUM(payload) FROM dbstat GROUP BY name ORDER BY 2 DESC")]
    except sqlite3.Error:
        return []


class Store:
    """One ledger being grown, with its counters for the current window."""

    def __init__(self, name: str, dsn: str | None, random_ids: bool) -> None:
        self.name, self.dsn, self.random_ids = name, dsn, random_ids
        self.dir = tempfile.mkdtemp(prefix="bench_growth_")
        self.home = Path(self.dir) / "l"
        self.schema = f"bench_growth_{uuid.uuid4().hex[:10]}"
        self.ml = MemoryLedger(dsn=dsn, schema=self.schema) if dsn else MemoryLedger(home=self.home)
        self.wall = self.cpu = 0.0
        self.io: dict[str, int] = {}
        self.rows: list[tuple[float, float]] = []  # (wall events/s, cpu events/s) per window

    def record(self, cmds: list[dict[str, Any]]) -> None:
        saved = domain.new_event_id
        if self.random_ids:
            domain.new_event_id = lambda: str(uuid.uuid4())
        before = proc_io()
        w, c = time.perf_counter(), time.process_time()
        try:
            self.ml.record(cmds)
        finally:
            self.wall += time.perf_counter() - w
            self.cpu += time.process_time() - c
            domain.new_event_id = saved
            for k, v in proc_io().items():
                self.io[k] = self.io.get(k, 0) + v - before.get(k, 0)

    def window(self, n: int) -> str:
        """Close the current window of ``n`` events; returns its table cells."""
        self.rows.append((n / self.wall, n / self.cpu))
        first = self.rows[0]
        cells = (f"{n / self.wall:>8,.0f} | {n / self.cpu:>8,.0f} | {self.rows[-1][1] / first[1]:>5.2f} | "
                 + (f"{self.io.get('syscr', 0) / n:>5.1f} | {self.io.get('wchar', 0) / n / 1024:>6.1f}"
                    if self.io else "    - |      -"))
        self.wall = self.cpu = 0.0
        self.io = {}
        return cells

    def close(self) -> None:
        self.ml.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.dsn:
            import psycopg

            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')


def batch(start: int, n: int, per_user: int) -> list[dict[str, Any]]:
    """``n`` assert commands on new facts ``memory.m<i>``, one user per ``per_user`` facts."""
    return [{"user_id": f"user{(start + j) // per_user:05d}", "key": f"memory.m{start + j}", "value": start + j,
             "text": f"the user mentioned thing number {start + j} in passing"} for j in range(n)]


class Probe:
    """Latency of one append and of ``believed`` at a given size of the store (table 2)."""

    def __init__(self, s: Store, probes: int, per_user: int, facts: int, tag: str) -> None:
        ml = s.ml
        append_ms, append_cpu, small_ms, full_ms = [], [], [], []
        for i in range(probes):  # one new fact per save: one commit each (the single-command path)
            cmd = {"user_id": "probe-appends", "key": f"memory.{tag}{i}", "value": i,
                   "text": f"a single appended memory number {i}"}
            w, c = time.perf_counter(), time.process_time()
            ml.record([cmd])
            append_ms.append((time.perf_counter() - w) * 1000)
            append_cpu.append((time.process_time() - c) * 1000)
        self.append_load = load()
        now = datetime.now(timezone.utc).isoformat()
        full_user = "user00000"
        self.small_n = len(ml.believed(PROBE_USER, now).facts)
        self.full_n = len(ml.believed(full_user, now).facts)
        for _ in range(probes):
            w = time.perf_counter()
            ml.believed(PROBE_USER, now)
            small_ms.append((time.perf_counter() - w) * 1000)
            w = time.perf_counter()
            ml.believed(full_user, now)
            full_ms.append((time.perf_counter() - w) * 1000)
        self.believed_load = load()
        self.facts = facts
        files = dir_bytes(s.home) if not s.dsn else {}
        self.bytes = sum(files.values())
        self.wal = sum(v for k, v in files.items() if k.endswith(("-wal", "-shm")))
        self.rows = {
            "append: record() of 1 fact, wall ms": (append_ms, self.append_load),
            "append: record() of 1 fact, CPU ms": (append_cpu, self.append_load),
            f"believed(as_of=now), user of {self.small_n} facts, ms": (small_ms, self.believed_load),
            f"believed(as_of=now), user of {self.full_n} facts, ms": (full_ms, self.believed_load),
        }


def print_probes(early: Probe, late: Probe) -> None:
    print()
    calls = len(next(iter(early.rows.values()))[0])
    print(f"Latency at {early.facts:,} facts (baseline) and at {late.facts:,} facts, {calls} calls each; "
          "ratio = p50 at the end / p50 at the baseline")
    print()
    print(f"| measure | p50 at {early.facts:,} | p95 at {early.facts:,} | load | p50 at {late.facts:,} | "
          f"p95 at {late.facts:,} | load | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for (name, (a, la)), (_, (b, lb)) in zip(early.rows.items(), late.rows.items()):
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"| {name} | {ma:.2f} | {pct(a, 0.95):.2f} | {la:.2f} | {mb:.2f} | {pct(b, 0.95):.2f} | {lb:.2f} | "
              f"{mb / ma:.2f} |")
    if early.bytes:
        print(f"| bytes on disk per fact (all files, no vectors built) | {early.bytes / early.facts:,.0f} | | "
              f"{early.append_load:.2f} | {late.bytes / late.facts:,.0f} | | {late.append_load:.2f} | "
              f"{(late.bytes / late.facts) / (early.bytes / early.facts):.2f} |")
        print(f"| of which -wal and -shm files (store open) | {early.wal / early.facts:,.0f} | | "
              f"{early.append_load:.2f} | {late.wal / late.facts:,.0f} | | {late.append_load:.2f} | "
              f"{(late.wal / late.facts) / max(1e-9, early.wal / early.facts):.2f} |")


def grow(a: argparse.Namespace) -> None:
    """Tables 1 and 2."""
    stores = [Store("uuid7 ids (now)", a.dsn, False)]
    if a.compare:
        stores.append(Store("uuid4 ids (before)", a.dsn, True))
    ld = os.getloadavg()
    print(f"bench_growth: {'PostgreSQL' if a.dsn else 'SQLite'}, {a.events:,} facts by record() of {a.batch}, "
          f"{a.per_user} per user; load average at start {ld[0]:.2f} {ld[1]:.2f} {ld[2]:.2f}")
    print("per store: events/s wall | events/s CPU | CPU ratio to first window | read syscalls/event | KB "
          "written/event")
    print("| events | " + " | ".join(f"{s.name}: wall/s | CPU/s | ratio | rd/ev | KB/ev" for s in stores) + " |")
    print("|---:|" + "---:|" * 5 * len(stores))
    main_store = stores[0]
    probes: list[Probe] = []
    try:
        if a.probes:
            main_store.ml.record([{"user_id": PROBE_USER, "key": f"memory.small{i}", "value": i,
                                   "text": f"an early small memory number {i}"} for i in range(20)])
        for start in range(0, a.events, a.batch):
            for s in stores:
                s.record(batch(start, a.batch, a.per_user))
            done = start + a.batch
            if done % a.window == 0:
                print(f"| {done:>7,} | " + " | ".join(s.window(a.window) for s in stores) + " |", flush=True)
            if a.probes and done in (min(a.early, a.events), a.events) and len(probes) < 2:
                probes.append(Probe(main_store, a.probes, a.per_user, done, f"p{done}_"))
                if done == a.events and len(probes) == 1:  # --early >= --facts: compare the end with itself
                    probes.append(probes[0])
        for s in stores:
            cpu = [c for _, c in s.rows]
            half = max(1, len(cpu) // 4)
            print(f"{s.name}: CPU events/s, median of the last {half} windows / the first {half}: "
                  f"{statistics.median(cpu[-half:]) / statistics.median(cpu[:half]):.2f}")
        if len(probes) == 2:
            print_probes(probes[0], probes[1])
    finally:
        for s in stores:
            s.close()
    print(f"load average at end {load():.2f}")


def event_fields(db: Path) -> list[tuple[str, float]]:
    """Mean bytes of each field of the stored events' JSON state (encrypted fields as stored)."""
    sizes: dict[str, int] = {}
    n = 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            for (state,) in c.execute("SELECT state FROM stored_events"):
                try:
                    obj = json.loads(state)
                except (ValueError, TypeError):
                    continue
                n += 1
                for k, v in obj.items():
                    sizes[k] = sizes.get(k, 0) + len(json.dumps(v, separators=(",", ":"))) + len(k) + 4
    except sqlite3.Error:
        return []
    return sorted(((k, v / n) for k, v in sizes.items()), key=lambda kv: -kv[1]) if n else []


def footprint(a: argparse.Namespace) -> None:
    """Table 3: bytes on disk per LoCoMo observation, every file counted, and where they go."""
    from memledger.ingest import locomo_commands

    data = json.loads(a.data.read_text(encoding="utf-8"))
    cmds = locomo_commands(data)
    n = len(cmds)
    text_bytes = sum(len((c.text or "").encode("utf-8")) for c in cmds)
    with tempfile.TemporaryDirectory(prefix="bench_growth_fp_") as d:
        home = Path(d) / "l"
        w = time.perf_counter()
        with MemoryLedger(home=home, embedder=a.footprint_embedder) as ml:
            ml.record(cmds)
            users = sorted({c.user_id for c in cmds})
            for u in users:
                ml.search(u, "what does the user like", k=5)  # catches the vectors projection up
            wal_open = sum(v for k, v in dir_bytes(home).items() if k.endswith(("-wal", "-shm")))
        secs = time.perf_counter() - w
        ld = load()
        files = dir_bytes(home)
        total = sum(files.values())
        print()
        print(f"Footprint: {a.data.name}, {n} observations of {len(users)} users, embedder "
              f"{a.footprint_embedder}, recorded + every user searched once in {secs:.1f} s (load {ld:.2f}); "
              "home directory after close")
        print()
        print("| where | bytes | bytes per memory | share | ratio to the text |")
        print("|---|---:|---:|---:|---:|")
        tb = text_bytes / n
        print(f"| baseline: the observation's text (UTF-8) | {text_bytes:,} | {tb:,.0f} | | 1.00 |")
        print(f"| **all files** | {total:,} | {total / n:,.0f} | 100% | {total / n / tb:.1f} |")
        print(f"| -wal and -shm files while the store was open (gone after close, not in the total) | {wal_open:,} | "
              f"{wal_open / n:,.0f} | | {wal_open / n / tb:.1f} |")
        for name, size in sorted(files.items(), key=lambda kv: -kv[1]):
            print(f"| file {name} | {size:,} | {size / n:,.0f} | {size / total:.0%} | {size / n / tb:.1f} |")
        for db in sorted(home.rglob("*.db")):
            for name, pages, payload in db_tables(db):
                if pages >= a.min_table_bytes:
                    print(f"| {db.relative_to(home)}: {name} (payload {payload / n:,.0f} B/memory) | {pages:,} | "
                          f"{pages / n:,.0f} | {pages / total:.0%} | {pages / n / tb:.1f} |")
        fields = event_fields(home / "events.db")
        if fields:
            print()
            print("Stored event (events.db ``state``), mean bytes per field, largest first: "
                  + ", ".join(f"{k} {v:,.0f}" for k, v in fields[:10]))
    print(f"load average at end {load():.2f}")


def serve(home: str, user: str, probes: int, minilm: bool) -> None:
    """The child of table 4: RSS of a process that opens the store and serves searches (prints JSON)."""
    out: dict[str, Any] = {"imports": proc_status("VmRSS")}
    ml = MemoryLedger(home=home, embedder="hash:384", cjk_embedder="none")
    out["open"] = proc_status("VmRSS")
    w = time.perf_counter()
    ml.search(user, "what did the user mention in passing", k=10)
    out["first_ms"] = (time.perf_counter() - w) * 1000
    out["first"] = proc_status("VmRSS")
    ms = []
    for i in range(probes):
        w = time.perf_counter()
        ml.search(user, f"thing number {i * 997} in passing", k=10)
        ms.append((time.perf_counter() - w) * 1000)
    out["warm"] = proc_status("VmRSS")
    out["warm_ms"] = ms
    if minilm:
        from projections.retrieval.embedders import SentenceTransformerEmbedder

        e = SentenceTransformerEmbedder()
        e.embed_query("what did the user mention in passing")
        out["minilm"] = proc_status("VmRSS")
        out["backend"] = e.backend
    out["hwm"] = proc_status("VmHWM")
    ml.close()
    print(json.dumps(out))


def serve_one(a: argparse.Namespace, n: int, user: str) -> tuple[dict[str, Any], dict[str, int], float, float, float]:
    """One store with ``user`` holding ``n`` memories, served by a fresh process (:func:`serve`): its figures, the
    store's files, the build and index times, and the load when it was measured."""
    with tempfile.TemporaryDirectory(prefix="bench_growth_rss_") as d:
        home = Path(d) / "l"
        w = time.perf_counter()
        with MemoryLedger(home=home, embedder="hash:384", cjk_embedder="none") as ml:
            for start in range(0, n, a.batch):
                ml.record([{**c, "user_id": user} for c in batch(start, min(a.batch, n - start), n + 1)])
            built = time.perf_counter() - w
            ml.search(user, "warm up", k=10)  # builds the user's vectors and index files
            indexed = time.perf_counter() - w - built
        files = dir_bytes(home)
        p = subprocess.run([sys.executable, __file__, "--_serve", str(home), user, str(a.probes or 10)]
                           + (["--rss-minilm"] if a.rss_minilm else []),
                           capture_output=True, text=True, cwd=ROOT)
        if p.returncode != 0:
            raise SystemExit(f"serving process failed: {p.stderr[-1500:]}")
        return json.loads(p.stdout.strip().splitlines()[-1]), files, built, indexed, load()


def rss(a: argparse.Namespace) -> None:
    """Table 4: a process serving search for a user with ``--rss-memories`` memories, beside the same for a user
    with 1,000 (the baseline, measured in the same run)."""
    n, user = a.rss_memories, "bigUser"
    small, _, _, _, small_load = serve_one(a, RSS_BASELINE, user)
    r, files, built, indexed, ld = serve_one(a, n, user)
    disk_load = ld
    mb = 1024 * 1024
    print()
    print(f"Resident memory: one user with {n:,} memories (recorded in {built:.0f} s, vectors + index built by the "
          f"first search in {indexed:.0f} s); a fresh process opens the store and searches (load {ld:.2f}); beside "
          f"it the same for a user with {RSS_BASELINE:,} memories (load {small_load:.2f})")
    print()
    print(f"| measure | {RSS_BASELINE:,} memories (baseline) | {n:,} memories | ratio | load |")
    print("|---|---:|---:|---:|---:|")

    def row(name: str, x: float, y: float, fmt: str) -> None:
        print(f"| {name} | {x:{fmt}} | {y:{fmt}} | {y / x if x else float('nan'):.2f} | {ld:.2f} |")

    row("first search ms (the user's index loaded)", small["first_ms"], r["first_ms"], ",.1f")
    row(f"warm search p50 ms ({len(r['warm_ms'])} searches)", statistics.median(small["warm_ms"]),
        statistics.median(r["warm_ms"]), ",.2f")
    row("warm search p95 ms", pct(small["warm_ms"], 0.95), pct(r["warm_ms"], 0.95), ",.2f")
    for name, key in (("VmRSS MB, interpreter + memledger imported", "imports"), ("VmRSS MB, store opened", "open"),
                      ("VmRSS MB after the first search", "first"), ("VmRSS MB after the warm searches", "warm"),
                      *((("VmRSS MB + MiniLM query encoder loaded, one query embedded", "minilm"),)
                        if "minilm" in r else ()), ("peak VmRSS MB (VmHWM)", "hwm")):
        row(name, small[key] / mb, r[key] / mb, ",.1f")
    row("MB over the store opened, after the warm searches", (small["warm"] - small["open"]) / mb,
        (r["warm"] - r["open"]) / mb, ",.1f")
    total = sum(files.values())
    print()
    print(f"Disk of that store ({n:,} memories, vectors included, load {disk_load:.2f}): {total:,} bytes, "
          f"{total / n:,.0f} per memory: " + ", ".join(f"{k} {v / n:,.0f}" for k, v in
                                                      sorted(files.items(), key=lambda kv: -kv[1])))


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--_serve"]:
        serve(argv[1], argv[2], int(argv[3]), "--rss-minilm" in argv)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default=None, help="postgresql://... to grow a PostgreSQL store (default: SQLite)")
    ap.add_argument("--facts", "--events", dest="events", type=int, default=20_000,
                    help="facts recorded in all (default 20000)")
    ap.add_argument("--batch", type=int, default=2000, help="facts per record() call (default 2000)")
    ap.add_argument("--per-user", type=int, default=5000, help="facts per user (default 5000)")
    ap.add_argument("--window", type=int, default=None, help="events per reported window (default --facts / 10)")
    ap.add_argument("--compare", action="store_true", help="grow a store with uuid4 event ids alongside")
    ap.add_argument("--early", type=int, default=10_000, help="size of the latency baseline (default 10000)")
    ap.add_argument("--probes", type=int, default=30, help="calls per latency figure (default 30; 0: none)")
    ap.add_argument("--footprint", action="store_true", help="table 3 (SQLite; loads --footprint-embedder)")
    ap.add_argument("--footprint-embedder", default="minilm", help="embedder of table 3 (default minilm)")
    ap.add_argument("--data", type=Path, default=LOCOMO if LOCOMO.is_file() else SAMPLE, help="LoCoMo file")
    ap.add_argument("--min-table-bytes", type=int, default=8192, help="table 3 lists tables at least this big")
    ap.add_argument("--rss-memories", type=int, default=0, help="table 4: memories of the served user (0: skip)")
    ap.add_argument("--rss-minilm", action="store_true", help="table 4: also load the MiniLM query encoder")
    a = ap.parse_args(argv)
    if a.window is None:
        a.window = max(a.batch, a.events // 10 // a.batch * a.batch)
    for name in ("events", "batch", "per_user", "window"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if a.window % a.batch or a.events % a.window:
        ap.error("--window must be a multiple of --batch, and --events a multiple of --window")
    if a.probes and a.early % a.batch:
        ap.error("--early must be a multiple of --batch")
    grow(a)
    if a.footprint and not a.dsn:
        footprint(a)
    if a.rss_memories and not a.dsn:
        rss(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
