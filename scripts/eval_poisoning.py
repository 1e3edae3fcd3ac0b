"""Memory-poisoning screen, measured: ``ledger.injection.screen`` on a labelled set, and its false alarms on real
users' own words.

Usage: python scripts/eval_poisoning.py [--data tests/data/poisoning_dev.jsonl] [--verbose]

The set (tests/data/README.md): one JSON object per line, ``{"id", "lang", "path", "text", "label", "kind"}``;
``path`` is fact | user_message (the user's own words) or tool_message | import | summary | card (other sources);
``label`` injection | benign. A text counts as caught when :func:`ledger.injection.screen` returns a kind for it with
``from_user`` true on the user's own paths. Beside the set, every user turn of the shipped LoCoMo sample and of the
MemoryBank histories (EN and ZH) is screened as the user's own words: each flag there is a false alarm on a real
statement; the MemoryBank assistant replies are screened as another source's text (a stress row: an assistant's
recommendations read much like instructions).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from ledger.injection import screen  # noqa: E402

USER_PATHS = {"fact", "user_message"}
# the real data beside the checkout (../shared/data), or where this machine keeps it
SHARED = next((p for p in (os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"), "/work/shared/data")
               if os.path.isdir(p)), "/work/shared/data")


def corpus() -> dict[str, list[str]]:
    """Real words from ../shared/data: LoCoMo turns and MemoryBank user turns (the user's own), MemoryBank replies."""
    out: dict[str, list[str]] = {"locomo turns (user)": [], "memorybank en user turns": [],
                                 "memorybank zh user turns": [], "memorybank replies (other source)": []}
    turns = os.path.join(SHARED, "locomo", "locomo_sample_turns.jsonl")
    if os.path.exists(turns):
        with open(turns, encoding="utf-8") as f:
            out["locomo turns (user)"] = [json.loads(line)["text"] for line in f if line.strip()]
    for lang in ("en", "cn"):
        path = os.path.join(SHARED, "memorybank", f"memory_bank_{lang}.json")
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        for user in data.values():
            for day in user.get("history", {}).values():
                for turn in day:
                    out[f"memorybank {'zh' if lang == 'cn' else 'en'} user turns"].append(turn.get("query") or "")
                    out["memorybank replies (other source)"].append(turn.get("response") or "")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data",
                                                   "poisoning_dev.jsonl"))
    ap.add_argument("--verbose", action="store_true", help="list every miss and false alarm")
    args = ap.parse_args()
    with open(args.data, encoding="utf-8") as f:
        cases = [json.loads(line) for line in f if line.strip()]
    n, ok = Counter(), Counter()
    misses = []
    for c in cases:
        from_user = c["path"] in USER_PATHS
        got = screen(c["text"], from_user=from_user)
        hit = (got is not None) == (c["label"] == "injection")
        for group in (f"{c['label']}", f"{c['label']}:{c['kind']}", f"{c['label']}@{c['path']}",
                      f"{c['label']}/{c['lang']}", f"{c['label']}:{'user' if from_user else 'other'}"):
            n[group] += 1
            ok[group] += hit
        if not hit:
            misses.append((c["id"], c["label"], c["kind"], c["path"], got, c["text"]))
    print(f"set: {os.path.basename(args.data)}, {len(cases)} texts")
    print(f"{'group':34} {'right':>9}")
    for group in sorted(n):
        print(f"{group:34} {ok[group]:>4}/{n[group]:<4}")
    caught = ok["injection"]
    benign_user = n["benign:user"] - ok["benign:user"]
    print(f"injections caught {caught}/{n['injection']} ({caught / max(1, n['injection']):.0%}); false alarms on the "
          f"user's own statements {benign_user}/{n['benign:user']} ({benign_user / max(1, n['benign:user']):.1%}); "
          f"on other sources' benign texts {n['benign:other'] - ok['benign:other']}/{n['benign:other']}")
    for name, texts in corpus().items():
        from_user = "other source" not in name
        flagged = [(t, screen(t, from_user=from_user)) for t in texts if t]
        flagged = [(t, k) for t, k in flagged if k is not None]
        print(f"real words, {name}: {len(flagged)}/{len(texts)} flagged ({len(flagged) / max(1, len(texts)):.2%})")
        if args.verbose:
            for t, k in flagged[:20]:
                print(f"    [{k}] {t[:140]!r}")
    if args.verbose:
        print("misses and false alarms:")
        for m in misses:
            print(f"  {m[0]} {m[1]}:{m[2]} @{m[3]} got={m[4]} {m[5][:120]!r}")


if __name__ == "__main__":
    main()
