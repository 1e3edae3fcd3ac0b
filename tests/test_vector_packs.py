"""One stored copy of each vector: a user's vectors are in ``vectors_packs``, a base and a delta, each one sealed
blob (projections/retrieval/packs.py), never in their rows; forget and erase leave none of a forgotten vector
anywhere; a store written before packs is upgraded when opened. On SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from memledger import MemoryLedger
from projections.retrieval.embedders import HashingEmbedder
from projections.retrieval.packs import DELTA, PACK_RATIO, decode_pack

DIM = 64


def f16(text: str) -> np.ndarray:
    """The stored (float16) vector of ``text`` by the store's hashing embedder, as float32."""
    return HashingEmbedder(DIM).embed_passages([text])[0].astype(np.float16).astype(np.float32)


def packs(ml: MemoryLedger) -> dict[str, tuple[int, int, int]]:
    """``{user: (docs in the base, its stale entries, docs in the delta)}`` of the serving copy's packs."""
    out: dict[str, list[int]] = {}
    with ml.db.read() as cur:
        cur.execute(f"SELECT user_id, level, docs, stale FROM {ml.vectors_projection.table('packs')}")
        for u, level, d, st in cur.fetchall():
            row = out.setdefault(u, [0, 0, 0])
            if level == DELTA:
                row[2] = int(d)
            else:
                row[0], row[1] = int(d), int(st)
    return {u: tuple(v) for u, v in sorted(out.items())}  # type: ignore[misc]


def pack(ml: MemoryLedger, user: str, level: int = 0) -> dict[str, np.ndarray]:
    """``{doc_id: main vector}`` of ``user``'s base (or delta) pack, opened."""
    with ml.db.read() as cur:
        parts = ml.vectors_projection.read_pack(cur, user, level)
    if parts is None:
        return {}
    _, docs, mat = parts["main"]
    return dict(zip(docs, mat))


def in_rows(ml: MemoryLedger) -> set[tuple[str, str]]:
    """The documents whose vector is held by their row (not packed yet)."""
    with ml.db.read() as cur:
        cur.execute(f"SELECT user_id, doc_id FROM {ml.vectors_projection.table('docs')} WHERE vector IS NOT NULL")
        return {(u, d) for u, d in cur.fetchall()}


def many(ml: MemoryLedger, user: str, n: int) -> None:
    ml.record([{"user_id": user, "key": f"note.n{i}", "value": i, "text": f"note number {i} about rivers"}
               for i in range(n)])


def test_each_vector_is_stored_once_in_its_users_sealed_pack(store_args: dict[str, Any]) -> None:
    with MemoryLedger(**store_args) as ml:
        ml.assert_fact("u1", "preference.drink", "tea", text="likes green tea")
        ml.assert_fact("u1", "pet.name", "Rex", text="my dog is called Rex")
        ml.assert_fact("u2", "hobby.sport", "tennis", text="plays tennis on Sundays")
        assert ml.search("u1", "green tea", k=1)[0].text == "likes green tea"
        assert packs(ml) == {"u1": (2, 0, 0), "u2": (1, 0, 0)} and in_rows(ml) == set()
        got = pack(ml, "u1")
        assert sorted(got) == ["fact:pet.name", "fact:preference.drink"]
        assert np.array_equal(got["fact:preference.drink"], f16("likes green tea"))
        with ml.db.read() as cur:  # sealed under the user's key: the blob's plaintext magic is not in the table
            cur.raw.execute(f"SELECT vectors FROM {ml.vectors_projection.table('packs')}")
            assert all(not bytes(r[0]).startswith(b"memledger.vectors") for r in cur.raw.fetchall())
        # a supersede: the new vector replaces the old in the pack, and the old one is in no row nor pack
        ml.assert_fact("u1", "preference.drink", "coffee", text="drinks black coffee now")
        assert ml.search("u1", "coffee", k=1)[0].text == "drinks black coffee now"
        assert packs(ml)["u1"] == (2, 0, 0)
        assert np.array_equal(pack(ml, "u1")["fact:preference.drink"], f16("drinks black coffee now"))
        assert all(r.ok for r in ml.verify())


