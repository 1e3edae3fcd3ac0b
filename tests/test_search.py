"""``MemoryLedger.search`` and ``memledger search`` (ledger/search.py): score parts, filters before the cut, as-of,
provenance, the CLI's --json contract and its refusals. Hashing test double (tests/conftest.py).
"""

from __future__ import annotations

import json
import math
from datetime import timedelta
from typing import Any

import pytest

from memledger import MemoryLedger
from ledger.errors import BadInput
from memledger.search import freshness
from ledger.timeutil import now_utc, to_micros


def test_score_is_relevance_times_confidence_times_freshness_plus_role_bonus(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    ten_days_ago = (now_utc() - timedelta(days=10)).isoformat()
    ml.assert_fact("u1", "preference.drink", "tea", text="I drink green tea", confidence=0.8,
                   observed_at=ten_days_ago, source_ref="msg-7", session_id="s-1",
                   role={"role": "nutritionist", "task_id": "t-9"})
    (hit,) = ml.search("u1", "green tea", k=3, half_lives={"preference.": 10 * 86400}, role="nutritionist")
    p = hit.parts
    # the only memory is first in both rankings (RRF 2/61) and holds every query term once (lexical_n 1): relevance
    # is the logistic of the hashing model's standardised cosine (anchors 0.125, 0.156) + 3 x 1 - 2
    assert (p.dense_rank, p.lexical_rank, p.rrf, p.lexical_n) == (1, 1, 2 / 61, pytest.approx(1.0))
    assert p.dense_z == pytest.approx((p.dense - 0.125) / 0.156)
    assert p.relevance == pytest.approx(1 / (1 + math.exp(-(p.dense_z + 3 - 2))))
    assert p.confidence == 0.8 and p.role_bonus == 0.1
    assert p.freshness == pytest.approx(0.5, rel=1e-5)  # one half-life old
    assert hit.score == pytest.approx(p.relevance * 0.8 * p.freshness + 0.1, rel=1e-12)
    assert (hit.key, hit.value, hit.text, hit.source, hit.source_ref, hit.session_id, hit.role.role) == (
        "preference.drink", "tea", "I drink green tea", "user_statement", "msg-7", "s-1", "nutritionist")
    assert hit.recorded_at is not None and hit.valid_from.isoformat() == ten_days_ago.replace("+00:00", "+00:00")
    # another role: no bonus; no half-life for the key: no decay
    (hit,) = ml.search("u1", "green tea", k=3, role="coach")
    assert (hit.parts.role_bonus, hit.parts.freshness, hit.score) == (0.0, 1.0, pytest.approx(p.relevance * 0.8))


def test_freshness_uses_the_longest_matching_prefix() -> None:
    now = to_micros(now_utc())
    day = 86400 * 10**6
    lives = {"preference.": 86400.0, "preference.drink": 4 * 86400.0}
    assert freshness("preference.drink", now - 2 * day, now, lives) == pytest.approx(0.5 ** 0.5)
    assert freshness("preference.food", now - 2 * day, now, lives) == pytest.approx(0.25)
    assert freshness("hobby.x", now - 2 * day, now, lives) == 1.0
    assert freshness("preference.food", now + day, now, lives) == 1.0  # valid from the future: not aged


def test_a_filter_applies_before_the_top_k_is_cut(fresh_ledger: MemoryLedger) -> None:
    """60 user statements match the query well; the one agent inference matches it not at all. Filtering the
    first pool (50) would leave nothing: the pool grows until the k hits exist."""
    ml = fresh_ledger
    ml.record([{"user_id": "u1", "key": f"trip.t{i}", "value": i, "text": f"trip to the lake number {i}"}
               for i in range(60)])
    ml.assert_fact("u1", "guess.mood", "calm", text="seems calm", source="agent_inference", confidence=0.5)
    hits = ml.search("u1", "trip to the lake", k=1, source="agent_inference")
    assert [(h.key, h.source, h.parts.lexical) for h in hits] == [("guess.mood", "agent_inference", None)]
    assert len(ml.search("u1", "trip to the lake", k=61)) == 61
    assert [h.key for h in ml.search("u1", "trip lake", k=5, source="external_import")] == []


def test_as_of_searches_what_was_believed_then(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    r1 = ml.assert_fact("u1", "preference.drink", "tea", text="I drink green tea")
    r2 = ml.assert_fact("u1", "preference.drink", "coffee", text="I drink black coffee")
    ml.retract_fact("u1", "preference.drink", reason="forget it")
    between = [h for h in ml.history("u1") if h.version == r1.version][0].recorded_at
    after_coffee = [h for h in ml.history("u1") if h.version == r2.version][0].recorded_at
    assert [(h.text, h.version, h.status) for h in ml.search("u1", "drink", as_of=between)] == [
        ("I drink green tea", 1, "believed")]
    assert [h.text for h in ml.search("u1", "drink", as_of=after_coffee.isoformat())] == ["I drink black coffee"]
    assert ml.search("u1", "drink", as_of="2000-01-01T00:00:00Z") == []
    assert ml.search("u1", "drink") == []  # retracted now


@pytest.mark.parametrize("kwargs, message", [
    ({"query": "  "}, "query: is empty"),
    ({"k": 0}, "k: 0 is not a whole number from 1 to 1000"),
    ({"k": True}, "k: True is not a whole number"),
    ({"as_of": "2024-01-01T00:00:00"}, "as_of: 2024-01-01T00:00:00 has no UTC offset"),
    ({"source": "gossip"}, "source: 'gossip' is not a source"),
    ({"role": ""}, "role: is empty"),
    ({"user_id": ""}, "user_id"),
])
def test_bad_search_arguments_are_refused(fresh_ledger: MemoryLedger, kwargs: dict[str, Any], message: str) -> None:
    args = {"user_id": "u1", "query": "tea", **kwargs}
    with pytest.raises(BadInput, match=message.replace("(", r"\(")):
        fresh_ledger.search(**args)


def test_cli_search_json_is_the_api_output(store_args: dict[str, Any], cli: Any) -> None:
    with MemoryLedger(**store_args) as ml:
        ml.assert_fact("u1", "preference.drink", "tea", text="I drink green tea", source_ref="D1:3")
        ml.assert_fact("u1", "hobby.sport", "tennis", text="I play tennis")
        ml.assert_fact("u2", "preference.drink", "milk", text="I drink milk")
        api = [h.model_dump(mode="json") for h in ml.search("u1", "what do I drink", k=5)]
    got = cli.json("search", "u1", "what do I drink", "-k", "5")
    assert [h["text"] for h in got] == ["I drink green tea", "I play tennis"]
    for h in got + api:
        del h["parts"]["freshness"], h["score"]  # both 1.0 / equal, but recomputed at a later instant
    assert got == api
    assert got[0]["source_ref"] == "D1:3" and got[0]["doc_id"] == "fact:preference.drink"
    code, out, err = cli("search", "u1", "tennis", "-k", "1")
    assert code == 0 and "I play tennis" in out


@pytest.mark.parametrize("args, message", [
    (["search", "u1", "tea", "-k", "0"], "k: 0 is not a whole number from 1 to 1000"),
    (["search", "u1", "tea", "--as-of", "2024-05-01T09:00:00"], "as_of: 2024-05-01T09:00:00 has no UTC offset"),
    (["search", "u1", "tea", "--source", "gossip"], "source: 'gossip' is not a source"),
    (["search", "u1", ""], "query: is empty"),
    (["search", "u1", "tea", "--role", ""], "role: is empty"),
])
def test_cli_refusals_exit_2_and_change_nothing(store_args: dict[str, Any], cli: Any, args: list[str],
                                                message: str) -> None:
    with MemoryLedger(**store_args) as ml:
        ml.assert_fact("u1", "preference.drink", "tea", text="I drink green tea")
    before = (cli.json("history", "u1"), cli.json("profile", "u1"))
    code, out, err = cli(*args)
    assert code == 2 and message in err and "Traceback" not in err and out == ""
    assert (cli.json("history", "u1"), cli.json("profile", "u1")) == before
    with MemoryLedger(**store_args) as ml:
        assert ml._head() == 1


def test_a_hit_names_every_source_that_said_it(fresh_ledger: MemoryLedger, cli) -> None:
    """A statement said again is merged into the memory it repeats (reaffirm); the hit still names both sources,
    its own first, each once, through the Python API and ``search --json``."""
    ml = fresh_ledger
    for ref, day in (("msg-1", 1), ("msg-2", 2), ("msg-1", 3)):
        ml.remember("u1", "My wifi password is tiger123", source_ref=ref, observed_at=f"2024-01-0{day}T00:00:00Z")
    ml.remember("u1", "I drink green tea every morning", source_ref="msg-9", observed_at="2024-01-04T00:00:00Z")
    hits = {h.text: h for h in ml.search("u1", "wifi password", k=5)}
    assert hits["My wifi password is tiger123"].source_ref == "msg-1"
    assert hits["My wifi password is tiger123"].source_refs == ["msg-1", "msg-2"]
    assert hits["I drink green tea every morning"].source_refs == ["msg-9"]
    out = {h["text"]: h["source_refs"] for h in cli.json("search", "u1", "wifi password")}
    assert out["My wifi password is tiger123"] == ["msg-1", "msg-2"]
