"""Each vector is kept once: a live row of the ``vectors`` projection holds the vectors of current texts, the embedding
cache only those of texts that are not current (projections/retrieval/embedding_cache.py, projections/retrieval/embedding.py ``prepare``),
and still no replay, rebuild or switch back runs the model on a text it has embedded before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memledger import MemoryLedger
from projections.retrieval.embedding_cache import text_key
from tests.test_ingest_warm import RecordingEmbedder

MODEL = "hash:v2:64"


def cached(ml: MemoryLedger, model: str = MODEL) -> set[bytes]:
    """The text keys the embedding cache holds for ``model``."""
    import sqlite3

    path = Path(ml.vectors_projection._embedding_cache().path)
    if not path.exists():
        return set()  # the file is made by the first vector cached
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT text_key FROM embeddings WHERE model_id = ?", (model,)).fetchall()
    finally:
        conn.close()
    return {bytes(r[0]) for r in rows}


def live(ml: MemoryLedger) -> dict[str, bytes]:
    """``{text: vector bytes}`` of the serving copy's live rows: the row's own, or its user's pack's (as float16)."""
    p = ml.vectors_projection
    cols = ["user_id", "doc_id", "text", "vector", "cjk_vector"]
    with ml.db.read() as cur:
        cur.execute(f"SELECT {', '.join(cols)} FROM {p.table('docs')} WHERE live = 1")
        rows = p.with_packed(cur, cur.fetchall(), cols)
    return {r[2]: r[3].astype("<f2").tobytes() if isinstance(r[3], np.ndarray) else bytes(r[3]) for r in rows}


def keys(*texts: str) -> set[bytes]:
    return {text_key(t) for t in texts}


@pytest.fixture()
def ledger(tmp_path: Path) -> Any:
    emb = RecordingEmbedder()
    with MemoryLedger(home=tmp_path / "l", embedder=emb) as ml:
        yield ml, emb


def test_a_vector_moves_between_its_row_and_the_cache_and_the_model_runs_once_per_text(ledger: Any) -> None:
    ml, emb = ledger
    ml.assert_fact("u1", "preference.drink", "tea", text="likes tea")
    ml.assert_fact("u1", "preference.food", "ramen", text="eats ramen")
    ml.search("u1", "tea", k=1)
    assert set(live(ml)) == {"likes tea", "eats ramen"} and cached(ml) == set()
    assert not Path(ml.vectors_projection._embedding_cache().path).exists()  # nothing to cache: no file

    ml.correct_fact("u1", "preference.drink", "coffee", text="likes coffee")
    ml.retract_fact("u1", "preference.food")
    ml.search("u1", "coffee", k=1)
    assert set(live(ml)) == {"likes coffee"}
    assert cached(ml) == keys("likes tea", "eats ramen")  # they left their rows, so the cache keeps them

    # back to tea: its vector comes out of the cache (no model call) and the one it replaces goes in
    ml.correct_fact("u1", "preference.drink", "tea", text="likes tea")
    ml.search("u1", "tea", k=1)
    assert set(live(ml)) == {"likes tea"} and cached(ml) == keys("likes coffee", "eats ramen")
    assert sorted(emb.embedded) == ["eats ramen", "likes coffee", "likes tea"]


def test_a_text_current_only_inside_one_catch_up_goes_to_the_cache(ledger: Any) -> None:
    ml, emb = ledger
    ml.assert_fact("u1", "home.city", "Oslo", text="lives in Oslo")
    ml.correct_fact("u1", "home.city", "Bergen", text="lives in Bergen")
    ml.search("u1", "city", k=1)  # one catch-up applies both
    assert set(live(ml)) == {"lives in Bergen"} and cached(ml) == keys("lives in Oslo")
    assert sorted(emb.embedded) == ["lives in Bergen", "lives in Oslo"]


@pytest.mark.parametrize("blue_green", [True, False])
def test_rebuilds_run_no_model_and_leave_each_vector_once(ledger: Any, blue_green: bool) -> None:
    ml, emb = ledger
    for i in range(5):
        ml.assert_fact("u1", f"note.n{i}", i, text=f"note number {i}")
    ml.correct_fact("u1", "note.n0", 10, text="note number ten")
    ml.search("u1", "note", k=1)
    rows, in_cache, calls = live(ml), cached(ml), list(emb.embedded)
    assert in_cache == keys("note number 0")

    ml.rebuild(["vectors"], blue_green=blue_green)
    assert emb.embedded == calls  # vectors lent by the old rows (blue/green) or spilled and taken back (in place)
    assert cached(ml) == in_cache
    after = live(ml)
    assert set(after) == set(rows)
    for text, vec in rows.items():
        assert np.array_equal(np.frombuffer(after[text], "<f4"), np.frombuffer(vec, "<f4"))
    assert all(r.ok for r in ml.verify())


def test_verify_embeds_the_current_texts_afresh_and_leaves_the_cache_alone(ledger: Any) -> None:
    ml, emb = ledger
    ml.assert_fact("u1", "preference.drink", "tea", text="likes tea")
    ml.correct_fact("u1", "preference.drink", "coffee", text="likes coffee")
    ml.search("u1", "coffee", k=1)
    before = cached(ml)
    emb.embedded.clear()
    assert all(r.ok for r in ml.verify())
    # the scratch replay checks the row's vector against the model, not against the row itself; the superseded
    # text comes from the cache
    assert emb.embedded == ["likes coffee"]
    assert cached(ml) == before == keys("likes tea")


def test_a_model_switch_keeps_the_old_models_vectors_for_a_switch_back(ledger: Any) -> None:
    ml, emb = ledger
    ml.assert_fact("u1", "preference.drink", "tea", text="likes tea")
    ml.search("u1", "tea", k=1)
    assert cached(ml) == set()
    ml.rebuild(["vectors"], blue_green=True, embedder="hash:32")
    assert cached(ml) == keys("likes tea")  # the dropped copy's vectors of the old model
    assert cached(ml, "hash:v2:32") == set()  # the new copy's rows hold the new model's


def test_as_of_search_reads_live_vectors_from_the_rows(ledger: Any) -> None:
    ml, emb = ledger
    ml.assert_fact("u1", "preference.drink", "tea", text="likes tea")
    ml.search("u1", "tea", k=1)
    emb.embedded.clear()
    hits = ml.search("u1", "tea", k=1, as_of="2999-01-01T00:00:00+00:00")
    assert [h.key for h in hits] == ["preference.drink"]
    assert emb.embedded == [] and cached(ml) == set()


def test_ingest_run_again_embeds_nothing(tmp_path: Path) -> None:
    from tests.test_ingest_warm import SAMPLE, observations

    emb = RecordingEmbedder()
    with MemoryLedger(home=tmp_path / "l", embedder=emb) as ml:
        ml.ingest(SAMPLE)
        ml.search("Jon", "dance", k=1)
        assert cached(ml) == set() and set(live(ml)) == observations()
        n = len(emb.embedded)
        ml.ingest(SAMPLE)
        ml.search("Jon", "dance", k=1)
        assert len(emb.embedded) == n and cached(ml) == set()


def test_vectors_are_stored_as_float16_and_float32_rows_of_older_stores_still_read(tmp_path: Path) -> None:
    from projections.retrieval.documents import decode_vector, encode_vector

    emb = RecordingEmbedder()
    ml = MemoryLedger(home=tmp_path / "l", embedder=emb)
    ml.assert_fact("u1", "preference.drink", "tea", text="likes tea")
    ml.assert_fact("u1", "preference.food", "ramen", text="eats ramen")
    ml.search("u1", "tea", k=1)
    rows = live(ml)
    assert {len(v) for v in rows.values()} == {64 * 2}  # 64-d, 2 bytes a component
    exact = emb.embed_passages(["likes tea"])[0]
    stored = decode_vector(rows["likes tea"], 64)
    assert np.array_equal(stored, exact.astype(np.float16).astype(np.float32))
    assert 0 < float(np.max(np.abs(stored - exact))) <= 2.0 ** -11 * float(np.max(np.abs(exact)))

    # a row written before float16 (float32 bytes) is read, beside float16 rows; the index holds it rounded to float16,
    # as a new write would store it (projections/retrieval/vector_store.py)
    t = ml.vectors_projection.table("docs")
    with ml.db.transaction() as cur:
        # the text is sealed, and sealing is deterministic: the sealed words find the row (ledger/sealing.py)
        cur.execute(f"UPDATE {t} SET vector = ? WHERE text = ?", (exact.astype("<f4").tobytes(),
                                                                  cur.seal("u1", "likes tea")))
    ml.close()
    with MemoryLedger(home=tmp_path / "l", embedder=emb) as again:  # builds its FAISS index from the rows
        hits = again.search("u1", "likes tea", k=2)
        assert hits[0].text == "likes tea" and hits[0].parts.dense == pytest.approx(1.0, abs=1e-3)
        u = again.vectors_projection._memories[again.vectors_projection.suffix].users["u1"]
        held = u.vectors.get_vector("fact:preference.drink")
        assert np.array_equal(held, stored)  # the float32 row's vector, rounded as the float16 rows are
        assert all(r.ok for r in again.verify())

    # beyond float16's range a vector is kept as float32; a blob of neither length is refused
    big = np.full(4, 1e6, dtype=np.float32)
    assert np.array_equal(decode_vector(encode_vector(big), 4), big)
    with pytest.raises(ValueError, match="6 bytes, not 4-d"):
        decode_vector(b"\x00" * 6, 4)


def test_a_value_that_is_its_own_sentence_is_not_stored_twice_in_the_row(ledger: Any) -> None:
    import json

    ml, emb = ledger
    ml.assert_fact("u1", "memory.a1", "I walk the dog at six", text="I walk the dog at six")
    ml.assert_fact("u1", "pet.name", "Rex", text="my dog is called Rex")
    ml.search("u1", "dog", k=1)
    t = ml.vectors_projection.table("docs")
    with ml.db.read() as cur:
        cur.execute(f"SELECT key, value_json FROM {t} ORDER BY key")
        assert cur.fetchall() == [("memory.a1", ""), ("pet.name", '"Rex"')]
    values = {h.key: h.value for h in ml.search("u1", "dog", k=5)}
    assert values == {"memory.a1": "I walk the dog at six", "pet.name": "Rex"}
    # a row written before (the value spelled out) reads the same and verifies against a replay that elides it
    with ml.db.transaction() as cur:
        cur.execute(f"UPDATE {t} SET value_json = ? WHERE key = 'memory.a1'", (json.dumps("I walk the dog at six"),))
    assert all(r.ok for r in ml.verify())
    with ml.db.transaction() as cur:
        cur.execute(f"UPDATE {t} SET value_json = ? WHERE key = 'memory.a1'", (json.dumps("I walk the cat"),))
    assert not {r.projection: r for r in ml.verify()}["vectors"].ok