def test_a_big_users_base_is_rewritten_only_when_its_changes_reach_an_eighth(store_args: dict[str, Any]) -> None:
    with MemoryLedger(**store_args) as ml:
        many(ml, "u1", 20)
        ml.search("u1", "rivers", k=1)
        assert packs(ml) == {"u1": (20, 0, 0)} and PACK_RATIO == 8
        ml.assert_fact("u1", "pet.name", "Rex", text="my dog is called Rex")  # 1 * 8 < 21: into the delta
        assert ml.search("u1", "dog Rex", k=1)[0].text == "my dog is called Rex"
        assert packs(ml) == {"u1": (20, 0, 1)} and in_rows(ml) == set()
        assert np.array_equal(pack(ml, "u1", DELTA)["fact:pet.name"], f16("my dog is called Rex"))
        ml.retract_fact("u1", "note.n3", reason="wrong")  # a stale base entry: (1 + 1) * 8 < 21
        ml.search("u1", "rivers", k=1)
        assert packs(ml) == {"u1": (20, 1, 1)}
        assert "note number 3 about rivers" not in [h.text for h in ml.search("u1", "note number 3", k=25)]
        ml.retract_fact("u1", "pet.name", reason="no dog")  # leaves the delta, not the base's count
        assert ml.search("u1", "dog Rex", k=1)[0].key != "pet.name"
        assert packs(ml) == {"u1": (20, 1, 0)}
        # a supersede of a base memory: its new vector in the delta, its old entry stale, (1 + 2) * 8 >= 20: the
        # base is rewritten, with every live vector and nothing stale
        ml.assert_fact("u1", "note.n5", 55, text="note number five about lakes")
        assert ml.search("u1", "lakes", k=1)[0].text == "note number five about lakes"
        assert packs(ml) == {"u1": (19, 0, 0)} and in_rows(ml) == set()  # 19 notes
        assert "fact:note.n3" not in pack(ml, "u1") and "fact:pet.name" not in pack(ml, "u1")
        assert np.array_equal(pack(ml, "u1")["fact:note.n5"], f16("note number five about lakes"))
        ml.assert_fact("u1", "note.n6", 66, text="note number six about the sea")
        assert packs(ml) == {"u1": (19, 0, 0)}  # the vectors projection catches up at the next search
        assert all(r.ok for r in ml.verify())
        assert packs(ml) == {"u1": (19, 1, 1)}
    with MemoryLedger(**store_args) as ml:  # a fresh process loads the same index: the base, less its stale entry,
        # and the delta
        assert ml.search("u1", "lakes", k=1)[0].text == "note number five about lakes"
        assert ml.search("u1", "sea", k=1)[0].text == "note number six about the sea"
        mem = ml.vectors_projection._memories[ml.vectors_projection.suffix]
        assert len(mem.users["u1"].vectors) == 19


def test_forget_and_erase_leave_no_forgotten_vector_in_any_pack(store_args: dict[str, Any]) -> None:
    with MemoryLedger(**store_args) as ml:
        many(ml, "u1", 20)
        ml.assert_fact("u1", "health.condition", "asthma", text="I have asthma")
        ml.assert_fact("u2", "pet.name", "Rex", text="my dog is called Rex")
        ml.search("u1", "asthma", k=1)
        ml.search("u2", "dog", k=1)
        assert "fact:health.condition" in pack(ml, "u1")
        # a supersede leaves a stale entry in the pack, below the packing threshold
        ml.assert_fact("u1", "note.n0", 100, text="note about a secret plan")
        ml.search("u1", "rivers", k=1)
        assert packs(ml)["u1"] == (21, 1, 1)  # 20 notes and the asthma; the new note 0 in the delta
        ml.forget("u1", "health.condition", actor="test")
        ml.forget("u1", "note.n0", actor="test")
        ml.search("u1", "rivers", k=1)
        left = pack(ml, "u1")
        assert "fact:health.condition" not in left and "fact:note.n0" not in left and len(left) == 19
        assert packs(ml)["u1"] == (19, 0, 0) and in_rows(ml) == set()
        gone = [f16(t).astype(np.float16).tobytes() for t in ("I have asthma", "note number 0 about rivers",
                                                                "note about a secret plan")]
        with ml.db.read() as cur:
            cur.execute(f"SELECT vectors FROM {ml.vectors_projection.table('packs')} WHERE user_id = 'u1'")
            opened = b"".join(bytes(r[0]) for r in cur.fetchall())  # the cursor opens sealed values
        assert not any(g in opened for g in gone)
        assert all(r.ok for r in ml.verify())
        ml.erase("u2", actor="test")
        assert set(packs(ml)) == {"u1"}


