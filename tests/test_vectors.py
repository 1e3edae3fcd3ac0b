"""The ``vectors`` projection (projections/vectors.py): only current versions are indexed, per user, derivably.

Runs on SQLite and PostgreSQL with the hashing test double (tests/conftest.py sets MEMLEDGER_EMBEDDER=hash): no
model load, and exact vectors.
"""

from __future__ import annotations

import sqlite3

import threading
from typing import Any

import numpy as np
import pytest

from ledger.errors import MemledgerError

from memledger import MemoryLedger
from projections.retrieval.embedders import HashingEmbedder

DRINKS = ["I drink green tea every morning", "I drink black coffee every morning now",
          "I drink espresso every morning, not black coffee"]


def texts(ml: MemoryLedger, user: str, query: str, k: int) -> list[str]:
    return [h.text for h in ml.search(user, query, k=k)]


def table_rows(ml: MemoryLedger) -> list[tuple]:
    """(user, doc_id, version, live, text) of every row of the serving vectors table."""
    with ml.db.read() as cur:
        cur.execute(f"SELECT user_id, doc_id, version, live, text FROM {ml.vectors_projection.table('docs')} "
                    "ORDER BY user_id, doc_id")
        return [tuple(r) for r in cur.fetchall()]


def mirror(ml: MemoryLedger) -> Any:
    """The serving copy's in-memory mirror as a search would see it now (``dirty`` empty: opened from the files)."""
    with ml.db.read() as cur:
        return ml.vectors_projection.refresh(cur)

