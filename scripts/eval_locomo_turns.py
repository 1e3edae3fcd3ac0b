#!/usr/bin/env python
"""LoCoMo turn-level retrieval: recall@k of the evidence turns when searching the logged *messages*.

Protocol: one fresh ledger per conversation; every turn logged as a message exactly as ``memledger ingest`` does
(memledger/ingest.py ``locomo_messages``; message id = turn id). Both speakers' ledgers hold the whole conversation,
so the search runs on ``speaker_a``'s. For each QA item, ``MemoryLedger.search_messages(question, k=25)``;
recall@k = the fraction of the item's evidence turn ids among the top k message ids, averaged per category
(1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop; category 5, adversarial, is left out as in the paper) and
overall. Baseline: Maharana et al. (ACL 2024), Table 3, DRAGON retriever over dialog turns: 56.7 / 66.2 / 76.7 at
k = 5 / 10 / 25. Rows: dense (the vectors projection's embedder, default MiniLM) + BM25 fused, and BM25 alone
(``--embedder none``). Prints a table; the data (CC BY-NC 4.0) is not shipped beyond samples/locomo_conv30.json.

Usage: python scripts/eval_locomo_turns.py [DATA.json ...] [--embedders minilm,none]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

KS = (5, 10, 25)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
BASELINE = {5: 56.7, 10: 66.2, 25: 76.7}  # DRAGON over turns, LoCoMo paper Table 3 (overall)


def turn_ids(text: str) -> set[str]:
    return set(re.findall(r"D\d+:\d+", text or ""))


def evaluate(paths: list[Path], embedder: str) -> tuple[dict[str, dict[int, float]], dict[str, int], float]:
    """Mean recall@k (percent) per category name and "overall", the item counts, and seconds spent searching."""
    import json

    os.environ["MEMLEDGER_EMBEDDER"] = embedder
    from memledger import MemoryLedger
    from memledger.ingest import locomo_messages

    sums: dict[str, dict[int, float]] = {}
    counts: dict[str, int] = {}
    search_s = 0.0
    for path in paths:
        data = json.loads(path.read_text(encoding="utf-8"))
        for conv in data if isinstance(data, list) else [data]:
            owner = conv["conversation"]["speaker_a"]
            with tempfile.TemporaryDirectory() as home, MemoryLedger(home=home) as ml:
                cmds = [c for c in locomo_messages(conv) if c.user_id == owner]
                for s in range(0, len(cmds), 500):
                    ml.record_session(cmds[s:s + 500])
                for qa in conv.get("qa", []):
                    cat = CATEGORIES.get(qa.get("category"))
                    evidence = set().union(*(turn_ids(e) for e in qa.get("evidence") or [])) if qa.get(
                        "evidence") else set()
                    if cat is None or not evidence:
                        continue
                    t = time.perf_counter()
                    hits = ml.search_messages(owner, str(qa["question"]), k=max(KS))
                    search_s += time.perf_counter() - t
                    ranked = [h.message_id for h in hits]
                    for name in (cat, "overall"):
                        counts[name] = counts.get(name, 0) + 1
                        row = sums.setdefault(name, {k: 0.0 for k in KS})
                        for k in KS:
                            row[k] += len(evidence & set(ranked[:k])) / len(evidence)
    means = {name: {k: 100 * v / counts[name] for k, v in row.items()} for name, row in sums.items()}
    return means, counts, search_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs="*", type=Path, help="LoCoMo JSON files (default: the shipped sample)")
    ap.add_argument("--embedders", default="minilm,none", help="comma-separated MEMLEDGER_EMBEDDER values")
    args = ap.parse_args()
    paths = args.data or [ROOT / "samples" / "locomo_conv30.json"]
    print(f"LoCoMo turn-level recall@k (%), messages of {', '.join(p.name for p in paths)}")
    print("| retriever | " + " | ".join(f"R@{k}" for k in KS) + " | " + " | ".join(CATEGORIES.values())
          + " (R@10) | items | search ms/q |")
    print("|---|" + "---|" * (len(KS) + len(CATEGORIES) + 2))
    for emb in args.embedders.split(","):
        means, counts, secs = evaluate(paths, emb.strip())
        label = "BM25 over messages" if emb.strip() == "none" else f"{emb.strip()} + BM25 (RRF) over messages"
        cats = " | ".join(f"{means[c][10]:.1f} ({counts.get(c, 0)})" if c in means else "-"
                          for c in CATEGORIES.values())
        print(f"| {label} | " + " | ".join(f"{means['overall'][k]:.1f}" for k in KS) + f" | {cats} | "
              f"{counts['overall']} | {1000 * secs / max(counts['overall'], 1):.1f} |")
    print("| LoCoMo baseline: DRAGON over turns (paper) | " + " | ".join(f"{BASELINE[k]}" for k in KS)
          + " | " + " | ".join("-" for _ in CATEGORIES) + " | - | - |")


if __name__ == "__main__":
    main()
