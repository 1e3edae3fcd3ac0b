#!/usr/bin/env python
"""LoCoMo retrieval evaluation: recall@k of the evidence turns, per question category, beside the published baseline.

Protocol (issue 4): one fresh ledger per conversation; every observation ingested as a fact exactly as
``memledger ingest`` does (memledger/ingest.py: user = speaker, ``source_ref`` = the evidence turn id(s) the
observation cites); for every QA item, ``MemoryLedger.search`` with the question; recall@k = the fraction of the
item's evidence turn ids found among the ``source_ref`` of the top k hits, averaged per category.

Whose memory is searched: the question names the speaker(s) it is about ("When did Caroline go to ..."); when it
names one, that speaker's memory is searched with the name replaced by "they" (every memory of that user is about
them, so the name only adds noise to both rankings: measured +3.9 / +4.0 / +3.2 points at k = 5 / 10 / 25, BM25
unstemmed); when it names neither or both, both speakers are searched with the question as asked and their hits
merged by score.
``--both`` adds a row searching both speakers always, with the question as asked.

Categories in the file: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial (reported: 1-4 and
their overall, as the LoCoMo paper does). Baseline: Maharana et al., "Evaluating Very Long-Term Conversational
Memory of LLM Agents" (ACL 2024), Table 3, DRAGON retriever over observations: 56.2 / 61.3 / 67.5 at k = 5 / 10 / 25.

Measured on ../shared/data/locomo/locomo_sample.json (conv-26 and conv-30, 231 questions), default offline
set-up (MiniLM + BM25, RRF): 58.3 / 62.6 / 68.7 overall; conv-26 56.4 / 60.8 / 67.0, conv-30 61.7 / 65.8 / 71.8.
With the BM25 tokens unstemmed (lexical tokenizer v1) it was 56.4 / 61.3 / 68.0. Ablations: docs/retrieval.md,
"LoCoMo".

Usage: python scripts/eval_locomo.py DATA.json [--embedder minilm] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from memledger import MemoryLedger  # noqa: E402
from memledger.ingest import locomo_commands  # noqa: E402

KS = (5, 10, 25)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
BASELINE = {5: 56.2, 10: 61.3, 25: 67.5}  # DRAGON over observations, LoCoMo paper Table 3 (overall)


def turn_ids(text: str) -> set[str]:
    """Evidence / source_ref strings -> turn ids ("D1:3"); LoCoMo sometimes packs several in one string."""
    return set(re.findall(r"D\d+:\d+", text or ""))


def speakers_named(question: str, speakers: list[str]) -> list[str]:
    named = [s for s in speakers if re.search(rf"\b{re.escape(s)}\b", question, re.IGNORECASE)]
    return named if len(named) == 1 else speakers


def routed_query(question: str, users: list[str]) -> str:
    """The question for one routed speaker's memory: the speaker's name (and 's) replaced by "they"."""
    if len(users) != 1:
        return question
    return re.sub(rf"\b{re.escape(users[0])}('s)?\b", "they", question, flags=re.IGNORECASE)


def retrieve(ml: MemoryLedger, users: list[str], question: str, k: int) -> list[set[str]]:
    hits = []
    for u in users:
        hits.extend(ml.search(u, question, k=k))
    hits.sort(key=lambda h: -h.score)
    return [turn_ids(h.source_ref or "") for h in hits[:k]]


def recall(evidence: set[str], refs: list[set[str]]) -> float:
    found = set().union(*refs) if refs else set()
    return len(evidence & found) / len(evidence)


def evaluate(data: list[dict], embedder: str, both: bool = False, resolve: bool = False) -> tuple[dict, dict, dict]:
    scores: dict[tuple[str, int, int], list[float]] = {}
    info = {"conversations": 0, "observations": 0, "questions": 0, "ingest_s": 0.0, "search_ms": [],
            "decisions": {}}
    for conv in data:
        speakers = [conv["conversation"]["speaker_a"], conv["conversation"]["speaker_b"]]
        commands = locomo_commands([conv], resolve=resolve)
        with tempfile.TemporaryDirectory() as home, MemoryLedger(home=home, embedder=embedder) as ml:
            t0 = time.perf_counter()
            if resolve:  # issue 13: every observation through remember (slot resolution), as `ingest --resolve`
                for line in commands:
                    d = ml.remember(line.user_id, line.text, **line.fields).decision
                    info["decisions"][d] = info["decisions"].get(d, 0) + 1
            for i in range(0, len(commands) if not resolve else 0, 500):
                ml.record(commands[i:i + 500])
            info["ingest_s"] += time.perf_counter() - t0
            info["conversations"] += 1
            info["observations"] += len(commands)
            for qa in conv["qa"]:
                cat = qa.get("category")
                evidence = set().union(*(turn_ids(e) for e in qa.get("evidence", []))) if qa.get("evidence") else set()
                if cat not in CATEGORIES or not evidence:
                    continue
                info["questions"] += 1
                named = speakers_named(qa["question"], speakers)
                modes = [("routed", named, routed_query(qa["question"], named))]
                if both:
                    modes.append(("both", speakers, qa["question"]))
                for mode, users, question in modes:
                    for k in KS:
                        t1 = time.perf_counter()
                        refs = retrieve(ml, users, question, k)
                        if mode == "routed":
                            info["search_ms"].append((time.perf_counter() - t1) * 1000)
                        scores.setdefault((mode, cat, k), []).append(recall(evidence, refs))
    table: dict = {}
    for mode in ("routed", "both"):
        for cat in CATEGORIES:
            table[(mode, cat)] = {k: 100 * sum(v) / len(v) for k in KS if (v := scores.get((mode, cat, k)))}
        if scores.get((mode, 4, 5)):
            table[(mode, "overall")] = {
                k: 100 * sum(sum(scores.get((mode, c, k), [])) for c in CATEGORIES)
                / sum(len(scores.get((mode, c, k), [])) for c in CATEGORIES) for k in KS}
    counts = {cat: len(scores.get(("routed", cat, 5), [])) for cat in CATEGORIES}
    return table, counts, info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", type=Path, help="a LoCoMo JSON file (a list of conversations)")
    ap.add_argument("--embedder", default="minilm", help="embedder spec (default minilm: the offline default)")
    ap.add_argument("--json", type=Path, help="also write the numbers here")
    ap.add_argument("--both", action="store_true", help="also search both speakers always (a second pass)")
    ap.add_argument("--resolve", action="store_true", help="ingest through remember (slot resolution, issue 13): "
                    "a superseded or retired observation is no longer current, so it can no longer be retrieved")
    args = ap.parse_args()
    data = json.loads(args.data.read_text(encoding="utf-8"))
    data = data if isinstance(data, list) else [data]
    table, counts, info = evaluate(data, args.embedder, args.both, args.resolve)
    med = sorted(info["search_ms"])[len(info["search_ms"]) // 2]
    print(f"LoCoMo retrieval, {args.data.name}: {info['conversations']} conversations, {info['observations']} "
          f"observations, {info['questions']} questions (categories 1-4 with evidence); embedder {args.embedder} "
          f"+ BM25, RRF. Ingest {info['ingest_s']:.1f} s; search median {med:.1f} ms (query embedding included).")
    if args.resolve:
        print(f"Ingested through remember (--resolve): decisions {dict(sorted(info['decisions'].items()))}.")
    print()
    print("| category | n | R@5 | R@10 | R@25 |")
    print("|---|---|---|---|---|")
    for cat, name in CATEGORIES.items():
        r = table[("routed", cat)]
        print(f"| {cat} {name} | {counts[cat]} | " + " | ".join(f"{r[k]:.1f}" for k in KS) + " |")
    r = table[("routed", "overall")]
    print(f"| **overall (1-4)** | {sum(counts.values())} | " + " | ".join(f"**{r[k]:.1f}**" for k in KS) + " |")
    r2 = table.get(("both", "overall"))
    if r2:
        print(f"| overall, both speakers always, question as asked | {sum(counts.values())} | "
              + " | ".join(f"{r2[k]:.1f}" for k in KS) + " |")
    print("| LoCoMo baseline: DRAGON over observations (paper) | — | "
          + " | ".join(f"{BASELINE[k]:.1f}" for k in KS) + " |")
    print("| ratio overall / baseline | — | " + " | ".join(f"{r[k] / BASELINE[k]:.2f}" for k in KS) + " |")
    if args.json:
        args.json.write_text(json.dumps({"routed": {str(c): table[("routed", c)] for c in [*CATEGORIES, "overall"]},
                                         "both_overall": r2, "counts": counts, "baseline": BASELINE,
                                         "info": {k: v for k, v in info.items() if k != "search_ms"}}, indent=2))


if __name__ == "__main__":
    main()