def test_a_store_written_before_packs_moves_its_vectors_into_packs_when_opened(store_args: dict[str, Any]) -> None:
    with MemoryLedger(**store_args) as ml:
        many(ml, "u1", 3)
        ml.assert_fact("u2", "pet.name", "Rex", text="my dog is called Rex")
        ml.search("u1", "rivers", k=1)
        p = ml.vectors_projection
        # the layout of before: every live row holds its float16 vector, no packs table, a .vec file per user
        with ml.db.transaction() as cur:
            stored = p.stored_vectors(cur)
            for (user, doc), (vec, _) in stored.items():
                cur.execute(f"UPDATE {p.table('docs')} SET vector = ? WHERE user_id = ? AND doc_id = ?",
                            (cur.seal(user, vec.astype("<f2").tobytes()), user, doc))
            cur.execute(f"DROP TABLE {p.table('packs')}")
    home = store_args.get("home")
    if home is not None:
        d = next((home / "vectors").glob("*/serving"))
        (d / "0123456789abcdef.vec").write_bytes(b"an old vectors file")
    with MemoryLedger(**store_args) as ml:
        assert packs(ml) == {"u1": (3, 0, 0), "u2": (1, 0, 0)} and in_rows(ml) == set()
        assert np.array_equal(pack(ml, "u2")["fact:pet.name"], f16("my dog is called Rex"))
        assert ml.search("u2", "dog", k=1)[0].text == "my dog is called Rex"
        assert all(r.ok for r in ml.verify())
    if home is not None:
        assert list(home.rglob("*.vec")) == []  # the old files go at the next save


def test_a_pack_altered_on_disk_is_caught_by_verify(store_args: dict[str, Any]) -> None:
    from projections.retrieval.packs import encode_pack

    with MemoryLedger(**store_args) as ml:
        ml.assert_fact("u1", "preference.drink", "tea", text="likes green tea")
        ml.search("u1", "tea", k=1)
        p = ml.vectors_projection
        with ml.db.transaction() as cur:
            parts = p.read_pack(cur, "u1")
            dim, docs, mat = parts["main"]
            mat = mat.copy()
            mat[0, 0] += 0.25
            cur.execute(f"UPDATE {p.table('packs')} SET vectors = ? WHERE user_id = 'u1' AND level = 0",
                        (cur.seal("u1", encode_pack({"main": (dim, docs, mat)})),))
        bad = {r.projection: r for r in ml.verify()}["vectors"]
        assert not bad.ok and bad.difference["problem"].startswith("vector differs by up to 0.2")


def test_a_pack_round_trips_float16_exactly_and_keeps_float32_beyond_it() -> None:
    from projections.retrieval.packs import encode_pack

    half = np.array([[0.5, -0.25], [0.125, 1.0]], dtype=np.float32)
    wide = np.array([[1e6, 0.1]], dtype=np.float32)
    data = encode_pack({"main": (2, ["a", "b"], half), "cjk": (2, ["a"], wide)})
    out = decode_pack(data)
    assert out["main"][1] == ["a", "b"] and np.array_equal(out["main"][2], half)
    assert out["cjk"][1] == ["a"] and np.array_equal(out["cjk"][2], wide)
    # float16 when every component is one (half the bytes), else float32
    wider = encode_pack({"main": (2, ["a", "b"], half + 1e-4)})
    assert len(wider) - len(encode_pack({"main": (2, ["a", "b"], half)})) == 8
    with pytest.raises(ValueError, match="another length"):
        decode_pack(data[:-1])


