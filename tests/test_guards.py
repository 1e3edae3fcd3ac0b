"""What holds whatever rule decided (ledger/guards.py): a reaffirmation never drops what the statement says, and one
past event never replaces another. Each case goes through ``remember``, as a user would say it."""

from __future__ import annotations

import pytest

from ledger.attributes import replaced_word
from ledger.guards import EPISODE

T1, T2 = "2024-01-01T09:00:00Z", "2024-02-01T09:00:00Z"


def revise(ml, old: str, new: str):
    user = f"g{abs(hash(old + new)) % 10**7}"
    ml.remember(user, old, observed_at=T1)
    r = ml.remember(user, new, observed_at=T2)
    return r, {f.text: f.status for f in ml.profile(user, allow_sensitive=["health"], purpose="test").facts.values()}


@pytest.mark.parametrize("old,new,rule", [
    ("我喜欢靠窗的座位", "长途飞行我喜欢靠过道的座位", "another_value_beside"),  # 过道 where the memory says 窗
    ("上周和小王去爬山了", "昨天和小李去爬山了", "another_value_beside"),
    ("I tried sushi with my friend Mark", "I tried sushi with my friend Lisa", "another_episode"),
    ("I read Dune last month", "I read Hyperion this month", "another_episode"),
    ("I met Sarah at the conference", "I met James at the conference", "another_episode"),
])
def test_both_are_kept_and_neither_is_retired(minilm_ledger, old, new, rule):
    r, facts = revise(minilm_ledger, old, new)
    assert (r.decision, facts.get(old), facts.get(new)) == ("add", "current", "current"), r.explanation
    assert f"by rule {rule}" in r.explanation


def test_a_weight_that_is_not_the_users_replaces_nothing(fresh_ledger):
    r, facts = revise(fresh_ledger, "I weigh 82 kg", "My suitcase weighs 23 kg")
    assert facts.get("I weigh 82 kg") == "current", r.explanation


@pytest.mark.parametrize("old,new,swapped", [
    ("上周和小王去爬山了", "昨天和小李去爬山了", "李"),  # 上周 / 昨天: a time, not a value
    ("I live in York", "I live in Leeds", "leeds"),
    ("I live in York", "I live in York", None),
    ("我每次剪头都找理发店的阿杰", "头发只让阿杰剪，别人剪我不放心", None),  # reworded throughout: no swap
])
def test_replaced_word_reads_a_swap_in_one_sentence(old, new, swapped):
    assert replaced_word(old, new) == swapped


def test_an_episode_is_a_one_off_past_event():
    assert EPISODE.search("I met Sarah at the conference") and EPISODE.search("went hiking with Bob")
    assert not EPISODE.search("I live in Boston") and not EPISODE.search("I usually go to bed at 11")


@pytest.mark.parametrize("old,new", [
    ("I don't eat pork or beef", "I eat pork now"),  # "no beef" must not go
    ("我不吃猪肉和牛肉", "我现在吃猪肉了"),
])
def test_a_change_of_one_of_two_values_keeps_both_to_confirm(minilm_ledger, old, new):
    r, facts = revise(minilm_ledger, old, new)
    assert (r.decision, facts.get(old), facts.get(new)) == ("conflict", "contested", "current"), r.explanation


def test_names_one_of_two():
    from ledger.guards import names_one_of_two

    assert names_one_of_two("I don't eat pork or beef", "I eat pork now")
    assert not names_one_of_two("I don't eat pork or beef", "I eat pork and beef now")
    assert not names_one_of_two("I live in Bath", "I moved to Leeds")
    # clauses joined by "and", set phrases and words inside other words are no two values
    assert not names_one_of_two("I live in Bristol, been here six years now and still get lost",
                                "any tips for my new flat in Leeds? don't know anyone")  # "now" inside "know"
    assert not names_one_of_two("I run at 6:30 every morning, rain or shine", "moved my run to 5:45 for the train")
    assert not names_one_of_two("Dad is on warfarin, 5mg every evening, and I sort his pill box",
                                "Dad's warfarin went up to 7.5mg, so I redo his pill box")
    assert names_one_of_two("I play tennis and golf on weekends", "I play golf now")
    # a statement listing values of its own says the list again, whichever of the memory's it names
    assert not names_one_of_two("no meat or fish, but I still eat eggs and cheese", "fully vegan, no eggs or dairy")
