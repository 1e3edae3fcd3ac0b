"""Search over logged messages: BM25 alone, dense + BM25 fused, filters."""

from __future__ import annotations

import json

import pytest

from ledger.errors import BadInput

MESSAGES = [
    ("s1", "m1", "user", "I lost my job as a banker yesterday."),
    ("s1", "m2", "assistant", "Sorry to hear that. What will you do next?"),
    ("s2", "m3", "user", "I opened an online clothing store."),
    ("s2", "m4", "user", "我下周五去绿禾公园散步。"),
]


def _log(ml) -> None:
    ml.record_session([{"op": "log", "user_id": "u", "session_id": s, "message_id": m, "role": r, "text": t,
                        "observed_at": f"2024-01-0{i + 1}T00:00:00Z"} for i, (s, m, r, t) in enumerate(MESSAGES)])


@pytest.fixture
def ledger_with(store_args, monkeypatch):
    from memledger import MemoryLedger

    def open_with(embedder: str):
        monkeypatch.setenv("MEMLEDGER_EMBEDDER", embedder)
        return MemoryLedger(**store_args)

    return open_with


def test_bm25_only_when_the_ledger_has_no_embedder(ledger_with):
    with ledger_with("none") as ml:
        _log(ml)
        hits = ml.search_messages("u", "banker job", k=3)
        assert [(h.message_id, h.session_id, h.lexical_rank, h.dense_rank) for h in hits] == [("m1", "s1", 1, None)]
        assert hits[0].observed_at.isoformat() == "2024-01-01T00:00:00+00:00"
        assert [h.message_id for h in ml.search_messages("u", "绿禾公园", k=3)] == ["m4"]
        assert ml.search_messages("u", "banker", k=3, session_id="s2") == []
        assert ml.search_messages("nobody", "banker") == []


def test_dense_and_lexical_fused(ledger_with):
    with ledger_with("hash") as ml:  # the deterministic test double of projections/retrieval/embedders.py
        _log(ml)
        hits = ml.search_messages("u", "I opened an online clothing store.", k=2)
        assert hits[0].message_id == "m3" and (hits[0].dense_rank, hits[0].lexical_rank) == (1, 1)
        assert len(hits) == 2 and hits[0].score > hits[1].score


def test_bad_input_refused(ledger_with):
    with ledger_with("none") as ml:
        for kwargs, field in (({"query": " "}, "query"), ({"query": "x", "k": 0}, "k"),
                              ({"query": "x", "k": 1001}, "k")):
            with pytest.raises(BadInput) as exc:
                ml.search_messages("u", **kwargs)
            assert exc.value.field == field
        with pytest.raises(BadInput) as exc:
            ml.search_messages("u", "x", session_id=" s")
        assert exc.value.field == "session_id"


def test_cli_session_search(cli, store_args, monkeypatch):
    from memledger import MemoryLedger

    monkeypatch.setenv("MEMLEDGER_EMBEDDER", "none")
    cli.env["MEMLEDGER_EMBEDDER"] = "none"
    with MemoryLedger(**store_args) as ml:
        _log(ml)
        head = ml._head()
    code, out, err = cli("session", "search", "u", "clothing store", "-k", "1", "--json")
    assert code == 0, err
    assert [(h["message_id"], h["text"]) for h in json.loads(out)] == [("m3", "I opened an online clothing store.")]
    for args, field in ((["session", "search", "u", ""], "query"), (["session", "search", "u", "x", "-k", "0"], "k")):
        code, _, err = cli(*args)
        assert code == 2 and err.strip().startswith(f"error: {field}:"), err
    with MemoryLedger(**store_args) as ml:
        assert ml._head() == head


def test_searching_a_session_that_does_not_exist_is_refused_like_context(cli):
    cli("session", "log", "u1", "s1", "--role", "user", "--message-id", "m1", "--text", "hello there")
    code, _out, err = cli("session", "search", "u1", "hello", "--session", "nosuch")
    assert code == 2 and err.startswith("error: --session: 'nosuch' is not a session of 'u1'")
    assert [h["message_id"] for h in cli.json("session", "search", "u1", "hello", "--session", "s1")] == ["m1"]