def test_a_loaded_users_vector_ids_are_the_bm25_index_own_strings(store_args: dict[str, Any],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Loaded from the packs and the BM25 files, each doc id is held once (the vector index shares the BM25 index's
    strings), the vectors are the stored float16 ones, and the freed heap is handed back after a big load."""
    import projections.retrieval.mirror as mirror

    with MemoryLedger(**store_args) as ml:
        many(ml, "u1", 30)
        ml.search("u1", "rivers", k=1)
        ml.assert_fact("u1", "pet.name", "Rex", text="my dog is called Rex")  # in the delta
        ml.retract_fact("u1", "note.n3", reason="wrong")  # a stale base entry
        ml.search("u1", "rivers", k=1)
        assert packs(ml) == {"u1": (30, 1, 1)}
    trims: list[int] = []
    monkeypatch.setattr(mirror, "TRIM_MIN_DOCS", 30)
    monkeypatch.setattr(mirror, "release_freed_heap", lambda: trims.append(1))
    with MemoryLedger(**store_args) as ml:
        assert ml.search("u1", "dog Rex", k=1)[0].text == "my dog is called Rex"
        u = ml.vectors_projection._memories[ml.vectors_projection.suffix].users["u1"]
        assert len(u.vectors) == 30 and "fact:note.n3" not in u.vectors and u.vectors.itemsize == 2
        lex = {d: d for d in u.lexical.doc_ids()}
        assert sorted(lex) == sorted(u.vectors.doc_ids())
        assert all(lex[d] is d for d in u.vectors.doc_ids())  # the very same str objects, not equal copies
        assert np.array_equal(u.vectors.get_vector("fact:pet.name"), f16("my dog is called Rex"))
        assert np.array_equal(u.vectors.get_vector("fact:note.n7"), f16("note number 7 about rivers"))
    assert trims == [1]  # 30 documents loaded at once (TRIM_MIN_DOCS lowered): one trim


def test_the_freed_heap_goes_back_to_the_kernel() -> None:
    """What a big load frees in the middle of the heap (here 64 MB of 64 KB buffers, each followed by a small object
    that stays, so glibc cannot shrink the heap from its top) leaves the process once the heap is trimmed (without
    the trim, a fresh process kept all 64 MB)."""
    import sys

    from projections.retrieval.mirror import release_freed_heap

    def rss_mb() -> float:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024

    if not sys.platform.startswith("linux"):
        pytest.skip("VmRSS is read from /proc")
    held, pins = [], []
    for _ in range(1024):
        b = bytearray(65536)
        b[::4096] = b"x" * len(b[::4096])  # touched: resident
        held.append(b)
        pins.append(bytearray(1024))
    big = rss_mb()
    del held, b  # freed: some of it may stay the process's, in the heap's holes
    release_freed_heap()
    assert rss_mb() < big - 48
    assert len(pins) == 1024


def hits(ml: MemoryLedger, user: str, query: str, k: int = 20) -> list[tuple[str, float]]:
    return [(h.text, h.score) for h in ml.search(user, query, k=k)]


def test_a_pack_is_sealed_in_chunks_that_a_load_opens_straight_into_the_index(
        store_args: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """A pack is sealed in pieces of whole rows (here 8 rows of 64 float16 a piece); a fresh process loads the user
    from them, stale base entries and the delta included, and ranks exactly as the process that wrote them."""
    import projections.retrieval.packs as packs_mod
    from ledger.sealing import CHUNKS_PREFIX
    from projections.retrieval.packs import StoredPack

    monkeypatch.setattr(packs_mod, "CHUNK_BYTES", 8 * DIM * 2)
    with MemoryLedger(**store_args) as ml:
        many(ml, "u1", 40)
        ml.search("u1", "rivers", k=1)
        ml.assert_fact("u1", "note.n3", 33, text="note number 3 about mountains now")  # a base entry goes stale
        ml.assert_fact("u1", "pet.name", "Rex", text="my dog Rex swims in rivers")  # into the delta
        before = hits(ml, "u1", "rivers mountains dog")
        assert packs(ml)["u1"] == (40, 1, 2)
        p = ml.vectors_projection
        with ml.db.read() as cur:
            blob = cur.read_blob(p.table("packs"), "vectors", "user_id = ? AND level = 0", ("u1",))
            assert bytes(blob[:4]) == CHUNKS_PREFIX
            base = StoredPack.of(blob, cur.sealer)
            assert len(cur.sealer.chunks(blob).sizes) == 1 + 5  # the header, then 40 rows in pieces of 8
            mat = np.empty((40, DIM), dtype=np.float16)
            base.matrix_into("main", mat)
            assert np.array_equal(mat, p.read_pack(cur, "u1")["main"][2])  # the same as opened whole
    with MemoryLedger(**store_args) as ml:
        assert hits(ml, "u1", "rivers mountains dog") == before
        vec = ml.vectors_projection._memories[ml.vectors_projection.suffix].users["u1"].vectors
        assert len(vec) == 41 and np.array_equal(vec.get_vector("fact:note.n3"), f16("note number 3 about mountains now"))
        assert np.array_equal(vec.get_vector("fact:note.n7"), f16("note number 7 about rivers"))
        assert all(r.ok for r in ml.verify())


def test_packs_sealed_whole_by_an_earlier_version_are_sealed_in_chunks_when_the_store_opens(
        store_args: dict[str, Any]) -> None:
    from ledger.sealing import BYTES_PREFIX, CHUNKS_PREFIX
    from projections.retrieval.packs import PACK_FORMAT, encode_pack

    with MemoryLedger(**store_args) as ml:
        many(ml, "u1", 12)
        ml.search("u1", "rivers", k=1)
        ml.assert_fact("u1", "pet.name", "Rex", text="my dog Rex swims in rivers")  # into the delta
        ml.assert_fact("u2", "hobby.sport", "tennis", text="plays tennis on Sundays")
        before = hits(ml, "u1", "dog rivers")
        p = ml.vectors_projection
        with ml.db.transaction() as cur:  # as an earlier version wrote them: one token each, no pack_format
            cur.execute(f"SELECT user_id, level FROM {p.table('packs')}")
            for user, level in cur.fetchall():
                parts = p.read_pack(cur, user, level)
                cur.execute(f"UPDATE {p.table('packs')} SET vectors = ? WHERE user_id = ? AND level = ?",
                            (cur.seal(user, encode_pack(parts)), user, level))
            cur.execute(f"DELETE FROM {p.table('meta')} WHERE name = 'pack_format'")

    def stored(ml: MemoryLedger) -> set[bytes]:
        with ml.db.read() as cur:
            cur.raw.execute(f"SELECT vectors FROM {ml.vectors_projection.table('packs')}")
            return {bytes(r[0][:4]) for r in cur.raw.fetchall()}

    with MemoryLedger(**store_args) as ml:
        assert stored(ml) == {CHUNKS_PREFIX}
        with ml.db.read() as cur:
            cur.execute(f"SELECT value FROM {ml.vectors_projection.table('meta')} WHERE name = 'pack_format'")
            assert cur.fetchone() == (PACK_FORMAT,)
        assert packs(ml) == {"u1": (12, 0, 1), "u2": (1, 0, 0)}
        assert hits(ml, "u1", "dog rivers") == before
        assert np.array_equal(pack(ml, "u2")["fact:hobby.sport"], f16("plays tennis on Sundays"))
        assert all(r.ok for r in ml.verify())
        ml.erase("u2")  # erasure still takes the user's pack with their rows
        assert set(packs(ml)) == {"u1"}
        assert BYTES_PREFIX not in stored(ml)
