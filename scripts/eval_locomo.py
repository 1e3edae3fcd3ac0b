#!/usr/bin/env python
"""LoCoMo retrieval evaluation: recall@k of the evidence turns, per question category, beside same-run plain cosine.

Protocol (the one an agent uses): one fresh ledger per conversation; every observation ingested as a fact exactly
as ``memledger ingest`` does (memledger/ingest.py: user = speaker, ``source_ref`` = the evidence turn id(s) the
observation cites); for every QA item, ONE ``MemoryLedger.search(speaker_a, question, k, also=[speaker_b])`` with
the question as asked (no name rewriting, no routing): both speakers' memories, hits merged by the returned
``score`` (absolute: projections/retrieval/relevance.py). recall@k = the fraction of the item's evidence turn ids found among
the ``source_ref`` of the top k hits, averaged over the questions of categories 1-4.

Beside it, in the same run: **plain cosine** — the same observations of both speakers ranked by the cosine of the
ledger's own embedder (MiniLM by default; vectors through the same embedding cache) and nothing else. ``--routed``
adds the previous protocol (the speaker named in the question searched alone, the name replaced by "they").

Categories in the file: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial (reported: 1-4 and
their overall, as the LoCoMo paper does). Published baseline: Maharana et al., "Evaluating Very Long-Term
Conversational Memory of LLM Agents" (ACL 2024), Table 3, DRAGON over observations: 56.2 / 61.3 / 67.5 at k = 5 /
10 / 25 (another retriever, another protocol: for orientation only).

Figures (MiniLM + BM25, absolute relevance; docs/retrieval.md has the table and the ablations):

* dev, tuned on: ../shared/data/locomo/locomo_sample.json (conv-26, conv-30, 231 questions).
* held out, never tuned on: the other eight conversations of LoCoMo's locomo10.json (1,682 questions); not shipped
  (CC BY-NC): pass the file.

Usage: python scripts/eval_locomo.py DATA.json [--embedder minilm] [--routed] [--resolve] [--expand N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
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


def retrieve(ml: MemoryLedger, users: list[str], question: str, k: int, expand: int = 0) -> list[set[str]]:
    """The protocol: one search of the first user with ``also`` = the others, merged by score by the ledger
    (``expand``: following each user's relations that many hops, memledger/expansion.py)."""
    hits = ml.search(users[0], question, k=k, also=users[1:], expand=expand)
    # every source a hit stands for: its own turn and those of the observations that said it again (reaffirmed)
    return [turn_ids(",".join(h.source_refs) or h.source_ref or "") for h in hits[:k]]


def retrieve_routed(ml: MemoryLedger, users: list[str], question: str, k: int) -> list[set[str]]:
    """The earlier protocol (``--routed``): each user searched alone, hits merged by score."""
    hits = []
    for u in users:
        hits.extend(ml.search(u, question, k=k))
    hits.sort(key=lambda h: -h.score)
    return [turn_ids(",".join(h.source_refs) or h.source_ref or "") for h in hits[:k]]


class PlainCosine:
    """Same-run baseline: the observations of the conversation ranked by the ledger embedder's cosine alone."""

    def __init__(self, ml: MemoryLedger, commands: list) -> None:
        import numpy as np

        proj = ml.vectors_projection
        # a fact command carries source_ref itself; a remember line (--resolve) in its fields
        self.refs = [turn_ids(getattr(c, "source_ref", None) or getattr(c, "fields", {}).get("source_ref") or "")
                     for c in commands]
        texts = [c.text for c in commands]
        self.matrix = np.asarray(proj.embed_texts(texts), dtype=np.float32)
        self.proj = proj

    def retrieve(self, question: str, k: int) -> list[set[str]]:
        import numpy as np

        sims = self.matrix @ np.asarray(self.proj.embed_query(question), dtype=np.float32)
        return [self.refs[i] for i in np.argsort(-sims, kind="stable")[:k]]


def recall(evidence: set[str], refs: list[set[str]]) -> float:
    found = set().union(*refs) if refs else set()
    return len(evidence & found) / len(evidence)


MODES = ("ledger", "cosine", "routed", "expand")


def evaluate(data: list[dict], embedder: str, routed: bool = False, resolve: bool = False,
             expand: int = 0) -> tuple[dict, dict, dict]:
    scores: dict[tuple[str, int, int], list[float]] = {}
    info = {"conversations": 0, "observations": 0, "questions": 0, "ingest_s": 0.0, "search_ms": [],
            "decisions": {}, "entities": 0}
    for conv in data:
        speakers = [conv["conversation"]["speaker_a"], conv["conversation"]["speaker_b"]]
        commands = locomo_commands([conv], resolve=resolve)
        with tempfile.TemporaryDirectory() as home, MemoryLedger(home=home, embedder=embedder) as ml:
            t0 = time.perf_counter()
            if resolve:  # every observation through remember (slot resolution), as `ingest --resolve`
                for line in commands:
                    d = ml.remember(line.user_id, line.text, **line.fields).decision
                    info["decisions"][d] = info["decisions"].get(d, 0) + 1
            for i in range(0, len(commands) if not resolve else 0, 500):
                ml.record(commands[i:i + 500])
            ml.catch_up()
            info["ingest_s"] += time.perf_counter() - t0
            info["entities"] += sum(len(ml.entities(u).entities) for u in speakers)
            info["conversations"] += 1
            info["observations"] += len(commands)
            cosine = PlainCosine(ml, [c for c in commands if getattr(c, "text", None)])
            for qa in conv["qa"]:
                cat = qa.get("category")
                evidence = set().union(*(turn_ids(e) for e in qa.get("evidence", []))) if qa.get("evidence") else set()
                if cat not in CATEGORIES or not evidence:
                    continue
                info["questions"] += 1
                q = qa["question"]
                for k in KS:
                    t1 = time.perf_counter()
                    refs = retrieve(ml, speakers, q, k)
                    info["search_ms"].append((time.perf_counter() - t1) * 1000)
                    scores.setdefault(("ledger", cat, k), []).append(recall(evidence, refs))
                    scores.setdefault(("cosine", cat, k), []).append(recall(evidence, cosine.retrieve(q, k)))
                    if expand:
                        refs = retrieve(ml, speakers, q, k, expand)
                        scores.setdefault(("expand", cat, k), []).append(recall(evidence, refs))
                    if routed:
                        named = speakers_named(q, speakers)
                        refs = retrieve_routed(ml, named, routed_query(q, named), k)
                        scores.setdefault(("routed", cat, k), []).append(recall(evidence, refs))
    table: dict = {}
    for mode in MODES:
        for cat in CATEGORIES:
            table[(mode, cat)] = {k: 100 * sum(v) / len(v) for k in KS if (v := scores.get((mode, cat, k)))}
        if scores.get((mode, 4, 5)):
            table[(mode, "overall")] = {
                k: 100 * sum(sum(scores.get((mode, c, k), [])) for c in CATEGORIES)
                / sum(len(scores.get((mode, c, k), [])) for c in CATEGORIES) for k in KS}
    counts = {cat: len(scores.get(("ledger", cat, 5), [])) for cat in CATEGORIES}
    return table, counts, info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", type=Path, help="a LoCoMo JSON file (a list of conversations)")
    ap.add_argument("--embedder", default="minilm", help="embedder spec (default minilm: the offline default)")
    ap.add_argument("--json", type=Path, help="also write the numbers here")
    ap.add_argument("--routed", action="store_true", help="also run the earlier protocol (the named speaker alone, "
                    "the name replaced by 'they')")
    ap.add_argument("--resolve", action="store_true", help="ingest through remember (slot resolution): "
                    "a superseded or retired observation is no longer current, so it can no longer be retrieved")
    ap.add_argument("--expand", type=int, default=0, help="also search following the relations N hops (1-3), "
                    "printed per category beside the plain search of the same run")
    args = ap.parse_args()
    data = json.loads(args.data.read_text(encoding="utf-8"))
    data = data if isinstance(data, list) else [data]
    table, counts, info = evaluate(data, args.embedder, args.routed, args.resolve, args.expand)
    med = sorted(info["search_ms"])[len(info["search_ms"]) // 2]
    ids = ", ".join(str(c.get("sample_id", "?")) for c in data)
    print(f"LoCoMo retrieval, {args.data.name} ({ids}): {info['observations']} observations, {info['questions']} "
          f"questions (categories 1-4 with evidence); embedder {args.embedder} + BM25, absolute relevance; both "
          f"speakers in one search (also=), question as asked. Ingest {info['ingest_s']:.1f} s; search median "
          f"{med:.1f} ms (two users, query embedding included). Load average {os.getloadavg()[0]:.2f}.")
    if args.resolve:
        print(f"Ingested through remember (--resolve): decisions {dict(sorted(info['decisions'].items()))}.")
    print()
    print("| category | n | R@5 | R@10 | R@25 | cosine R@5 | R@10 | R@25 |")
    print("|---|---|---|---|---|---|---|---|")
    for cat, name in CATEGORIES.items():
        r, c = table[("ledger", cat)], table[("cosine", cat)]
        print(f"| {cat} {name} | {counts[cat]} | " + " | ".join(f"{r[k]:.1f}" for k in KS) + " | "
              + " | ".join(f"{c[k]:.1f}" for k in KS) + " |")
    r, c = table[("ledger", "overall")], table[("cosine", "overall")]
    print(f"| **overall (1-4)** | {sum(counts.values())} | " + " | ".join(f"**{r[k]:.1f}**" for k in KS) + " | "
          + " | ".join(f"{c[k]:.1f}" for k in KS) + " |")
    print("| difference, memledger - plain cosine | | " + " | ".join(f"{r[k] - c[k]:+.1f}" for k in KS) + " | | | |")
    r2 = table.get(("routed", "overall"))
    if r2:
        print(f"| overall, earlier protocol (--routed) | {sum(counts.values())} | "
              + " | ".join(f"{r2[k]:.1f}" for k in KS) + " | | | |")
    print("| LoCoMo paper: DRAGON over observations | | " + " | ".join(f"{BASELINE[k]:.1f}" for k in KS) + " | | | |")
    if args.expand:
        print(f"\nWith expand={args.expand} (entities linked at ingest: {info['entities']}), same run:\n")
        print("| category | n | R@5 | R@10 | R@25 | R@10 without | R@10 difference |")
        print("|---|---|---|---|---|---|---|")
        for cat, name in [*CATEGORIES.items(), ("overall", "(1-4)")]:
            e, r = table[("expand", cat)], table[("ledger", cat)]
            n = counts[cat] if cat in counts else sum(counts.values())
            print(f"| {cat} {name} | {n} | " + " | ".join(f"{e[k]:.1f}" for k in KS)
                  + f" | {r[10]:.1f} | {e[10] - r[10]:+.1f} |")
    if args.json:
        args.json.write_text(json.dumps({m: {str(cat): table[(m, cat)] for cat in [*CATEGORIES, "overall"]
                                             if (m, cat) in table} for m in MODES} | {
            "counts": counts, "baseline": BASELINE, "info": {k: v for k, v in info.items() if k != "search_ms"}},
            indent=2))


if __name__ == "__main__":
    main()
