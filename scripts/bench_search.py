#!/usr/bin/env python
"""Search latency: one user with 10k memories in a ledger of 200k memories across users.

The ledger is built through the public API (``MemoryLedger.record``: the log, every projection, the vectors
projection). Its passages are embedded with the 384-d hashing embedder, because MiniLM would need ~10 minutes for
200k sentences on this machine; the vectors have MiniLM's dimension, so FAISS and BM25 do exactly the work they do
with MiniLM. The query embedding is timed separately with the real MiniLM model.

Rows (all in this process, on the same data; medians and p95 over the same queries):

* ``MemoryLedger.search(user, q, k=10)`` excluding the query embedding (its vector is precomputed): catch-up
  check, mirror refresh, FAISS + BM25 top-50, RRF, scoring, pydantic hits — what an agent waits for.
* its parts: the user's FAISS index alone (``IndexIDMap2(IndexFlatIP)``, 1 OpenMP thread), BM25 alone.
* the baseline: one global ``IndexFlatIP`` over every user's vectors, searched for the top 1000 and post-filtered
  to the user (the design this projection refuses: slower, and isolation by a filter), with 1 and 2 OpenMP
  threads.
* MiniLM ``embed_query`` (batch 1), for the end-to-end picture.

Usage: python scripts/bench_search.py [--total 200000] [--user-memories 10000] [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import faiss  # noqa: E402
import numpy as np  # noqa: E402

from memledger import MemoryLedger  # noqa: E402
from projections.retrieval.embedders import HashingEmbedder  # noqa: E402

LOCOMO = Path("/work/shared/data/locomo/locomo_sample.json")
SAMPLE = ROOT / "samples" / "locomo_conv30.json"


def vocabulary() -> list[str]:
    """Words of the LoCoMo observations (realistic term frequencies for BM25), most frequent first."""
    src = LOCOMO if LOCOMO.is_file() else SAMPLE
    data = json.loads(src.read_text(encoding="utf-8"))
    words: dict[str, int] = {}
    for conv in data if isinstance(data, list) else [data]:
        for sess in conv["observation"].values():
            for items in sess.values():
                for text, _ in items:
                    for w in re.findall(r"[A-Za-z']+", text):
                        words[w] = words.get(w, 0) + 1
    return sorted(words, key=lambda w: -words[w])


def sentences(rng: random.Random, vocab: list[str], n: int) -> list[str]:
    weights = [1.0 / (i + 1) for i in range(len(vocab))]  # Zipf-like
    return [" ".join(rng.choices(vocab, weights, k=rng.randint(8, 16))) + f" ({i})" for i in range(n)]


class PrecomputedQueries:
    """The hashing embedder, with query vectors looked up instead of computed (to time search without them)."""

    def __init__(self, inner: HashingEmbedder, queries: list[str]) -> None:
        self.inner = inner
        self.model_id, self.dim, self.normalized = inner.model_id, inner.dim, inner.normalized
        self.vectors = {q: inner.embed_query(q) for q in queries}

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        return self.inner.embed_passages(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.vectors[text]


def timed(fn, items, repeat: int = 1) -> list[float]:
    out = []
    for _ in range(repeat):
        for x in items:
            t = time.perf_counter()
            fn(x)
            out.append((time.perf_counter() - t) * 1000)
    return out


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--total", type=int, default=200_000)
    ap.add_argument("--user-memories", type=int, default=10_000)
    ap.add_argument("--others", type=int, default=1000, help="memories per other user")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--home", type=Path, help="reuse/keep the store here (default: temporary)")
    args = ap.parse_args()
    rng = random.Random(4)
    vocab = vocabulary()
    tmp = tempfile.TemporaryDirectory()
    home = args.home or Path(tmp.name) / "ledger"
    emb = HashingEmbedder(384)
    big = "big-user"
    plan = [(big, args.user_memories)]
    rest = args.total - args.user_memories
    plan += [(f"user{i:04d}", min(args.others, rest - i * args.others))
             for i in range((rest + args.others - 1) // args.others)]
    t0 = time.perf_counter()
    with MemoryLedger(home=home, embedder=emb) as ml:
        have = ml._head()
        if have < args.total:
            done = 0
            for user, n in plan:
                texts = sentences(rng, vocab, n)
                for i in range(0, n, 2000):
                    ml.record([{"user_id": user, "key": f"memory.m{i + j}", "value": j, "text": t}
                               for j, t in enumerate(texts[i:i + 2000])])
                done += n
                print(f"\r  ingested {done}/{args.total} ({done / (time.perf_counter() - t0):.0f}/s)", end="",
                      file=sys.stderr, flush=True)
            print(file=sys.stderr)
    build_s = time.perf_counter() - t0

    queries = [" ".join(rng.choices(vocab[:2000], k=rng.randint(3, 8))) for _ in range(args.queries)]
    pre = PrecomputedQueries(emb, queries)
    with MemoryLedger(home=home, embedder=emb) as ml:
        proj = ml.vectors_projection
        t = time.perf_counter()
        # The vectors projection is deferred (writes do not embed): bring it up to the head before timing reads,
        # as the first search would. Its cost is the build's, reported as "vectors caught up in".
        ml.catch_up()
        vec_s = time.perf_counter() - t
        t = time.perf_counter()
        with ml.db.read() as cur:
            mem = proj.refresh(cur)
        open_s = time.perf_counter() - t
        proj._embedder = pre  # same model id: the table and the mirror stay valid
        u = mem.users[big]
        n_user, n_all = len(u.meta), sum(len(x.meta) for x in mem.users.values())
        for q in queries[:20]:  # warm-up
            ml.search(big, q, k=10)
        rows: list[tuple[str, list[float]]] = []
        rows.append(("MemoryLedger.search(k=10), query embedding excluded",
                     timed(lambda q: ml.search(big, q, k=10), queries, 2)))
        qv = {q: pre.vectors[q] for q in queries}
        rows.append(("  user's FAISS flat index, top 50 (1 thread)", timed(lambda q: u.vectors.search(qv[q], 50),
                                                                          queries, 2)))
        rows.append(("  user's BM25, top 50", timed(lambda q: u.lexical.search(q, 50), queries, 2)))
        small = next(x for x in mem.users if x != big)
        rows.append((f"MemoryLedger.search(k=10), a user with {len(mem.users[small].meta)} memories",
                     timed(lambda q: ml.search(small, q, k=10), queries, 2)))
        # baseline: one global flat index over every user's vectors, post-filtered to the user
        owners, mats = [], []
        for user, x in mem.users.items():
            ids = x.vectors.doc_ids()
            mats.append(np.stack([x.vectors.get_vector(d) for d in ids]))
            owners.extend([user] * len(ids))
        glob = faiss.IndexFlatIP(384)
        glob.add(np.ascontiguousarray(np.concatenate(mats)))
        owner_arr = np.array(owners)

        def global_search(q: str, threads: int) -> list[int]:
            faiss.omp_set_num_threads(threads)
            _, ids = glob.search(qv[q].reshape(1, -1), 1000)
            return [i for i in ids[0] if owner_arr[i] == big][:10]

        base = timed(lambda q: global_search(q, 1), queries)
        rows.append(("baseline: global flat index (all users), top 1000, post-filter (1 thread)", base))
        rows.append(("baseline, 2 OpenMP threads", timed(lambda q: global_search(q, 2), queries)))
        faiss.omp_set_num_threads(1)
    from projections.retrieval.embedders import SentenceTransformerEmbedder

    st = SentenceTransformerEmbedder()
    st.embed_query("warm up")
    rows.append(("MiniLM embed_query (batch 1), timed separately", timed(st.embed_query, queries[:100])))

    print(f"Ledger: {n_all} memories across {len(mem.users)} users (built in {build_s:.0f} s; mirror loaded in "
          f"{open_s:.2f} s, vectors projection caught up in {vec_s:.0f} s); searched user: {n_user} memories; {len(queries)} queries x 2; 384-d; "
          f"faiss {faiss.__version__}.")
    print()
    print("| what | median ms | p95 ms | ratio vs baseline (median) |")
    print("|---|---|---|---|")
    bm = statistics.median(base)
    for name, xs in rows:
        m = statistics.median(xs)
        print(f"| {name} | {m:.3f} | {pct(xs, 0.95):.3f} | {m / bm:.2f} |")
    tmp.cleanup()


if __name__ == "__main__":
    main()
