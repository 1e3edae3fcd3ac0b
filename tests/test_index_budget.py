"""A bounded search mirror (``limit_index_memory``, ``serve http --index-memory-mb``): users are loaded at their first
search and the least recently searched are evicted to keep the budget, with every search answering exactly as the
whole mirror does, on both backends (docs/performance.md)."""

from __future__ import annotations

import threading

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