def test_supersede_correct_retract_never_leave_the_old_text(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    ml.assert_fact("u1", "hobby.sport", "tennis", text="I play tennis on Sundays")
    ml.assert_fact("u1", "preference.drink", "tea", text=DRINKS[0])
    assert texts(ml, "u1", "what do I drink in the morning", 10) == [DRINKS[0], "I play tennis on Sundays"]
    ml.assert_fact("u1", "preference.drink", "coffee", text=DRINKS[1])  # supersede
    for k in range(1, 4):
        assert DRINKS[0] not in texts(ml, "u1", "green tea every morning", k)
    assert texts(ml, "u1", "green tea every morning", 1) == [DRINKS[1]]
    ml.correct_fact("u1", "preference.drink", "espresso", text=DRINKS[2], reason="misheard")
    for k in range(1, 4):
        got = texts(ml, "u1", "black coffee every morning", k)
        assert DRINKS[1] not in got and DRINKS[0] not in got
    hit = ml.search("u1", "black coffee", k=1)[0]
    assert (hit.key, hit.version, hit.value, hit.status) == ("preference.drink", 3, "espresso", "current")
    ml.retract_fact("u1", "preference.drink", reason="forget that")
    for k in range(1, 4):
        assert texts(ml, "u1", "espresso coffee tea drink morning", k) == ["I play tennis on Sundays"]
    # the table keeps a tombstone (so other processes' mirrors see the removal), with text and vector cleared
    assert table_rows(ml) == [("u1", "fact:hobby.sport", 1, 1, "I play tennis on Sundays"),
                              ("u1", "fact:preference.drink", 4, 0, None)]


def test_contest_adds_no_vector_and_backfill_is_not_current(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    ml.assert_fact("u1", "preference.drink", "tea", text="I drink tea", observed_at="2024-03-01T00:00:00Z")
    ml.assert_fact("u1", "preference.drink", "beer", text="I drink beer", source="agent_inference",
                   confidence=0.4)
    hits = ml.search("u1", "beer drink", k=5)
    assert [(h.text, h.status) for h in hits] == [("I drink tea", "contested")]
    ml.assert_fact("u1", "preference.drink", "milk", text="I drank milk as a child",
                   observed_at="2020-01-01T00:00:00Z")  # backfill: history, not current
    assert [(h.text, h.status) for h in ml.search("u1", "milk child", k=5)] == [("I drink tea", "contested")]
    ml.assert_fact("u1", "preference.drink", "tea", text="I drink tea")  # the user reaffirms: contest cleared
    assert [(h.text, h.status) for h in ml.search("u1", "tea", k=5)] == [("I drink tea", "current")]


def test_users_are_isolated_under_interleaved_writers(store_args: dict[str, Any]) -> None:
    """Four threads write the same words for four users through two ledger objects (as two processes would);
    every search, at every k, returns only the searching user's memories."""
    users = ["alice", "bob", "carol", "dave"]
    with MemoryLedger(**store_args) as a, MemoryLedger(**store_args) as b:
        errors: list[BaseException] = []

        def writer(i: int, user: str) -> None:
            ml = (a, b)[i % 2]
            try:
                for n in range(6):
                    ml.assert_fact(user, f"note.n{n}", n, text=f"note {n} about the shared garden, by {user}")
                    hits = ml.search(user, "shared garden note", k=10)
                    assert {h.text.rsplit(" ", 1)[1] for h in hits} == {user}
                    assert len(hits) == n + 1
            except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(i, u)) for i, u in enumerate(users)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        for ml in (a, b):
            for user in users:
                for k in (1, 3, 6, 24):
                    hits = ml.search(user, "note about the shared garden", k=k)
                    assert len(hits) == min(k, 6)
                    assert all(h.text.endswith(f"by {user}") for h in hits)


def test_another_ledger_object_never_serves_a_stale_vector(store_args: dict[str, Any]) -> None:
    with MemoryLedger(**store_args) as reader, MemoryLedger(**store_args) as writer:
        writer.assert_fact("u1", "preference.color", "blue", text="my favourite colour is blue")
        assert texts(reader, "u1", "favourite colour", 5) == ["my favourite colour is blue"]
        writer.assert_fact("u1", "preference.color", "red", text="my favourite colour is red")
        # the reader's mirror was built before the change: its next search reads the changed row first
        assert texts(reader, "u1", "favourite colour blue", 5) == ["my favourite colour is red"]


def test_index_files_are_used_only_when_the_manifest_matches(tmp_path: Any) -> None:
    home = tmp_path / "l"
    with MemoryLedger(home=home) as ml:
        ml.assert_fact("u1", "preference.color", "blue", text="my favourite colour is blue")
        ml.search("u1", "colour", k=1)
    manifest = home / "vectors" / "hash_v2_64" / "serving" / "manifest.json"
    import json

    man = json.loads(manifest.read_text())
    assert (man["model_id"], man["dim"], man["normalized"], man["position"]) == ("hash:v2:64", 64, True, 1)
    # A writer that dies before saving its files (no close): the files on disk are now behind the table.
    crashed = MemoryLedger(home=home)
    crashed.assert_fact("u1", "preference.color", "red", text="my favourite colour is red")
    crashed.db.close()
    crashed.app.close()
    with MemoryLedger(home=home) as ml:
        assert texts(ml, "u1", "favourite colour blue", 5) == ["my favourite colour is red"]
    assert json.loads(manifest.read_text())["position"] == 2
    with MemoryLedger(home=home) as ml:  # now loaded from the files: same answer
        mem = mirror(ml)
        assert (mem.position, sorted(mem.users)) == (2, ["u1"])
        assert mem.dirty == set()  # came from the files, not rebuilt from the table
        assert texts(ml, "u1", "favourite colour blue", 5) == ["my favourite colour is red"]


def test_vectors_load_from_their_files_and_a_foreign_index_file_is_not_trusted(tmp_path: Any) -> None:
    home = tmp_path / "l"
    with MemoryLedger(home=home) as ml:
        ml.assert_fact("u1", "preference.color", "blue", text="my favourite colour is blue")
        ml.assert_fact("u2", "hobby.sport", "tennis", text="I play tennis on Sundays")
        ml.search("u1", "colour", k=1)
    d = home / "vectors" / "hash_v2_64" / "serving"
    lex = sorted(p.name for p in d.iterdir() if p.suffix == ".lex")
    assert len(lex) == 2 and list(d.rglob("*.faiss")) == [] and list(d.rglob("*.vec")) == []
    with sqlite3.connect(home / "projections.db") as db:  # each user's vectors: one blob in the table, only there
        assert db.execute("SELECT user_id, docs, stale FROM vectors_packs ORDER BY 1").fetchall() == [
            ("u1", 1, 0), ("u2", 1, 0)]
        assert db.execute("SELECT COUNT(*) FROM vectors_docs WHERE vector IS NOT NULL").fetchone() == (0,)
    # FAISS and vectors files left by an older layout go at the next save; each user's BM25 file swapped for the
    # other's (the manifest still matches the table) is caught by its documents and rebuilt from the rows
    (d / "old.faiss").write_bytes(b"stale")
    (d / f"{lex[0][:-4]}.vec").write_bytes(b"stale")
    (d / "cjk").mkdir()
    (d / "cjk" / "old.faiss").write_bytes(b"stale")
    a, b = (d / lex[0]).read_bytes(), (d / lex[1]).read_bytes()
    (d / lex[0]).write_bytes(b)
    (d / lex[1]).write_bytes(a)
    with MemoryLedger(home=home) as ml:
        mem = mirror(ml)
        assert mem.dirty == {"u1", "u2"}  # rebuilt from the table, to be written back
        assert texts(ml, "u1", "tennis colour", 5) == ["my favourite colour is blue"]
        assert texts(ml, "u2", "tennis colour", 5) == ["I play tennis on Sundays"]
        vec = mem.users["u1"].vectors.get_vector("fact:preference.color")
        stored = HashingEmbedder(64).embed_passages(["my favourite colour is blue"])[0].astype(np.float16)
        assert np.array_equal(vec, stored.astype(np.float32))  # the table's float16 vector, exactly
    assert sorted(p.name for p in d.rglob("*") if p.is_file()) == sorted([*lex, "manifest.json"])
    with MemoryLedger(home=home) as ml:
        mem = mirror(ml)
        assert mem.dirty == set()  # the rewritten files are trusted again, the vectors come from the packs
        assert texts(ml, "u2", "tennis", 5) == ["I play tennis on Sundays"]
        assert np.array_equal(mem.users["u1"].vectors.get_vector("fact:preference.color"), stored.astype(np.float32))


def test_an_index_file_of_another_state_is_not_trusted(tmp_path: Any) -> None:
    """Two users with the same document ids, so only the files' contents tell them apart; and a user's own file from
    before a supersede copied back. Each is caught by the manifest's digests and rebuilt from the table."""
    home = tmp_path / "l"
    with MemoryLedger(home=home) as ml:
        ml.assert_fact("u1", "preference.drink", "tea", text="I drink green tea every morning")
        ml.assert_fact("u2", "preference.drink", "coffee", text="I drink black coffee")
        ml.search("u1", "drink", k=1)
    d = home / "vectors" / "hash_v2_64" / "serving"
    from projections.retrieval.documents import user_file_stem

    f1, f2 = (d / f"{user_file_stem(u)}.lex" for u in ("u1", "u2"))
    old1 = f1.read_bytes()

    def lexical(ml: MemoryLedger, user: str, query: str) -> float | None:
        return ml.search(user, query, k=1)[0].parts.lexical

    with MemoryLedger(home=home) as ml:
        assert mirror(ml).dirty == set()
        ml.assert_fact("u1", "preference.drink", "cocoa", text="These days I drink hot chocolate instead")
        assert lexical(ml, "u1", "green tea") is None
    f1.write_bytes(old1)  # the file from before the supersede, under a manifest of after it
    with MemoryLedger(home=home) as ml:
        assert mirror(ml).dirty == {"u1", "u2"}
        assert lexical(ml, "u1", "green tea") is None  # no stale words
    a, b = f1.read_bytes(), f2.read_bytes()
    f1.write_bytes(b)
    f2.write_bytes(a)
    with MemoryLedger(home=home) as ml:
        assert mirror(ml).dirty == {"u1", "u2"}
        assert lexical(ml, "u1", "coffee") is None  # none of u2's words
        assert lexical(ml, "u2", "chocolate") is None
    with MemoryLedger(home=home) as ml:
        assert mirror(ml).dirty == set()  # rewritten, trusted again
        assert lexical(ml, "u1", "chocolate") is not None


def test_index_files_that_cannot_be_written_never_fail_the_command(tmp_path: Any, caplog: Any) -> None:
    home = tmp_path / "l"
    with MemoryLedger(home=home) as ml:
        ml.assert_fact("u1", "preference.drink", "tea", text="I drink green tea every morning")
        ml.assert_fact("u2", "hobby.sport", "tennis", text="I play tennis on Sundays")
        ml.search("u1", "drink", k=1)
    from projections.retrieval.documents import user_file_stem

    f1 = home / "vectors" / "hash_v2_64" / "serving" / f"{user_file_stem('u1')}.lex"
    f1.unlink()
    f1.mkdir()  # in the way of the file
    with caplog.at_level("WARNING", logger="memledger"):
        with MemoryLedger(home=home) as ml:
            ml.assert_fact("u1", "preference.drink", "cocoa", text="I drink hot chocolate now")
            assert texts(ml, "u2", "tennis", 5) == ["I play tennis on Sundays"]
            assert texts(ml, "u1", "drink", 5) == ["I drink hot chocolate now"]
    assert "were not saved" in caplog.text and "Fix:" in caplog.text
    with MemoryLedger(home=home) as ml:  # the manifest was left untrusted: rebuilt from the table
        assert texts(ml, "u1", "drink", 5) == ["I drink hot chocolate now"]
        assert ml.app.recorder.max_notification_id() == 3


def test_a_user_whose_rows_span_several_reads_is_loaded_whole(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import projections.retrieval.mirror as mirror_module

    monkeypatch.setattr(mirror_module, "LOAD_CHUNK", 3)  # rows are read 3 at a time: every user's rows cross a boundary
    home = tmp_path / "l"
    users = {"u1": 5, "u2": 1, "u3": 7}
    with MemoryLedger(home=home) as ml:
        ml.record([{"user_id": u, "key": f"note.n{i}", "value": i, "text": f"{u} note number {i}"}
                   for u, n in users.items() for i in range(n)])
        ml.retract_fact("u3", "note.n2")
        ml.search("u1", "note", k=1)
    for wipe in (True, False):  # the table alone, then the BM25 files it wrote
        if wipe:
            for f in home.rglob("*.lex"):
                f.unlink()
        with MemoryLedger(home=home) as ml:
            mem = mirror(ml)
            assert mem.dirty == ({"u1", "u2", "u3"} if wipe else set())
            for u, n in users.items():
                want = {f"fact:note.n{i}" for i in range(n)} - ({"fact:note.n2"} if u == "u3" else set())
                idx = mem.users[u]
                assert set(idx.vectors.doc_ids()) == want
                assert set(idx.lexical.doc_ids()) == want
                with ml.db.read() as cur:  # the texts stay in the table: read for the documents a search ranks
                    rows = ml.vectors_projection.doc_rows(cur, u, sorted(want))
                assert set(rows) == want
                for doc in want:
                    text = f"{u} note number {doc.rsplit('n', 1)[1]}"
                    assert rows[doc]["text"] == text
                    held = HashingEmbedder(64).embed_passages([text])[0].astype(np.float16)  # as stored
                    assert np.array_equal(idx.vectors.get_vector(doc), held.astype(np.float32))
            assert texts(ml, "u3", "u3 note number 6", 1) == ["u3 note number 6"]


@pytest.fixture
def embed_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Batch sizes of every HashingEmbedder.embed_passages call made during the test (one entry per model call)."""
    calls: list[int] = []
    original = HashingEmbedder.embed_passages

    def counting(self: HashingEmbedder, batch: list[str]) -> np.ndarray:
        calls.append(len(batch))
        return original(self, batch)

    monkeypatch.setattr(HashingEmbedder, "embed_passages", counting)
    return calls


def test_rebuilds_reuse_the_embedding_cache(tmp_path: Any, embed_calls: list[int]) -> None:
    calls = embed_calls
    home = tmp_path / "l"
    with MemoryLedger(home=home) as ml:
        ml.record([{"user_id": "u1", "key": f"note.n{i}", "value": i, "text": f"note number {i}"} for i in range(5)])
        assert calls == []  # the vectors projection is deferred: a write never waits for the model
        ml.catch_up()
    assert calls == [5]  # one batch, one model call (warmed outside the transaction, then read from the cache)
    with MemoryLedger(home=home, embedder="hash:32") as ml:  # opening with another model never re-binds the index
        with pytest.raises(MemledgerError, match="built with 'hash:v2:64', this ledger embeds with 'hash:v2:32'"):
            ml.search("u1", "note number 3")
        assert calls == [5]  # refused before embedding anything
        ml.rebuild(["vectors"], blue_green=True, embedder="hash:32")  # the one way to switch models
        assert texts(ml, "u1", "note number 3", 1) == ["note number 3"]
    assert calls == [5, 5]
    with MemoryLedger(home=home) as ml:  # back to the first model: every text is in the cache
        ml.rebuild(["vectors"], blue_green=True, embedder="hash")
        assert texts(ml, "u1", "note number 3", 1) == ["note number 3"]
        with ml.db.read() as cur:
            cur.execute(f"SELECT name, value FROM {ml.vectors_projection.table('meta')} ORDER BY name")
            meta = dict(cur.fetchall())
    assert calls == [5, 5]
    assert (meta["model_id"], meta["dim"], meta["normalized"]) == ("hash:v2:64", "64", "true")


def test_a_ledger_without_the_vectors_projection_refuses_search(tmp_path: Any) -> None:
    from ledger.errors import BadInput

    with MemoryLedger(home=tmp_path / "l", embedder="none") as ml:
        ml.assert_fact("u1", "preference.color", "blue")
        assert ml.vectors_projection is None and [p.name for p in ml.projections].count("vectors") == 0
        with pytest.raises(BadInput, match="embedder: this ledger was opened without the vectors projection"):
            ml.search("u1", "colour")
    with MemoryLedger(home=tmp_path / "l") as ml:  # opened with it later: the log is projected then
        assert texts(ml, "u1", "blue", 3) == ["preference.color: blue"]


def test_writes_do_not_embed_but_search_is_never_stale(tmp_path: Any, embed_calls: list[int]) -> None:
    calls = embed_calls
    with MemoryLedger(home=tmp_path / "l") as ml:
        ml.assert_fact("u1", "preference.drink", "tea", text="I drink green tea every morning")
        ml.assert_fact("u1", "preference.drink", "coffee", text="I switched to black coffee")
        ml.profile("u1")
        ml.history("u1")
        assert calls == []  # neither writes nor profile/history reads load or run the embedder
        hits = ml.search("u1", "what do I drink in the morning", k=5)
        assert [h.text for h in hits] == ["I switched to black coffee"]  # the superseded text is gone
        assert calls == [2]


def test_the_key_words_are_part_of_the_lexical_document(fresh_ledger):
    """A fact is a slot: "I'd rather have a hot latte now" is the user's *drink preference* though it never says so.
    BM25 indexes the key's words with the sentence (projections/vectors.py ``lexical_document``), so a query naming
    the slot matches it lexically; with the sentence alone the seed-001 re-ask ranked it first for 0 of 24 queries
    (scripts/bench_stale.py)."""
    from projections.retrieval.documents import lexical_document

    # then the slot's own words, in English and Chinese (ledger/slot_labels.py); a key outside the catalogue has none
    assert lexical_document("preference.drink", "I'd rather have a hot latte now") == \
        "I'd rather have a hot latte now preference drink drink 喝 饮料"
    assert lexical_document("profile.birth_year", "born 1994") == "born 1994 profile birth year"
    assert lexical_document("contact.phone", "My mobile is 07700 900 587") == \
        "My mobile is 07700 900 587 contact phone phone number 手机号码 电话"
    fresh_ledger.assert_fact("u1", "preference.drink", "hot latte", text="I'd rather have a hot latte now")
    fresh_ledger.assert_fact("u1", "memory.m1", "hiking", text="I went hiking in the mountains")
    hits = fresh_ledger.search("u1", "drink", k=2)
    by_key = {h.key: h for h in hits}
    assert by_key["preference.drink"].parts.lexical_rank == 1 and by_key["preference.drink"].parts.lexical > 0
    assert hits[0].key == "preference.drink"
