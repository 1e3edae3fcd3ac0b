"""EmbeddingCache and embed_with_cache (projections.retrieval.embedding_cache)."""

import sqlite3

import numpy as np
import pytest

from projections.retrieval.embedders import HashingEmbedder
from projections.retrieval.embedding_cache import EmbeddingCache, embed_with_cache, text_key


class CountingEmbedder(HashingEmbedder):
    """HashingEmbedder that records every text it is asked to embed."""

    def __init__(self, dim=32):
        super().__init__(dim)
        self.calls = 0
        self.embedded: list[str] = []

    def embed_passages(self, texts):
        self.calls += 1
        self.embedded.extend(texts)
        return super().embed_passages(texts)


TEXTS = ["我喜欢喝绿茶", "My sister lives in Lisbon", "我喜欢喝绿茶", "café"]


def test_second_call_embeds_nothing():
    emb, cache = CountingEmbedder(), EmbeddingCache(":memory:")
    first = embed_with_cache(emb, TEXTS, cache)
    assert first.shape == (4, 32) and first.dtype == np.float32
    assert emb.calls == 1
    assert sorted(emb.embedded) == sorted({"我喜欢喝绿茶", "My sister lives in Lisbon", "café"})  # dedup
    np.testing.assert_array_equal(first, HashingEmbedder(32).embed_passages(TEXTS))

    second = embed_with_cache(emb, TEXTS, cache)
    assert emb.calls == 1 and len(emb.embedded) == 3  # the model did not run again
    np.testing.assert_array_equal(second, first)
    assert cache.count(emb.model_id) == 3


def test_only_misses_are_embedded():
    emb, cache = CountingEmbedder(), EmbeddingCache()
    embed_with_cache(emb, TEXTS[:2], cache)
    emb.embedded.clear()
    out = embed_with_cache(emb, ["new text", TEXTS[0], "new text"], cache)
    assert emb.embedded == ["new text"]
    np.testing.assert_array_equal(out[0], out[2])


def test_nfc_variants_share_one_entry():
    emb, cache = CountingEmbedder(), EmbeddingCache()
    composed, decomposed = "café", "cafe\u0301"
    assert text_key(composed) == text_key(decomposed)
    embed_with_cache(emb, [composed], cache)
    out = embed_with_cache(emb, [decomposed], cache)
    assert emb.embedded == [composed]
    assert set(cache.get_many(emb.model_id, [decomposed])) == {decomposed}  # keyed by the text as given
    np.testing.assert_array_equal(out[0], emb.embed_query(composed))


def test_models_are_separate_and_dims_pinned():
    cache = EmbeddingCache()
    a, b = CountingEmbedder(32), CountingEmbedder(16)
    assert a.model_id != b.model_id
    embed_with_cache(a, ["x y"], cache)
    embed_with_cache(b, ["x y"], cache)
    assert b.embedded == ["x y"]  # a's entry is not b's
    assert cache.dim(a.model_id) == 32 and cache.dim(b.model_id) == 16
    with pytest.raises(ValueError, match="pinned to dim 32"):
        cache.put_many(a.model_id, {"z": np.ones(16, dtype=np.float32)})
    with pytest.raises(ValueError, match="different dims"):
        cache.put_many("m", {"p": np.ones(4), "q": np.ones(5)})
    with pytest.raises(ValueError, match="NaN"):
        cache.put_many("m", {"p": np.array([np.nan, 1.0])})
    assert cache.dim("m") is None  # failed writes pinned nothing


def test_persists_across_reopen(tmp_path):
    path = tmp_path / "cache" / "emb.sqlite"
    emb = CountingEmbedder()
    with EmbeddingCache(path) as cache:
        first = embed_with_cache(emb, TEXTS, cache)
    emb2 = CountingEmbedder()
    with EmbeddingCache(path) as cache:
        again = embed_with_cache(emb2, TEXTS, cache)
    assert emb2.calls == 0
    np.testing.assert_array_equal(again, first)
    # the text itself is not stored, only its digest
    raw = b"".join(p.read_bytes() for p in path.parent.iterdir())  # db plus any WAL/SHM file
    assert text_key("My sister lives in Lisbon") in raw
    assert "Lisbon".encode() not in raw and "绿茶".encode() not in raw


