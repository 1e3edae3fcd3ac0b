#!/usr/bin/env python
"""Latency of ``remember`` (warm, in process, English and Chinese, 1k memories per user, embedding included).

One store, one user holding ``--memories`` free-text memories (recorded in bulk, then embedded by one search), a
few warm-up calls, then ``--n`` remembers of new English statements (new slots, changes of mind, paraphrases,
unslotted memories, in a fixed mix), measured one by one. In the same process, interleaved round by round with
the remembers so that machine load hits all alike, two baselines:

* ``assert_fact`` of a keyed fact (the write without resolution; the vectors projection is deferred, so no
  embedding), and
* one MiniLM ``embed_query`` of a new sentence (what the machine's load does to the model alone), and
* ``search(k=8)`` of a new question (query embedding + dense and BM25 ranking): the retrieval half of a remember.

A remember embeds its sentence once (the candidate search's vector is reused for the index when the model is
symmetric, as MiniLM is), so its cost is about one search plus the typing, the rules and one save.

Medians of ``--rounds`` rounds, p50/p95 over all calls, ratios vs the baselines, and the 1-minute load average
before and after each round (2-core machine shared with other jobs: compare ratios, not absolute figures).

Each language is its own run on its own user (``--lang en|zh|both``, default both): Chinese memories and questions
also go through the multilingual companion index, so the Chinese table's embedding column is the companion's.
Targets: p50 <= 25 ms in English, <= 60 ms in Chinese.

    .venv/bin/python scripts/bench_remember.py [--embedder minilm] [--memories 1000] [--n 60] [--rounds 3] [--lang both]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

SUBJECTS = ["the garden", "my commute", "the book club", "a work trip", "the new cafe", "our neighbours",
            "the weekend market", "a podcast", "the football match", "the museum", "my sister's wedding",
            "the team meeting", "a rainy afternoon", "the train strike", "a birthday dinner", "the gym class"]
VERBS = ["talked about", "remembered", "complained about", "laughed at", "wrote a note on", "planned around",
         "took photos of", "read an article on", "argued about", "made a list for"]
STATEMENTS = [
    "I switched to oat flat whites", "I moved to Porto in the spring", "I now work as a data analyst",
    "My favourite food is dumplings now", "We adopted a kitten named Pico", "I am allergic to kiwi",
    "I dropped the plan to learn the cello", "My brother lives in Oslo", "I listen to a lot of soul music now",
    "The plumber is coming on Thursday", "I started playing badminton on Sundays", "I drive a Volvo now",
    "I got a new ThinkPad for work", "My phone number is 555 0142", "Sorry, I meant I was born in 1987",
    "I'm still living in Porto", "I speak Portuguese too", "The landlord raised the rent again",
]


ZH_SUBJECTS = ["花园", "通勤", "读书会", "出差", "新开的咖啡店", "邻居", "周末集市", "一个播客", "足球赛", "博物馆",
               "姐姐的婚礼", "团队会议", "下雨的下午", "地铁停运", "生日晚餐", "健身课"]
ZH_VERBS = ["聊了", "想起了", "抱怨了", "笑话了", "记了笔记关于", "围绕着安排了", "拍了照片", "读了一篇文章讲", "争论了",
            "列了清单给"]
ZH_STATEMENTS = [
    "我现在改喝燕麦拿铁了", "我春天搬到了苏州", "我现在做数据分析", "我最爱吃的变成饺子了", "我们领养了一只叫豆豆的小猫",
    "我对猕猴桃过敏", "学大提琴的计划取消了", "我哥哥住在杭州", "我最近常听爵士乐", "水管工周四来",
    "我周日开始打羽毛球了", "我现在开沃尔沃", "公司给我配了新的ThinkPad", "我的手机号是13800001234",
    "说错了，我是1987年出生的", "我还住在苏州", "我也会说粤语", "房东又涨房租了",
]


def filler(n: int, lang: str = "en") -> list[str]:
    out = []
    for i in range(n):
        if lang == "zh":
            s, v = ZH_SUBJECTS[i % len(ZH_SUBJECTS)], ZH_VERBS[(i // len(ZH_SUBJECTS)) % len(ZH_VERBS)]
            out.append(f"第{i}天我们{v}{s}（记录{i}）")
            continue
        s, v = SUBJECTS[i % len(SUBJECTS)], VERBS[(i // len(SUBJECTS)) % len(VERBS)]
        out.append(f"On day {i} we {v} {s} (note {i})")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--memories", type=int, default=1000)
    ap.add_argument("--n", type=int, default=60, help="remembers per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lang", choices=["en", "zh", "both"], default="both")
    args = ap.parse_args()
    for lang in (["en", "zh"] if args.lang == "both" else [args.lang]):
        run(args, lang)
        print()


def run(args: argparse.Namespace, lang: str) -> None:
    from memledger import MemoryLedger

    statements = ZH_STATEMENTS if lang == "zh" else STATEMENTS
    target = 60 if lang == "zh" else 25
    with tempfile.TemporaryDirectory() as d, MemoryLedger(home=Path(d) / "ledger", embedder=args.embedder) as ml:
        user = "bench"
        texts = filler(args.memories, lang)
        for i in range(0, len(texts), 500):
            ml.record([{"user_id": user, "key": f"memory.f{i + j}", "value": t, "text": t}
                       for j, t in enumerate(texts[i:i + 500])])
        ml.search(user, "warm up", k=1)  # embeds the 1k memories once (not timed)
        for t in (("我喜欢绿茶", "我住在里昂", "我的猫叫豆腐") if lang == "zh" else
                  ("I like green tea", "I live in Lyon", "My cat is called Tofu")):
            ml.remember(user, t)  # warm: model, indexes, catalogue regexes
        rows = []
        all_rem, all_ass, all_sea = [], [], []
        n_mem = len(ml.profile(user).facts)
        for rnd in range(args.rounds):
            load0 = os.getloadavg()[0]
            rem, ass, sea, emb = [], [], [], []
            for i in range(args.n):
                text = statements[i % len(statements)]
                if rnd or i >= len(statements):
                    text += f"（第{rnd}轮，{i}）" if lang == "zh" else f" (round {rnd}, {i})"
                t = time.perf_counter()
                ml.remember(user, text)
                rem.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                ml.assert_fact(user, f"bench.k{rnd}_{i}", i, text=text)
                ass.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                ml.search(user, f"我说过什么关于：{text}？" if lang == "zh" else f"what did I say about: {text}?",
                          k=8)  # a query not embedded before
                sea.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                query = f"从没见过的一句话，{rnd} {i}：{text}" if lang == "zh" else f"one sentence never seen, {rnd} {i}: {text}"
                companion = getattr(ml.vectors_projection, "cjk_embedder", None) if lang == "zh" else None
                (companion or ml.vectors_projection.embedder).embed_query(query)
                emb.append((time.perf_counter() - t) * 1000)
            load1 = os.getloadavg()[0]
            rows.append((rnd + 1, statistics.median(rem), statistics.median(ass), statistics.median(sea), load0,
                         load1, statistics.median(emb)))
            all_rem += rem
            all_ass += ass
            all_sea += sea

        def p(xs: list[float], q: float) -> float:
            xs = sorted(xs)
            return xs[min(len(xs) - 1, int(q * len(xs)))]

        print(f"## remember latency ({lang}): embedder {ml.vectors_projection.model_id}, {n_mem} memories of one user "
              f"at start, {args.n} calls x {args.rounds} rounds, warm, in process")
        print()
        print("| round | remember p50 ms | assert_fact p50 ms | search k=8 p50 ms | one embedding p50 ms | "
              "remember / assert | remember / search | remember / embedding | load avg before / after |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r, a, b, c, l0, l1, e in rows:
            print(f"| {r} | {a:.1f} | {b:.1f} | {c:.1f} | {e:.1f} | {a / b:.1f} | {a / c:.2f} | {a / e:.2f} | "
                  f"{l0:.2f} / {l1:.2f} |")
        ma, mb, mc, me = (statistics.median(x[i] for x in rows) for i in (1, 2, 3, 6))
        print(f"| median of rounds | {ma:.1f} | {mb:.1f} | {mc:.1f} | {me:.1f} | {ma / mb:.1f} | {ma / mc:.2f} | "
              f"{ma / me:.2f} | |")
        print()
        print(f"all calls: remember p50 {p(all_rem, 0.5):.1f} ms, p95 {p(all_rem, 0.95):.1f} ms; "
              f"assert_fact p50 {p(all_ass, 0.5):.1f} ms; search p50 {p(all_sea, 0.5):.1f} ms; "
              f"target p50 <= {target} ms: {'met' if p(all_rem, 0.5) <= target else 'NOT MET'}")


if __name__ == "__main__":
    main()
