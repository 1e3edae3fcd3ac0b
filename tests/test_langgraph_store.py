"""The LangGraph store: reversible key escaping, a differential test against LangGraph's own
``InMemoryStore`` on generated operation sequences, user scoping, history and ``created_at``, and a real
``StateGraph`` (no LLM) whose nodes read and write through the store."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import BaseStore  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

from ledger.errors import BadInput  # noqa: E402
from ledger.schemas import KEY_RE  # noqa: E402
from memledger import MemoryLedger  # noqa: E402
from memledger.integrations.langgraph import (MemledgerStore, escape, item_address, ledger_key,  # noqa: E402
                                              unescape)


@pytest.fixture
def ml(tmp_path: Path) -> Any:
    with MemoryLedger(home=tmp_path / "h") as ledger:
        yield ledger


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_escaping_is_reversible_and_makes_ledger_keys(label: str) -> None:
    seg = escape(label)
    assert unescape(seg) == label
    assert KEY_RE.match(seg) and seg == seg.lower()  # the ledger opens new keys in lowercase only


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=8).filter(lambda s: "." not in s), max_size=3), st.text(max_size=12))
def test_addresses_round_trip(prefix: list[str], key: str) -> None:
    try:
        fk = ledger_key(tuple(prefix), key)
    except BadInput:  # refused only when the escaped address exceeds the ledger's 200 characters
        assert len(".".join(["lg", *map(escape, prefix), escape(key)])) > 200
        return
    assert KEY_RE.match(fk) and item_address(fk) == (tuple(prefix), key)


def test_escaping_examples() -> None:
    assert escape("preference.drink") == "preference_2edrink"
    assert escape("a_b") == "a_5fb" and escape("") == "_" and escape("é") == "_c3_a9"
    assert escape("Drink") == "_44rink" and unescape("_44rink") == "Drink"
    assert ledger_key(("prefs",), "drink") == "lg.prefs.drink"
    assert item_address("preference.drink") is None  # facts outside the store stay invisible to it
    with pytest.raises(BadInput):
        ledger_key(("x",), "k" * 300)


KEYS = ["drink", "Drink", "a.b", "with space", "", "_", "x_2e", "é", "k9"]
SPACES = [("u1",), ("u1", "prefs"), ("u1", "Prefs"), ("u1", "prefs", "deep"), ("u2",), ("u2", "notes")]
WORDS = ["tea", "coffee", "lyon", "paris", "cats", "dogs"]


def _value(rng: random.Random) -> dict[str, Any]:
    return {"text": f"likes {rng.choice(WORDS)}", "n": rng.randint(0, 5), "tags": [rng.choice(WORDS)]}


def _view(items: list[Any]) -> list[tuple]:
    return sorted((tuple(i.namespace), i.key, repr(sorted(i.value.items()))) for i in items)


@pytest.mark.parametrize("seed", [1, 2])
def test_differential_against_inmemory_store(ml: Any, seed: int) -> None:
    rng = random.Random(seed)
    ours, ref = MemledgerStore(ml), InMemoryStore()
    for step in range(90):
        r = rng.random()
        ns, key = rng.choice(SPACES), rng.choice(KEYS)
        if r < 0.45:
            v = _value(rng)
            ours.put(ns, key, v)
            ref.put(ns, key, v)
        elif r < 0.6:
            ours.delete(ns, key)
            ref.delete(ns, key)
        elif r < 0.75:
            a, b = ours.get(ns, key), ref.get(ns, key)
            assert (a is None) == (b is None), (step, ns, key)
            if a is not None:
                assert (a.namespace, a.key, a.value) == (b.namespace, b.key, b.value)
        elif r < 0.9:
            prefix = ns[:rng.randint(1, len(ns))]
            flt = {"n": {"$gte": 2}} if rng.random() < 0.3 else None
            a = ours.search(prefix, filter=flt, limit=100)
            b = ref.search(prefix, filter=flt, limit=100)
            assert _view(a) == _view(b), (step, prefix, flt)
        else:
            user = rng.choice(["u1", "u2"])
            a = ours.list_namespaces(prefix=(user,))
            b = [n for n in ref.list_namespaces(prefix=(user,)) if ref.search(n, limit=1000) and any(
                tuple(i.namespace) == n for i in ref.search(n, limit=1000))]
            assert a == b, step
    # batches: the reads see the state before the batch's puts; the last put of a key wins
    from langgraph.store.base import GetOp, PutOp

    ops = [PutOp(("u1", "b"), "k", {"v": 1}), GetOp(("u1", "b"), "k"), PutOp(("u1", "b"), "k", {"v": 2})]
    ra, rb = ours.batch(ops), ref.batch(ops)
    assert ra[1] is None and rb[1] is None
    assert ours.get(("u1", "b"), "k").value == ref.get(("u1", "b"), "k").value == {"v": 2}


def test_history_created_at_and_scoping(ml: Any) -> None:
    store = MemledgerStore(ml)
    store.put(("u1", "prefs"), "drink", {"text": "likes tea"})
    first = store.get(("u1", "prefs"), "drink")
    store.put(("u1", "prefs"), "drink", {"text": "likes coffee now"})
    second = store.get(("u1", "prefs"), "drink")
    assert second.value == {"text": "likes coffee now"}
    assert second.created_at == first.created_at < second.updated_at  # created_at is the first recording
    store.delete(("u1", "prefs"), "drink")
    assert store.get(("u1", "prefs"), "drink") is None
    rows = ml.history("u1", "lg.prefs.drink")
    assert [r.kind for r in rows] == ["asserted", "asserted", "retracted"]  # the ledger keeps what was deleted
    assert rows[1].source == "agent_inference"
    # search with a query is the ledger's hybrid search, with scores; other users never leak in
    store.put(("u1", "notes"), "n1", {"text": "my cat is called Miso"})
    store.put(("u2", "notes"), "n1", {"text": "my cat is called Biscuit"})
    hits = store.search(("u1",), query="cat name")
    assert [h.value["text"] for h in hits] == ["my cat is called Miso"] and hits[0].score is not None
    with pytest.raises(ValueError):
        store.search((), query="cat")
    with pytest.raises(ValueError):
        store.list_namespaces()
    everyone = MemledgerStore(ml, cross_user=True)
    assert {h.namespace[0] for h in everyone.search((), query="cat")} == {"u1", "u2"}
    assert everyone.list_namespaces() == [("u1", "notes"), ("u2", "notes")]
    assert everyone.list_namespaces(max_depth=1) == [("u1",), ("u2",)]
    assert asyncio.run(store.aget(("u1", "notes"), "n1")).value == {"text": "my cat is called Miso"}


class State(TypedDict, total=False):
    user_id: str
    said: str
    recalled: list[str]


def test_a_real_stategraph_reads_and_writes_through_the_store(ml: Any) -> None:
    from langgraph.graph import END, START, StateGraph

    def write(state: State, *, store: BaseStore) -> State:
        store.put((state["user_id"], "memories"), "drink", {"text": state["said"]})
        return {}

    def read(state: State, *, store: BaseStore) -> State:
        hits = store.search((state["user_id"], "memories"), query="what does the user drink")
        return {"recalled": [h.value["text"] for h in hits]}

    g = StateGraph(State)
    g.add_node("write", write)
    g.add_node("read", read)
    g.add_edge(START, "write")
    g.add_edge("write", "read")
    g.add_edge("read", END)
    graph = g.compile(store=MemledgerStore(ml))
    out = graph.invoke({"user_id": "u7", "said": "I drink oolong tea"})
    assert out["recalled"] == ["I drink oolong tea"]
    out = graph.invoke({"user_id": "u7", "said": "I drink espresso now"})
    assert out["recalled"] == ["I drink espresso now"]  # the superseded belief is not recalled
    assert [r.value["text"] for r in ml.history("u7", "lg.memories.drink")] == ["I drink oolong tea",
                                                                                 "I drink espresso now"]
    out = asyncio.run(graph.ainvoke({"user_id": "u8", "said": "I drink water"}))
    assert out["recalled"] == ["I drink water"]
