"""UserVectorIndex (projections.retrieval.vector_store) with the HashingEmbedder test double."""

import faiss
import numpy as np
import pytest

from projections.retrieval.embedders import HashingEmbedder
from projections.retrieval.vector_store import UserVectorIndex

DOCS = {
    "f1": "I drink green tea every morning",
    "f2": "My sister lives in Lisbon",
    "f3": "我喜欢在海滩和湖泊附近拍摄风景",
    "f4": "The project deadline is next Friday",
}


@pytest.fixture
def emb():
    return HashingEmbedder(dim=64)


@pytest.fixture
def index(emb):
    idx = UserVectorIndex(emb.dim)
    for doc_id, text in DOCS.items():
        idx.add(doc_id, emb.embed_query(text))
    return idx


def test_search_returns_exact_inner_products(index, emb):
    q = emb.embed_query("green tea in the morning")
    hits = index.search(q, k=4)
    assert [d for d, _ in hits][0] == "f1"
    assert len(hits) == 4
    mat = emb.embed_passages(list(DOCS.values())).astype(np.float16).astype(np.float32)  # held as stored: float16
    expected = dict(zip(DOCS, (mat @ q).tolist()))
    for doc_id, score in hits:
        assert score == pytest.approx(expected[doc_id], abs=1e-6)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    # CJK query against the CJK memory
    assert index.search(emb.embed_query("在海滩拍摄风景"), k=1)[0][0] == "f3"
    # k larger than the index is capped, k=0 is empty
    assert len(index.search(q, k=100)) == 4
    assert index.search(q, k=0) == []


def test_remove_really_removes(index, emb):
    q = emb.embed_query(DOCS["f1"])
    assert index.search(q, k=1)[0][0] == "f1"
    assert index.remove("f1") is True
    assert len(index) == 3 and "f1" not in index
    assert index._index.ntotal == 3  # gone from FAISS itself, not only from the id map
    assert "f1" not in [d for d, _ in index.search(q, k=10)]
    with pytest.raises(KeyError):
        index.get_vector("f1")
    assert index.remove("f1") is False
    index.add("f1", q)  # re-adding works and gets a fresh internal id
    assert index.search(q, k=1) == [("f1", pytest.approx(1.0, abs=1e-3))]  # the query against its float16 self
    assert len(index) == 4


def test_add_existing_id_replaces(index, emb):
    new = emb.embed_query("I moved to Porto")
    index.add("f2", new)
    assert len(index) == 4
    np.testing.assert_array_equal(index.get_vector("f2"), new.astype(np.float16).astype(np.float32))
    assert index.search(new, k=1)[0][0] == "f2"


def test_dim_mismatch_refused_with_both_dims(index):
    with pytest.raises(ValueError, match=r"dim 32.*dim 64"):
        index.add("bad", np.ones(32, dtype=np.float32))
    with pytest.raises(ValueError, match=r"dim 128.*dim 64"):
        index.search(np.ones(128, dtype=np.float32), k=1)
    with pytest.raises(ValueError, match=r"dim 63.*dim 64"):
        index.add_many(["x", "y"], np.ones((2, 63), dtype=np.float32))
    assert len(index) == 4 and "bad" not in index


def test_bad_input_changes_nothing(index):
    with pytest.raises(ValueError):
        index.add("nan", np.full(64, np.nan, dtype=np.float32))
    with pytest.raises(ValueError):
        index.add_many(["a", "a"], np.ones((2, 64), dtype=np.float32))
    with pytest.raises(TypeError):
        index.add(7, np.ones(64, dtype=np.float32))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        UserVectorIndex(0)
    assert len(index) == 4


def test_search_restores_the_process_wide_thread_count(index, emb):
    # search() drops FAISS to one OpenMP thread for the query; the setting is process-global, so it must
    # be put back for other FAISS users in the process.
    prev = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(3)
    try:
        index.search(emb.embed_query("tea"), k=2)
        assert faiss.omp_get_max_threads() == 3
    finally:
        faiss.omp_set_num_threads(prev)


def test_empty_index():
    idx = UserVectorIndex(8)
    assert idx.search(np.ones(8, dtype=np.float32), k=5) == []
    assert len(idx) == 0


