"""A bounded search mirror (``limit_index_memory``, ``serve http --index-memory-mb``): users are loaded at their first
search and the least recently searched are evicted to keep the budget, with every search answering exactly as the
whole mirror does, on both backends (docs/performance.md)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from ledger.errors import BadInput
from projections.retrieval.mirror import user_bytes

USERS = [f"u{i}" for i in range(6)]
TEXTS = ["I live in Leeds", "My sister Anna plays the cello", "I drink green tea every morning",
         "My bike lock code is 3815", "I work at Northwind as a planner"]


def _fill(ml) -> None:
    ml.record([{"op": "assert", "user_id": u, "key": f"note.{j}", "value": f"{t} ({u})", "text": f"{t} ({u})",
                "observed_at": "2024-01-01T00:00:00Z"} for u in USERS for j, t in enumerate(TEXTS)])


def _hits(ml, user: str, query: str) -> list[tuple[str, str]]:
    return [(h.key, h.text) for h in ml.search(user, query, k=3)]


def _loaded(ml) -> list[str]:
    mem = ml.vectors_projection._memories[""]
    return list(mem.users)


def test_a_bounded_mirror_answers_as_the_whole_one_and_keeps_its_budget(fresh_ledger):
    _fill(fresh_ledger)
    whole = {u: _hits(fresh_ledger, u, "where do I live") for u in USERS}
    assert whole["u3"][0] == ("note.0", "I live in Leeds (u3)")
    one_user = user_bytes(fresh_ledger.vectors_projection._memories[""].users["u0"])
    # room for two users: each search loads one and evicts the least recently searched
    fresh_ledger.limit_index_memory(2.5 * one_user / 1_000_000)
    assert fresh_ledger.vectors_projection.loaded_bytes() == 0  # nothing loaded until a search
    for u in USERS:
        assert _hits(fresh_ledger, u, "where do I live") == whole[u]
    assert _loaded(fresh_ledger) == ["u4", "u5"]
    assert fresh_ledger.vectors_projection.loaded_bytes() <= 2.5 * one_user
    _hits(fresh_ledger, "u4", "tea")  # searched again: now the most recent, so u5 goes first
    _hits(fresh_ledger, "u0", "tea")
    assert _loaded(fresh_ledger) == ["u4", "u0"]
    assert fresh_ledger.vectors_projection._memories[""].evictions == 5


def test_writes_reach_a_loaded_user_and_one_read_after_eviction(fresh_ledger):
    _fill(fresh_ledger)
    one_user = user_bytes(fresh_ledger.vectors_projection._memories[""].users["u0"]) if _hits(
        fresh_ledger, "u0", "tea") else 0
    fresh_ledger.limit_index_memory(1.5 * one_user / 1_000_000)
    assert _hits(fresh_ledger, "u0", "tea")[0][1] == "I drink green tea every morning (u0)"
    # u0 is loaded: its write is applied to the mirror; u1 is not: its write waits in the table
    fresh_ledger.assert_fact("u0", "note.9", "I switched to black coffee", text="I switched to black coffee")
    fresh_ledger.assert_fact("u1", "note.9", "My cat Miso sleeps on the piano", text="My cat Miso sleeps on the piano")
    assert _hits(fresh_ledger, "u0", "black coffee")[0] == ("note.9", "I switched to black coffee")
    assert _hits(fresh_ledger, "u1", "cat piano")[0] == ("note.9", "My cat Miso sleeps on the piano")
    assert _loaded(fresh_ledger) == ["u1"]  # u0 evicted: one user fits
    fresh_ledger.retract_fact("u0", "note.9")
    assert "note.9" not in [k for k, _ in _hits(fresh_ledger, "u0", "black coffee")]


def test_a_user_with_nothing_is_not_loaded(fresh_ledger):
    _fill(fresh_ledger)
    fresh_ledger.limit_index_memory(1)
    assert fresh_ledger.search("nobody", "where do I live") == []
    assert "nobody" not in _loaded(fresh_ledger)


def test_concurrent_searches_and_writes_under_a_small_budget(fresh_ledger):
    _fill(fresh_ledger)
    fresh_ledger.limit_index_memory(0.01)  # about one user: every search of another user evicts
    errors: list[BaseException] = []

    def searcher(n: int) -> None:
        try:
            for i in range(30):
                u = USERS[(i + n) % len(USERS)]
                hits = _hits(fresh_ledger, u, "where do I live")
                assert hits[0] == ("note.0", f"I live in Leeds ({u})"), hits
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def writer() -> None:
        try:
            for i in range(15):
                u = USERS[i % len(USERS)]
                fresh_ledger.assert_fact(u, f"extra.{i}", f"extra {i}", text=f"I collect stamps, album {i}")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=searcher, args=(n,)) for n in range(3)] + [threading.Thread(target=writer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for i in range(15):  # every write is found, whoever was loaded when it landed
        u = USERS[i % len(USERS)]
        assert f"extra.{i}" in [h.key for h in fresh_ledger.search(u, f"stamps album {i}", k=10)]


@pytest.mark.parametrize("mb", [0, -1, float("nan"), float("inf"), "big", True])
def test_a_budget_that_is_not_a_positive_number_is_refused(fresh_ledger, mb):
    with pytest.raises(BadInput) as e:
        fresh_ledger.limit_index_memory(mb)
    assert e.value.field == "index_memory_mb"


def test_serve_refuses_a_bad_budget_naming_the_flag_or_variable(cli, store_args):
    code, _, err = cli("serve", "http", "--index-memory-mb", "0")
    assert code == 2 and "--index-memory-mb" in err and "Traceback" not in err, err
    cli.env["MEMLEDGER_INDEX_MEMORY_MB"] = "lots"
    code, _, err = cli("serve", "mcp")
    assert code == 2 and "$MEMLEDGER_INDEX_MEMORY_MB" in err and "Traceback" not in err, err
    if "home" in store_args:  # refused before the store is opened: nothing was made
        assert not store_args["home"].exists()


# --- a bounded mirror loads a user from the stored form: their vector packs and their BM25 file -------------------

def _scored(ml, user: str, query: str) -> list[tuple[str, str, float, Any, Any]]:
    """Each hit with its score and the dense and BM25 scores it was made of (the ranks among equal dense scores, and
    so the RRF tie-breaker, follow the order the vectors were added in, which differs between loads)."""
    return [(h.key, h.text, h.score, h.parts.dense, h.parts.lexical) for h in ml.search(user, query, k=5)]


def _tokenised(monkeypatch) -> list[str]:
    """The doc ids the BM25 indexes tokenise from now on (a load from a BM25 file tokenises none)."""
    from projections.retrieval.lexical import LexicalIndex

    seen: list[str] = []
    add = LexicalIndex.add

    def counting(self, doc_id, text):
        seen.append(doc_id)
        return add(self, doc_id, text)

    monkeypatch.setattr(LexicalIndex, "add", counting)
    return seen


def _no_row_vectors(monkeypatch, proj) -> None:
    """Fail if a user's vectors are read from their rows one by one rather than opened from their packs."""
    def refused(*args, **kwargs):
        raise AssertionError("a user's vectors read from their rows, not their packs")

    monkeypatch.setattr(type(proj), "_add_rows", refused)


