"""Embedding-model change: ``memledger rebuild vectors --blue-green --embedder SPEC`` builds a new vector index from
the log while the old one answers queries, switches every process to the new model at once, never mixes
dimensions, and reuses the embedding cache for a model it has seen.

Uses the hashing test double at two dimensions (hash = 64-d, hash:32 = 32-d): no model download, exact vectors.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from memledger import MemoryLedger
from projections.retrieval.embedders import HashingEmbedder

FACTS = {
    "preference.drink": "green tea in the morning",
    "preference.food": "spicy ramen with egg",
    "hobby.sport": "climbing on weekends",
    "pet.name": "a cat called Miso",
}


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLEDGER_EMBEDDER", "hash")


@pytest.fixture
def embedded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(dim, number of texts) of every real embedding call of the hashing embedder (cache misses only)."""
    calls: list[tuple[int, int]] = []
    original = HashingEmbedder.embed_passages

    def counting(self: HashingEmbedder, texts: list[str]) -> Any:
        calls.append((self.dim, len(texts)))
        return original(self, texts)

    monkeypatch.setattr(HashingEmbedder, "embed_passages", counting)
    return calls


def fill(ml: MemoryLedger) -> None:
    ml.record([{"user_id": "u1", "key": k, "value": v, "text": v} for k, v in FACTS.items()])
    ml.assert_fact("u2", "preference.drink", "black coffee", text="black coffee")
    ml.catch_up()  # the vectors projection is deferred (writes do not embed): project it as a search would


def top(ml: MemoryLedger, query: str) -> str:
    """The key of the best hit (the runner-up among unrelated texts is arbitrary for a hashing embedder)."""
    return ml.search("u1", query, k=1)[0].key


def dims(ml: MemoryLedger) -> set[int]:
    """Components of every live vector in the serving vectors copy (stored as float16: 2 bytes each)."""
    with ml.db.read() as cur:  # the table names are resolved in this snapshot (the serving copy)
        stored = ml.vectors_projection.stored_vectors(cur)
    return {len(v) if isinstance(v, np.ndarray) else len(bytes(v)) // 2 for v, _ in stored.values() if v is not None}


def test_switch_builds_beside_the_old_index_and_every_process_follows(
        store_args: dict[str, Any], embedded: list[tuple[int, int]]) -> None:
    with MemoryLedger(**store_args) as ml, MemoryLedger(**store_args) as other:
        fill(ml)
        assert top(other, "what does the user drink in the morning") == "preference.drink"
        assert dims(other) == {64}
        embedded.clear()
        during: list[Any] = []

        def progress(position: int, head: int) -> None:
            if not during:  # mid-build: the other process is still answered by the 64-d index, with the 64-d model
                during.append(other.vectors_projection.model_id)
                during.append(top(other, "climbing"))
                during.append(dims(other))

        report = ml.rebuild(["vectors"], blue_green=True, embedder="hash:32", batch_size=2, on_progress=progress)
        assert during == ["hash:v2:64", "hobby.sport", {64}]
        assert report.serving == {"vectors": "g1"} and report.events == 5
        assert embedded == [(32, 2), (32, 2), (32, 1)]  # the log's 5 texts, once each, by the new model only
        # After the switch both processes embed queries with the 32-d model and search the 32-d index.
        # (A process adopts the switch at its next transaction: the search's snapshot.)
        for led in (ml, other):
            assert top(led, "climbing") == "hobby.sport"
            assert led.vectors_projection.model_id == "hash:v2:32"
            assert dims(led) == {32}
        # A process opened later with the old configuration adopts the switched model too.
        with MemoryLedger(**store_args) as late:
            assert late.vectors_projection.model_id == "hash:v2:32"
            late.assert_fact("u1", "preference.drink", "oolong tea", text="oolong tea")
            assert dims(late) == {32}
            assert top(late, "oolong") == "preference.drink"
            assert all(r.ok for r in late.verify())
        with ml.db.read() as cur:
            cur.execute("SELECT projection FROM projection_tracking WHERE projection LIKE 'vectors%'")
            assert [r[0] for r in cur.fetchall()] == ["vectors__g1"]


def test_switching_back_reuses_the_embedding_cache(tmp_path: Any, embedded: list[tuple[int, int]]) -> None:
    with MemoryLedger(home=tmp_path / "l") as ml:
        fill(ml)
        ml.rebuild(["vectors"], blue_green=True, embedder="hash:32")
        embedded.clear()
        report = ml.rebuild(["vectors"], blue_green=True, embedder="hash")
        assert report.serving == {"vectors": "g2"}
        assert embedded == []  # every text was in the cache for hash:v2:64
        assert ml.vectors_projection.model_id == "hash:v2:64" and dims(ml) == {64}
        assert top(ml, "ramen") == "preference.food"


@pytest.mark.parametrize("args, message", [
    (["rebuild", "vectors", "--embedder", "hash:32"], "--embedder: an embedding-model switch needs --blue-green"),
    (["rebuild", "vectors", "--blue-green", "--embedder", "wordvec9"], "--embedder: unknown embedder 'wordvec9'"),
    (["rebuild", "profile", "--blue-green", "--embedder", "hash:32"],
     "--embedder: the vectors projection is not being rebuilt"),
])
def test_bad_switches_exit_2_and_change_nothing(store_args: dict[str, Any], cli: Any, args: list[str],
                                                message: str) -> None:
    with MemoryLedger(**store_args) as ml:
        fill(ml)
    before = cli.json("verify")
    code, out, err = cli(*args)
    assert code == 2 and message in err and "Traceback" not in err
    with MemoryLedger(**store_args) as ml:
        assert ml.vectors_projection.model_id == "hash:v2:64" and ml.vectors_projection.suffix == ""
        with ml.db.read() as cur:
            cur.execute("SELECT COUNT(*) FROM projection_versions")
            assert cur.fetchone()[0] == 0
    assert cli.json("verify") == before
