"""A Chinese question finds an English memory (projections/retrieval/cross_language.py): the companion's vectors of
a user's memories without CJK text, made at the user's first CJK query, kept in the embedding cache (a reload does
not run the model again), dropped with the text they were made of. Fast: the fake multilingual embedder of
tests/test_cjk_companion.py; the real model is measured by scripts/eval_crosslang.py and the last test here.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from memledger import MemoryLedger
from tests.test_cjk_companion import ConceptEmbedder, fake, ml  # noqa: F401 (the companion's fixtures)

ROOT = Path(__file__).resolve().parents[1]
MEMORIES = [("memory.job", "I am looking for a new job"), ("memory.cat", "我家的猫叫咪咪"),
            ("memory.tea", "我每天早上喝茶"), ("memory.mountain", "We climbed a mountain in May")]


def record(ml: MemoryLedger, user: str = "u1", memories=MEMORIES) -> None:
    ml.record([{"user_id": user, "key": k, "value": t, "text": t} for k, t in memories])
    ml.catch_up()


def cross_docs(ml: MemoryLedger, user: str) -> list[str]:
    ml.catch_up()
    with ml.db.read() as cur:
        mem = ml.vectors_projection.refresh(cur)
    u = mem.users.get(user)
    return [] if u is None or u.cross is None else sorted(u.cross.doc_ids())


def test_a_chinese_question_finds_an_english_memory(ml: MemoryLedger, fake: ConceptEmbedder) -> None:
    record(ml)
    assert fake.passages == ["我家的猫叫咪咪", "我每天早上喝茶"]  # writing English memories never asks the companion
    hits = ml.search("u1", "我想跳槽吗", k=4)  # shares no word with "a new job": found by the companion's cosine
    top = hits[0]
    assert (top.key, top.parts.fusion, top.parts.dense_model) == ("memory.job", "cross_language", fake.model_id)
    assert top.parts.dense == pytest.approx(float(fake._vec("I am looking for a new job") @ fake._vec("我想跳槽吗")),
                                            abs=1e-3)
    assert top.parts.lexical is None and top.score > 0.5
    assert {h.parts.fusion for h in hits[1:]} == {"companion", "cross_language"}  # every memory judged by a model
    # the English memories were embedded by the companion once, at this first CJK query
    assert sorted(fake.passages[2:]) == ["I am looking for a new job", "We climbed a mountain in May"]
    assert cross_docs(ml, "u1") == ["fact:memory.job", "fact:memory.mountain"]
    assert ml.search("u1", "我们去爬山了吗", k=1)[0].key == "memory.mountain"
    assert len(fake.passages) == 4  # a second CJK query embeds nothing
    # the other direction is unchanged, and the English question is still judged by the main model
    assert ml.search("u1", "do I have a cat?", k=1)[0].key == "memory.cat"
    en = [h for h in ml.search("u1", "a new job", k=4) if h.key == "memory.job"][0]
    assert (en.parts.fusion, en.parts.dense_model) == ("absolute", ml.vectors_projection.model_id)


def test_remember_never_embeds_english_memories_with_the_companion(ml: MemoryLedger, fake: ConceptEmbedder) -> None:
    """``remember``'s candidate search is on the write path: a Chinese statement does not make companion vectors of
    the user's English memories (nor use those a search made), so its cost and its decision do not depend on
    earlier searches."""
    record(ml)
    ml.remember("u1", "我想换工作")
    ml.catch_up()
    assert "I am looking for a new job" not in fake.passages and cross_docs(ml, "u1") == []


def test_the_cross_language_path_can_be_turned_off(ml: MemoryLedger, fake: ConceptEmbedder) -> None:
    record(ml)
    ml.vectors_projection.cross_language = False
    hits = ml.search("u1", "我想跳槽吗", k=4)
    assert "memory.job" not in [h.key for h in hits if h.parts.dense is not None]
    assert fake.passages == ["我家的猫叫咪咪", "我每天早上喝茶"] and cross_docs(ml, "u1") == []


def test_an_english_only_user_asking_in_chinese(ml: MemoryLedger, fake: ConceptEmbedder) -> None:
    record(ml, "en", [("memory.job", "I am looking for a new job"), ("memory.tea", "I drink green tea")])
    top = ml.search("en", "我想跳槽吗", k=2)[0]
    assert (top.key, top.parts.fusion) == ("memory.job", "cross_language")
    assert ml.search("en", "我喝什么茶", k=1)[0].key == "memory.tea"


def test_vectors_are_kept_across_a_reload_and_follow_the_text(store_args: dict[str, Any]) -> None:
    first = ConceptEmbedder()
    with MemoryLedger(**store_args, embedder="hash", cjk_embedder=first) as ml:
        record(ml)
        ml.search("u1", "我想跳槽吗", k=1)
    again = ConceptEmbedder()
    with MemoryLedger(**store_args, embedder="hash", cjk_embedder=again) as ml:
        assert ml.search("u1", "我想跳槽吗", k=1)[0].key == "memory.job"
        if "home" in store_args:  # from the embedding cache under the home: the model is not run again
            assert again.passages == []
        else:  # a PostgreSQL store has no home: its embedding cache lives in the process
            assert sorted(again.passages) == ["I am looking for a new job", "We climbed a mountain in May"]
            again.passages.clear()
        # a new text drops the old companion vector; the next CJK query embeds the new one, once
        ml.assert_fact("u1", "memory.job", "x", text="I drink coffee at work")
        assert cross_docs(ml, "u1") == ["fact:memory.mountain"]
        top = ml.search("u1", "我喝咖啡吗", k=1)[0]
        assert (top.key, top.parts.fusion) == ("memory.job", "cross_language")
        assert again.passages == ["I drink coffee at work"]
        # forget: the companion vector of the forgotten text leaves the embedding cache with the others
        cache = ml.vectors_projection._embedding_cache()
        assert cache.get_many(again.model_id, ["I drink coffee at work"])
        ml.forget("u1", "memory.job")
        assert cache.get_many(again.model_id, ["I drink coffee at work"]) == {}
        assert "fact:memory.job" not in cross_docs(ml, "u1")
        assert "memory.job" not in [h.key for h in ml.search("u1", "我喝咖啡吗", k=4)]


def test_a_large_user_gets_the_rest_from_a_worker(ml: MemoryLedger, fake: ConceptEmbedder) -> None:
    record(ml)
    proj = ml.vectors_projection
    proj.cross_sync_docs = 1  # the query embeds the newest missing memory itself, a worker the others
    top = ml.search("u1", "我们去爬山了吗", k=1)[0]
    assert (top.key, top.parts.fusion) == ("memory.mountain", "cross_language")
    assert cross_docs(ml, "u1") == ["fact:memory.mountain"]
    proj.cross_wait(10)
    assert sorted(fake.passages[2:]) == ["I am looking for a new job", "We climbed a mountain in May"]
    assert ml.search("u1", "我想跳槽吗", k=1)[0].key == "memory.job"  # from the cache the worker filled
    assert cross_docs(ml, "u1") == ["fact:memory.job", "fact:memory.mountain"] and len(fake.passages) == 4


def test_over_the_cap_english_memories_are_judged_by_their_words(ml: MemoryLedger, fake: ConceptEmbedder) -> None:
    record(ml)
    ml.vectors_projection.cross_max_docs = 1  # two English memories: over the cap
    hits = ml.search("u1", "我想跳槽吗", k=4)
    assert all(h.parts.fusion == "companion" for h in hits) and cross_docs(ml, "u1") == []
    assert fake.passages == ["我家的猫叫咪咪", "我每天早上喝茶"]


def test_as_of_search_asks_the_companion_about_english_memories(ml: MemoryLedger) -> None:
    ml.assert_fact("u1", "memory.job", "x", text="I am looking for a new job")
    ml.assert_fact("u1", "memory.tea", "x", text="我每天早上喝茶")
    time.sleep(0.01)
    then = datetime.now(timezone.utc).isoformat()
    time.sleep(0.01)
    ml.assert_fact("u1", "memory.job", "x", text="I love my job")
    top = ml.search("u1", "我想跳槽吗", k=2, as_of=then)[0]
    assert (top.text, top.parts.fusion) == ("I am looking for a new job", "cross_language")


@pytest.mark.skipif(os.environ.get("MEMLEDGER_SKIP_MODELS") == "1", reason="loads the real models")
def test_real_models_a_chinese_question_finds_the_english_memory(tmp_path: Path) -> None:
    """multilingual-e5-small over tests/data/crosslang_pairs.jsonl's Chinese questions: the English answer in the top
    3 every time (scripts/eval_crosslang.py prints the whole table)."""
    cases = [json.loads(line) for line in (ROOT / "tests/data/crosslang_pairs.jsonl").read_text().splitlines()
             if line.strip()]
    cases = [c for c in cases if c["id"].startswith("zh-en")]
    assert len(cases) == 8
    with MemoryLedger(home=tmp_path / "l", embedder="minilm") as ml:
        for i, c in enumerate(cases):
            ml.record([{"user_id": f"u{i}", "key": f"memory.c{j}", "value": m, "text": m}
                       for j, m in enumerate(c["memories"])])
        found = 0
        for i, c in enumerate(cases):
            keys = [h.key for h in ml.search(f"u{i}", c["query"], k=3)]
            found += f"memory.c{c['answer_index']}" in keys
    assert found == 8