def test_a_bounded_mirror_loads_a_user_from_their_packs_and_bm25_file_as_the_whole_one(fresh_ledger, monkeypatch):
    _fill(fresh_ledger)
    proj = fresh_ledger.vectors_projection
    fresh_ledger.search("u0", "tea")
    proj.try_save_files()  # what a CLI call leaves at its close: every user's BM25 file (none on PostgreSQL)
    # written after the files: applied over u2's file at their load, and u3's retraction removes a document
    fresh_ledger.assert_fact("u2", "note.0", "I moved to York", text="I moved to York")
    fresh_ledger.retract_fact("u3", "note.2")
    queries = ["green tea every morning", "where do I live", "cello sister"]
    whole = {(u, q): _scored(fresh_ledger, u, q) for u in USERS for q in queries}
    assert whole[("u2", "where do I live")][0][:2] == ("note.0", "I moved to York")
    assert "note.2" not in [h[0] for h in whole[("u3", "green tea every morning")]]
    fresh_ledger.limit_index_memory(2e-6)  # 2 bytes: every load evicts the user loaded before
    tokenised = _tokenised(monkeypatch)
    _no_row_vectors(monkeypatch, proj)
    for u in USERS:
        for q in queries:
            assert _scored(fresh_ledger, u, q) == whole[(u, q)], (u, q)  # the same floats, bit for bit
    if proj._files_dir() is not None:
        assert tokenised == ["fact:note.0"]  # u2's one document changed since the files: nothing else tokenised
    else:  # PostgreSQL keeps no files: the words are tokenised from the rows, the vectors still from the packs
        assert len(tokenised) == len(USERS) * len(TEXTS) - 1  # u3 retracted one


