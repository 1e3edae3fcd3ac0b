#!/usr/bin/env python
"""Query-side speed: embedding ingest, warm search end to end, and the cold CLI.

Everything on the LoCoMo observations (``/work/shared/data/locomo/locomo_sample.json`` when present, else the shipped
``samples/locomo_conv30.json``), the real all-MiniLM-L6-v2, all in this process except the cold-CLI rows (fresh
processes, as an agent's tool call pays them). Each table row has its baseline measured in the same run:

* ingest: ``MemoryLedger.ingest`` + the first search (which embeds every observation into the vectors projection),
  in texts/s, against the same embedder's batched ``embed_passages`` over the same texts (no cache).
* warm search: ``MemoryLedger.search(user, question, k=10)`` end to end with the query-vector cache cleared before
  every call (each call embeds its query), ONNX query encoder against the torch one (``$MEMLEDGER_ONNX=off``), and
  the search with its query vector already cached (FAISS + BM25 + fusion + hits: the floor).
* cold CLI: wall time from process start to exit of ``memledger search`` / ``profile`` / ``assert`` on that store,
  against ``python -c pass`` (the interpreter alone) and ``memledger search`` on the torch path; bytecode written
  and reused as in a user's shell (one untimed run per row first, ``$PYTHONDONTWRITEBYTECODE`` dropped).

The one-time ONNX export (first use of the model on a machine; projections/retrieval/onnx_encoder.py ``export_onnx``) is timed
too when ``--export`` is given (the export goes to a scratch directory, not the machine's cache).

Usage: python scripts/bench_query.py [--queries 100] [--cold 5] [--ingest-runs 3] [--export] [--data PATH]

In the ingest rows the p95 column holds the slowest run's rate.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

LOCOMO = Path("/work/shared/data/locomo/locomo_sample.json")
SAMPLE = ROOT / "samples" / "locomo_conv30.json"


def load() -> float:
    """The 1-minute load average (other processes on this machine share its 2 cores)."""
    return os.getloadavg()[0]


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def observations(data: object) -> list[str]:
    texts = []
    for conv in data if isinstance(data, list) else [data]:  # type: ignore[union-attr]
        for sess in conv["observation"].values():
            for items in sess.values():
                texts.extend(t for t, _ in items)
    return texts


def questions(data: object) -> list[str]:
    return [str(q["question"]) for conv in (data if isinstance(data, list) else [data])  # type: ignore[union-attr]
            for q in conv.get("qa", [])]


def cold(cmd: list[str], runs: int, env: dict[str, str]) -> list[float]:
    # One untimed run first: it writes the bytecode of memledger's modules (__pycache__) as any first run on a machine
    # does, so the timed runs measure what every later call pays.
    subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    xs = []
    for _ in range(runs):
        t = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
        xs.append(time.perf_counter() - t)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr[-500:]}")
    return xs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=100, help="questions timed per warm-search row")
    ap.add_argument("--cold", type=int, default=5, help="fresh processes per cold-CLI row")
    ap.add_argument("--ingest-runs", type=int, default=3, help="ingests (each into a fresh store) for the medians")
    ap.add_argument("--export", action="store_true", help="also time the one-time ONNX export (scratch dir)")
    ap.add_argument("--data", type=Path, default=LOCOMO if LOCOMO.is_file() else SAMPLE)
    args = ap.parse_args()

    from memledger import MemoryLedger
    from projections.retrieval import embedders, onnx_encoder

    data = json.loads(args.data.read_text(encoding="utf-8"))
    texts = observations(data)
    qs = (questions(data) or texts)[: args.queries]
    rows: list[tuple[str, str, float, float, str, float]] = []  # section, what, median, p95|value, ratio, load

    if args.export:
        with tempfile.TemporaryDirectory() as d:
            path = embedders.default_minilm_path().resolve()
            t = time.perf_counter()
            gap = onnx_encoder.export_onnx(path, Path(d) / "m.onnx", onnx_encoder._mean_pooling_stack(path) or 256)
            rows.append(("one-time", f"ONNX export + check (max |onnx - torch| = {gap:.1e})",
                         time.perf_counter() - t, float("nan"), "", load()))

    emb = embedders.SentenceTransformerEmbedder()
    backend = emb.backend
    # ingest against its baseline (the same embedder, batched, the same texts, no cache), alternating, each ingest
    # into a fresh store (so a fresh embedding cache): medians of --ingest-runs
    unique = list(dict.fromkeys(texts))
    emb.embed_passages(unique[:64])
    base_rates, ingest_rates, one_stream_rates = [], [], []
    tmp = tempfile.TemporaryDirectory()
    encoder = onnx_encoder._onnx_encoder(emb.path, emb.model_id, emb.batch_size) if backend == "onnx" else None
    for run in range(args.ingest_runs):
        t = time.perf_counter()
        emb.embed_passages(unique)
        base_rates.append(len(unique) / (time.perf_counter() - t))
        if encoder is not None:  # the same encode on one stream (as before passages ran on two threads)
            streams, encoder.streams = encoder.streams, 1
            t = time.perf_counter()
            emb.embed_passages(unique)
            one_stream_rates.append(len(unique) / (time.perf_counter() - t))
            encoder.streams = streams
        home = Path(tmp.name) / f"ledger{run}"
        with MemoryLedger(home=home) as ml:
            t = time.perf_counter()
            report = ml.ingest(args.data)
            users = report["users"]
            user = max(users, key=lambda u: users[u] if isinstance(users[u], int) else 0)
            ml.search(user, "warm up", k=10)  # catches the vectors projection up: every observation searchable
            ingest_rates.append(len(unique) / (time.perf_counter() - t))
    base_ingest, ingest_rate = statistics.median(base_rates), statistics.median(ingest_rates)
    rows.append(("ingest", f"ingest + first search, {len(unique)} observations ({backend}), texts/s, median of "
                 f"{args.ingest_runs}", ingest_rate, min(ingest_rates), f"{ingest_rate / base_ingest:.2f}", load()))
    streams = getattr(encoder, "streams", 1)
    rows.append(("ingest", f"baseline: the same embedder's batched embed_passages ({streams} streams), texts/s",
                 base_ingest, min(base_rates), "1.00", load()))
    if one_stream_rates:
        one = statistics.median(one_stream_rates)
        rows.append(("ingest", "the same batched encode on one stream ($MEMLEDGER_ONNX_STREAMS=1), texts/s", one,
                     min(one_stream_rates), f"{one / base_ingest:.2f}", load()))

    with MemoryLedger(home=home) as ml:
        vp = ml.vectors_projection

        def timed_search() -> list[float]:
            xs = []
            for q in qs:
                vp._queries.clear()  # no query-cache help: every call embeds its query
                t0 = time.perf_counter()
                ml.search(user, q, k=10)
                xs.append((time.perf_counter() - t0) * 1000)
            return xs

        timed_search()  # warm: mirror loaded, code paths hot
        onnx_ms = timed_search()
        onnx_load = load()
        os.environ[onnx_encoder.ONNX_ENV] = "off"  # the torch path, same process (the encoder is chosen per call)
        try:
            vp._queries.clear()
            ml.search(user, "load torch and the model before timing", k=10)
            torch_ms = timed_search()
            torch_load = load()
        finally:
            os.environ.pop(onnx_encoder.ONNX_ENV, None)
        for q in qs:
            ml.search(user, q, k=10)
        cached = []
        for q in qs:
            t0 = time.perf_counter()
            ml.search(user, q, k=10)
            cached.append((time.perf_counter() - t0) * 1000)
        cached_load = load()
        base = statistics.median(torch_ms)
        rows.append(("warm search ms", f"search k=10, query cache cleared, {backend} query encoder",
                     statistics.median(onnx_ms), pct(onnx_ms, 0.95), f"{statistics.median(onnx_ms) / base:.2f}",
                     onnx_load))
        rows.append(("warm search ms", "baseline: the same, torch query encoder", base, pct(torch_ms, 0.95), "1.00",
                     torch_load))
        rows.append(("warm search ms", "the same with the query vector cached (no encoder)",
                     statistics.median(cached), pct(cached, 0.95), f"{statistics.median(cached) / base:.2f}",
                     cached_load))
        n_user = users[user]

    # A user's shell: bytecode is written and reused ($PYTHONDONTWRITEBYTECODE, set on some CI machines, made every
    # cold call compile memledger's modules again: +50-70 ms).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"PYTHONPATH": str(ROOT)}
    ml_cmd = [sys.executable, "-m", "memledger", "--home", str(home)]
    q0 = qs[0]
    interp = cold([sys.executable, "-c", "pass"], args.cold, env)
    interp_load = load()
    runs = [
        ("memledger search (ONNX query encoder)", ml_cmd + ["search", user, q0, "-k", "3"], env),
        ("memledger search, torch path ($MEMLEDGER_ONNX=off)", ml_cmd + ["search", user, q0, "-k", "3"],
         {**env, onnx_encoder.ONNX_ENV: "off"}),
        ("memledger profile", ml_cmd + ["profile", user], env),
        ("memledger assert", ml_cmd + ["assert", "bench-user", "preference.drink", '"tea"'], env),
    ]
    measured = {}
    for name, cmd, e in runs:
        measured[name] = (cold(cmd, args.cold, e), load())
    torch_cold = statistics.median(measured[runs[1][0]][0])
    for name, (xs, ld) in measured.items():
        rows.append(("cold CLI s", name, statistics.median(xs), pct(xs, 0.95),
                     f"{statistics.median(xs) / torch_cold:.2f}", ld))
    rows.append(("cold CLI s", "the interpreter alone (python -c pass)", statistics.median(interp), pct(interp, 0.95),
                 f"{statistics.median(interp) / torch_cold:.2f}", interp_load))
    tmp.cleanup()

    print(f"Data: {args.data.name}, {len(unique)} observations; searched user {user} ({n_user} memories); "
          f"{len(qs)} questions; query encoder {backend}; {os.cpu_count()} cores.")
    print()
    print("| section | what | median | p95 | ratio vs baseline | load (1 min) |")
    print("|---|---|---|---|---|---|")
    for section, what, med, p95, ratio, ld in rows:
        p95s = "" if p95 != p95 else f"{p95:.3f}"
        print(f"| {section} | {what} | {med:.3f} | {p95s} | {ratio} | {ld:.2f} |")
    print()
    print("Ratios: ingest against the batched encode; warm search against the torch query encoder; cold CLI against "
          "the torch-path search.")


if __name__ == "__main__":
    main()
