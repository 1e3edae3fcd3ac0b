#!/usr/bin/env python
"""Cross-language retrieval: an English question about a Chinese memory, and a Chinese question about an English one
(tests/data/crosslang_pairs.jsonl, written by hand for this measure). Each case is a fresh user holding 6 memories in
both languages; one ``search(k=3)`` of the question; recall@1 and recall@3 of the answering memory, by direction,
with the cross-language path on (an English question also asks the multilingual companion about CJK memories, a
Chinese question about memories without CJK: projections/retrieval/cross_language.py) and
off (the main model alone), in the same process.

    .venv/bin/python scripts/eval_crosslang.py [--embedder minilm]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--data", default=str(ROOT / "tests" / "data" / "crosslang_pairs.jsonl"))
    args = ap.parse_args()
    from memledger import MemoryLedger

    cases = [json.loads(line) for line in Path(args.data).read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = {}
    with tempfile.TemporaryDirectory() as d, MemoryLedger(home=Path(d) / "l", embedder=args.embedder) as ml:
        for i, c in enumerate(cases):
            ml.record([{"user_id": f"u{i}", "key": f"memory.c{j}", "value": m, "text": m}
                       for j, m in enumerate(c["memories"])])
        proj = ml.vectors_projection
        for mode in (False, True):
            proj.cross_language = mode
            for i, c in enumerate(cases):
                direction = c["id"][:5]
                hits = [h.key for h in ml.search(f"u{i}", c["query"], k=3)]
                want = f"memory.c{c['answer_index']}"
                r = rows.setdefault((direction, mode), [0, 0, 0])
                r[0] += 1
                r[1] += hits[:1] == [want]
                r[2] += want in hits
    print(f"cross-language retrieval, {len(cases)} cases, embedder {ml.vectors_projection.model_id}, "
          f"companion {ml.vectors_projection.cjk_model_id}")
    print("| direction | cross-language path | n | recall@1 | recall@3 |")
    print("|---|---|---|---|---|")
    for (direction, mode), (n, r1, r3) in sorted(rows.items()):
        print(f"| {direction.replace('-', ' -> ')} | {'on' if mode else 'off'} | {n} | {r1}/{n} | {r3}/{n} |")


if __name__ == "__main__":
    main()