def test_corrupt_blob_detected_on_read(tmp_path):
    path = tmp_path / "emb.sqlite"
    cache = EmbeddingCache(path)
    cache.put_many("m", {"hello": np.ones(8, dtype=np.float32)})
    cache.close()
    with sqlite3.connect(path) as con:
        con.execute("UPDATE embeddings SET vector = ?", (b"\x00" * 12,))
    cache = EmbeddingCache(path)
    with pytest.raises(ValueError, match="8-d but a stored vector has 12 bytes"):
        cache.get_many("m", ["hello"])


def test_delete_texts_erases_all_models():
    cache = EmbeddingCache()
    a, b = CountingEmbedder(32), CountingEmbedder(16)
    for e in (a, b):
        embed_with_cache(e, ["secret fact", "other fact"], cache)
    assert cache.delete_texts(["secret fact"]) == 2
    assert cache.get_many(a.model_id, ["secret fact"]) == {}
    assert cache.get_many(b.model_id, ["secret fact"]) == {}
    assert set(cache.get_many(a.model_id, ["other fact"])) == {"other fact"}
    assert cache.delete_texts(["other fact"], model_id=a.model_id) == 1
    assert set(cache.get_many(b.model_id, ["other fact"])) == {"other fact"}
    a.embedded.clear()
    embed_with_cache(a, ["secret fact"], cache)
    assert a.embedded == ["secret fact"]  # re-embedded after erasure


def test_empty_inputs():
    emb, cache = CountingEmbedder(), EmbeddingCache()
    assert embed_with_cache(emb, [], cache).shape == (0, 32)
    assert emb.calls == 0
    assert cache.get_many("m", []) == {} and cache.put_many("m", {}) == 0 and cache.delete_texts([]) == 0


def test_a_cache_in_the_old_without_rowid_layout_is_migrated_once_with_its_vectors(tmp_path):
    """The old layout spilled each vector into an overflow page (4.7 KB on disk per 384-d vector); the new one
    keeps the same rows in about 2.1 KB."""
    import sqlite3

    import numpy as np

    from projections.retrieval.embedding_cache import EmbeddingCache, text_key

    path = tmp_path / "old.db"
    con = sqlite3.connect(path)
    con.executescript(
        "CREATE TABLE models (model_id TEXT PRIMARY KEY, dim INTEGER NOT NULL CHECK (dim > 0));"
        "CREATE TABLE embeddings (model_id TEXT NOT NULL REFERENCES models(model_id), text_key BLOB NOT NULL, "
        "vector BLOB NOT NULL, PRIMARY KEY (model_id, text_key)) WITHOUT ROWID;"
        "CREATE INDEX embeddings_by_text ON embeddings(text_key);")
    con.execute("INSERT INTO models VALUES ('m', 384)")
    rng = np.random.default_rng(7)
    vecs = {f"text {i}": rng.random(384).astype("<f4") for i in range(1000)}
    con.executemany("INSERT INTO embeddings VALUES ('m', ?, ?)", [(text_key(t), v.tobytes()) for t, v in vecs.items()])
    con.commit()
    con.close()
    old_size = path.stat().st_size
    with EmbeddingCache(path) as cache:
        got = cache.get_many("m", ["text 3", "text 999"])
        assert np.array_equal(got["text 3"], vecs["text 3"]) and np.array_equal(got["text 999"], vecs["text 999"])
        assert cache._conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0] == 1000
        sql = cache._conn.execute("SELECT sql FROM sqlite_master WHERE name = 'embeddings'").fetchone()[0]
        assert "WITHOUT ROWID" not in sql.upper()
        assert cache.delete_texts(["text 3"]) == 1
    fresh = tmp_path / "new.db"
    with EmbeddingCache(fresh) as cache:
        cache.put_many("m", vecs)
    assert old_size / 1000 > 4000 and fresh.stat().st_size / 1000 < 2400