def test_an_evicted_user_is_read_back_from_the_bm25_file_written_at_eviction(fresh_ledger, monkeypatch):
    _fill(fresh_ledger)
    proj = fresh_ledger.vectors_projection
    whole = {u: _scored(fresh_ledger, u, "bike lock code") for u in USERS}
    fresh_ledger.limit_index_memory(2e-6)
    tokenised = _tokenised(monkeypatch)
    assert _scored(fresh_ledger, "u0", "bike lock code") == whole["u0"]  # no file yet: tokenised from the rows
    assert len(tokenised) == len(TEXTS)
    assert _scored(fresh_ledger, "u1", "bike lock code") == whole["u1"]  # u0 evicted: their file written
    proj.wait_for_writes()  # on the writer thread: the search did not wait for it
    d = proj._files_dir()
    if d is not None:
        from projections.retrieval.documents import user_file_stem
        from projections.retrieval.lexical import LexicalIndex

        stored = LexicalIndex.from_bytes(fresh_ledger.db.sealer.open((d / f"{user_file_stem('u0')}.lex").read_bytes()))
        assert sorted(stored.doc_ids()) == [f"fact:note.{j}" for j in range(len(TEXTS))]
        assert {k: stored.stamp[k] for k in ("user", "table")} == {"user": "u0", "table": proj.table("docs")}
        assert not (d / f"{user_file_stem('u1')}.lex").exists()  # u1 is loaded: their file is written at close
        proj.try_save_files()
        assert (d / f"{user_file_stem('u1')}.lex").exists() and not (d / "manifest.json").exists()
    tokenised.clear()
    _no_row_vectors(monkeypatch, proj)
    assert _scored(fresh_ledger, "u0", "bike lock code") == whole["u0"]  # loaded again after its eviction
    assert tokenised == ([] if d is not None else [f"fact:note.{j}" for j in range(len(TEXTS))])


def test_a_bm25_file_of_another_user_or_an_erased_one_is_not_read(fresh_ledger, monkeypatch):
    _fill(fresh_ledger)
    proj = fresh_ledger.vectors_projection
    whole = _scored(fresh_ledger, "u0", "where do I live")
    fresh_ledger.limit_index_memory(2e-6)
    for u in ("u0", "u1", "u2"):  # u0's and u1's files written as each is evicted
        fresh_ledger.search(u, "where do I live")
    proj.wait_for_writes()
    d = proj._files_dir()
    if d is None:  # PostgreSQL: no files; an erased user's index is gone all the same
        fresh_ledger.erase("u1")
        assert fresh_ledger.search("u1", "where do I live") == []
        return
    from projections.retrieval.documents import user_file_stem

    u0, u1 = (d / f"{user_file_stem(u)}.lex" for u in ("u0", "u1"))
    u0.write_bytes(u1.read_bytes())  # u1's file in u0's place: its stamp names u1, so u0 is read from the rows
    tokenised = _tokenised(monkeypatch)
    assert _scored(fresh_ledger, "u0", "where do I live") == whole
    assert len(tokenised) == len(TEXTS)
    kept = u1.read_bytes()
    fresh_ledger.erase("u1")
    assert not u1.exists()  # erasure deletes the file; a copy put back does not open (the user's key is gone)
    u1.write_bytes(kept)
    with fresh_ledger.db.read() as cur:
        assert proj.stored_lexical(cur, "u1", proj._memories[""].generation, 10**9) is None
    assert fresh_ledger.search("u1", "where do I live") == []


def test_a_forgotten_memory_is_in_no_bm25_file_a_bounded_mirror_writes(fresh_ledger):
    _fill(fresh_ledger)
    proj = fresh_ledger.vectors_projection
    fresh_ledger.limit_index_memory(2e-6)
    fresh_ledger.search("u0", "bike lock")  # tokenised from the rows: their file is written when they are evicted
    fresh_ledger.search("u1", "bike lock")  # u0 evicted, their file queued
    fresh_ledger.forget("u0", "note.3")
    fresh_ledger.search("u2", "bike lock")  # u1 evicted, their file queued
    proj.wait_for_writes()
    d = proj._files_dir()
    if d is not None:
        from projections.retrieval.documents import user_file_stem

        assert not (d / f"{user_file_stem('u0')}.lex").exists()  # the queued file was written before forget's delete
    assert "note.3" not in [h.key for h in fresh_ledger.search("u0", "bike lock code 3815", k=10)]
    fresh_ledger.search("u3", "bike lock")  # u0 evicted again: their file now holds no word of the forgotten one
    proj.wait_for_writes()
    if d is not None:
        from projections.retrieval.lexical import LexicalIndex

        stored = LexicalIndex.from_bytes(fresh_ledger.db.sealer.open((d / f"{user_file_stem('u0')}.lex").read_bytes()))
        assert "fact:note.3" not in stored.doc_ids() and len(stored) == len(TEXTS) - 1