def test_vectors_are_held_as_stored_float16_and_a_pack_is_copied_exactly():
    rng = np.random.default_rng(7)
    base = rng.standard_normal((50, 16)).astype(np.float16)
    delta = rng.standard_normal((3, 16)).astype(np.float32)
    docs = [f"d{i}" for i in range(53)]
    idx = UserVectorIndex.from_blocks(16, [(docs[:50], base), (docs[50:], delta)])
    assert idx.itemsize == 2
    store = faiss.downcast_index(idx._index.index)
    assert store.codes.size() == 53 * 16 * 2  # two bytes per component: half of float32's
    ids, mat = idx.export()
    assert ids == docs
    want = np.vstack([base.astype(np.float32), delta.astype(np.float16).astype(np.float32)])
    np.testing.assert_array_equal(mat, want)  # the pack's float16 bit for bit, the float32 block rounded to it
    # the same vectors added one by one give the same index: same scores, same order
    one = UserVectorIndex(16)
    one.add_many(docs, np.vstack([base.astype(np.float32), delta]))
    np.testing.assert_array_equal(one.export()[1], want)
    q = rng.standard_normal(16).astype(np.float32)
    hits = idx.search(q, k=10)
    assert hits == one.search(q, k=10)
    exact = sorted(zip(docs, (want @ q).tolist()), key=lambda t: -t[1])[:10]
    assert [d for d, _ in hits] == [d for d, _ in exact]
    for (_, s), (_, e) in zip(hits, exact):
        assert s == pytest.approx(e, abs=1e-5)
    np.testing.assert_allclose(idx.similarities(q, ["d3", "d51"]), want[[3, 51]] @ q, atol=1e-5)


def test_a_vector_beyond_float16_range_keeps_the_index_float32():
    idx = UserVectorIndex(4)
    idx.add("small", np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32))
    big = np.array([1e5, 0.0, 0.0, 3.3333333], dtype=np.float32)  # an embedder that does not normalise
    idx.add("big", big)
    assert idx.itemsize == 4
    np.testing.assert_array_equal(idx.get_vector("big"), big)  # not inf, not rounded
    np.testing.assert_array_equal(idx.get_vector("small"),  # the earlier vector kept as it was held
                                  np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float16).astype(np.float32))
    assert [d for d, _ in idx.search(np.array([1, 0, 0, 0], dtype=np.float32), k=2)] == ["big", "small"]
    assert idx.remove("small") and len(idx) == 1 and "small" not in idx
    # and read back from a pack that kept them float32
    again = UserVectorIndex.from_blocks(4, [(["big"], big.reshape(1, 4))])
    assert again.itemsize == 4
    np.testing.assert_array_equal(again.get_vector("big"), big)


def test_an_index_filled_in_place_reads_and_changes_as_one_built_by_adding():
    rng = np.random.default_rng(11)
    mat = rng.standard_normal((30, 8)).astype(np.float16)
    docs = [f"d{i}" for i in range(30)]
    idx, rows = UserVectorIndex.reserve(8, 34)  # room for 34; 30 written, straight into FAISS's storage
    rows[:30] = mat
    idx.adopt(docs)
    assert len(idx) == 30 and faiss.downcast_index(idx._index.index).codes.size() == 30 * 8 * 2
    one = UserVectorIndex(8)
    one.add_many(docs, mat.astype(np.float32))
    q = rng.standard_normal(8).astype(np.float32)
    assert idx.search(q, k=5) == one.search(q, k=5)
    # read before any change (FAISS ids are storage positions), then after a removal and an addition
    np.testing.assert_array_equal(idx.get_vector("d7"), mat[7].astype(np.float32))
    np.testing.assert_array_equal(idx.similarities(q, ["d2", "d29"]), one.similarities(q, ["d2", "d29"]))
    for ix in (idx, one):
        assert ix.remove("d3")
        ix.add("new", np.ones(8, dtype=np.float32))
        ix.add("d9", np.full(8, 0.5, dtype=np.float32))  # a replacement
    for ix in (idx, one):
        np.testing.assert_array_equal(ix.get_vector("d7"), mat[7].astype(np.float32))
        np.testing.assert_array_equal(ix.get_vector("d9"), np.full(8, 0.5, dtype=np.float32))
        np.testing.assert_array_equal(ix.get_vector("new"), np.ones(8, dtype=np.float32))
    np.testing.assert_array_equal(idx.similarities(q, ["d29", "new", "d9"]), one.similarities(q, ["d29", "new", "d9"]))
    assert idx.search(q, k=40) == one.search(q, k=40) and "d3" not in idx and len(idx) == 30
    with pytest.raises(ValueError, match="do not fit"):
        UserVectorIndex.reserve(8, 2)[0].adopt(["a", "b", "c"])
    with pytest.raises(ValueError, match="do not fit"):
        UserVectorIndex.reserve(8, 2)[0].adopt(["a", "a"])


def test_an_index_reserved_far_beyond_its_vectors_keeps_them_exactly():
    idx, rows = UserVectorIndex.reserve(64, 100_000)  # 12.8 MB reserved, 10 rows used: a tight copy
    rows[:10] = 0.25
    idx.adopt([f"d{i}" for i in range(10)])
    store = faiss.downcast_index(idx._index.index)
    assert store.codes.size() == 10 * 64 * 2
    np.testing.assert_array_equal(idx.get_vector("d9"), np.full(64, 0.25, dtype=np.float32))