def test_a_large_embedding_call_says_so_once_and_a_cached_one_says_nothing(caplog):
    import logging

    from projections.retrieval.embedding_cache import NOTICE_MISSES

    emb, cache = CountingEmbedder(), EmbeddingCache(":memory:")
    texts = [f"memory number {i}" for i in range(NOTICE_MISSES)]
    with caplog.at_level(logging.WARNING, logger="memledger"):
        embed_with_cache(emb, texts[:-1], cache)
        assert caplog.records == []  # below the threshold: silent
        embed_with_cache(emb, [t + "!" for t in texts], cache)
        assert [r.getMessage() for r in caplog.records] == [
            f"memledger: embedding {NOTICE_MISSES} texts with {emb.model_id} (once per text and model; later calls "
            "find them stored)"]
        embed_with_cache(emb, [t + "!" for t in texts], cache)  # all cached now
        assert len(caplog.records) == 1


def test_an_unreadable_cache_file_is_started_again_and_one_in_the_way_is_named(tmp_path, caplog):
    path = tmp_path / "vectors" / "embeddings.db"
    path.parent.mkdir()
    path.write_bytes(np.random.default_rng(7).bytes(8192))  # not a database
    (tmp_path / "vectors" / "embeddings.db-wal").write_bytes(b"junk")
    emb = CountingEmbedder()
    with caplog.at_level("WARNING", logger="memledger"):
        with EmbeddingCache(path) as cache:
            assert cache.count() == 0
            out = embed_with_cache(emb, ["I drink tea"], cache)
            assert cache.count() == 1 and np.allclose(out[0], HashingEmbedder(32).embed_passages(["I drink tea"])[0])
    assert "was unreadable" in caplog.text and str(path) in caplog.text
    with EmbeddingCache(path) as cache:  # the new file is an ordinary cache
        assert cache.count() == 1
    path.unlink()
    path.mkdir()  # a directory in its place: not ours to delete
    from ledger.errors import MemledgerError

    with pytest.raises(MemledgerError, match=f"the embedding cache {path} cannot be opened.*delete it"):
        EmbeddingCache(path)
    assert path.is_dir()
    blocked = tmp_path / "file" / "embeddings.db"
    blocked.parent.write_text("a file where the directory goes")
    with pytest.raises(MemledgerError, match="directory .*file cannot be made.*move what is in the way"):
        EmbeddingCache(blocked)


def test_a_new_cache_file_has_8k_pages_and_an_older_4k_file_keeps_working(tmp_path):
    """~1.6 KB rows left ~0.8 KB of every 4 KB page empty; a new file takes 8 KB pages. A file made before keeps
    its 4 KB pages (SQLite changes the size only by a VACUUM) and its vectors."""
    vec = np.arange(384, dtype=np.float32) / 384
    fresh = tmp_path / "new.db"
    with EmbeddingCache(fresh) as cache:
        cache.put_many("m", {"a": vec})
    assert sqlite3.connect(fresh).execute("PRAGMA page_size").fetchone()[0] == 8192
    old = tmp_path / "old.db"
    with EmbeddingCache(old) as cache:
        cache.put_many("m", {"a": vec})
    conn = sqlite3.connect(old, isolation_level=None)  # rewrite it as a 4 KB-page file, as earlier versions made
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("PRAGMA page_size=4096")
    conn.execute("VACUUM")
    assert conn.execute("PRAGMA page_size").fetchone()[0] == 4096
    conn.close()
    with EmbeddingCache(old) as cache:
        got = cache.get_many("m", ["a", "b"])
        assert list(got) == ["a"] and np.array_equal(got["a"], vec)
        cache.put_many("m", {"b": vec * 2})
        assert cache.count("m") == 2
    assert sqlite3.connect(old).execute("PRAGMA page_size").fetchone()[0] == 4096
