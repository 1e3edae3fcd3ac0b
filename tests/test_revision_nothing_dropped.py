"""A reaffirmation never drops what the user said: a value word added inside a memory's sentence supersedes it, the
same words negated (or no longer) replace it, a qualifier added to a value is another case, and Chinese weekdays
and times from now are days, not numbers (docs/resolution.md)."""

from __future__ import annotations

import pytest

from ledger.attributes import insertion, opposite_polarity
from ledger.values import value_parts, zh_numerals

T1, T2 = "2024-01-01T09:00:00Z", "2024-02-01T09:00:00Z"


def revise(ml, old: str, new: str, user: str = "u"):
    ml.remember(user, old, observed_at=T1)
    r = ml.remember(user, new, observed_at=T2)
    facts = {f.text: f.status for f in ml.profile(user, allow_sensitive=["health"], purpose="test").facts.values()}
    return r, facts


@pytest.mark.parametrize("old,new", [
    ("I live in York", "I live in New York"),
    ("I live in York", "Actually I live in New York"),
    ("My favourite book is Dune", "My favourite book is Dune Messiah"),
    ("I like jazz", "I like jazz and blues"),
    ("I'm a nurse", "I'm a nurse practitioner"),
    ("My favourite colour is blue", "My favourite colour is light blue"),
    ("My favourite team is the Lakers", "My favourite team is the Lakers and the Celtics"),
    ("我喜欢爵士乐", "我喜欢爵士乐和蓝调"),
])
def test_a_value_word_added_inside_the_sentence_supersedes_and_is_current(fresh_ledger, old, new):
    r, facts = revise(fresh_ledger, old, new, user=f"u{abs(hash(old + new))}")
    assert (r.decision, facts.get(new), facts.get(old)) == ("supersede", "current", None), r.explanation


@pytest.mark.parametrize("old,new", [
    ("I'm a massive Seattle Sounders fan", "I'm a Sounders fan"),  # said shorter: nothing the user said is lost
    ("I drink green tea", "I drink green tea"),
])
def test_the_same_value_said_shorter_or_again_still_reaffirms(fresh_ledger, old, new):
    r, facts = revise(fresh_ledger, old, new)
    assert (r.decision, facts.get(old)) == ("reaffirm", "current"), r.explanation


@pytest.mark.parametrize("old,new,added", [
    ("I live in York", "I live in New York", "new"),
    ("I like jazz", "Now I like jazz", None),  # a marker adds nothing
    ("my rent changed", "my rent has changed", None),
    ("I like jazz", "I like blues", None),  # replaced, not added
    ("我喜欢爵士乐", "我喜欢爵士乐和蓝调", "和蓝调"),
])
def test_insertion_reads_only_words_added_inside(old, new, added):
    assert insertion(old, new) == added


@pytest.mark.parametrize("old,new", [
    ("I don't eat pork", "I eat pork"),
    ("我不吃猪肉", "我现在吃猪肉了"),
])
def test_the_same_words_with_the_opposite_polarity_supersede(fresh_ledger, old, new):
    assert opposite_polarity(old, new)
    r, facts = revise(fresh_ledger, old, new, user=f"p{abs(hash(old))}")
    assert (r.decision, facts.get(new), facts.get(old)) == ("supersede", "current", None), r.explanation


def test_opposite_polarity_needs_the_same_words():
    assert not opposite_polarity("I don't eat pork", "I eat beef")
    assert not opposite_polarity("I eat pork", "I eat pork")


def test_starting_to_eat_fish_again_replaces_a_vegetarian_diet(fresh_ledger):
    r, facts = revise(fresh_ledger, "I'm vegetarian", "I started eating fish again")
    assert (r.decision, facts.get("I'm vegetarian")) == ("supersede", None), r.explanation


def test_a_qualifier_added_to_a_value_is_another_case(fresh_ledger):
    r, facts = revise(fresh_ledger, "My gym is open until 10pm", "My gym is open until 11pm on weekends")
    assert (r.decision, facts.get("My gym is open until 10pm")) == ("add", "current"), r.explanation


def test_weekdays_said_as_replaced_move_the_schedule(fresh_ledger):
    r, facts = revise(fresh_ledger, "我每周一三五去健身房", "我改成每周二四去健身房了")
    assert (r.decision, facts.get("我每周一三五去健身房")) == ("supersede", None), r.explanation


@pytest.mark.parametrize("text,parts,days", [
    ("我每周一三五去健身房", {}, {"monday", "wednesday", "friday"}),
    ("星期二、四有课", {}, {"tuesday", "thursday"}),
    ("每周三次", {"every": {"0.429"}}, set()),  # three times a week (a rate per day), not Wednesday
    ("我三天后去北京出差", {}, set()),  # a time from now, which the relative-time reading resolves
    ("周一到周五我都上班", {}, {"weekday"}),
])
def test_chinese_weekdays_and_times_from_now_are_not_numbers(text, parts, days):
    vp = value_parts(text)
    assert {k: set(v) for k, v in vp.parts.items() if v and k != "unit"} == parts
    assert set(vp.qualifiers.get("day", ())) == days


def test_weekdays_are_not_numerals_inside_words():
    assert zh_numerals("我改成每周二四去健身房了") == set()
    assert zh_numerals("我研二了") == {"二"}


def test_a_pasted_document_is_not_compared_place_by_place():
    # the comparison's cost grows with the square of the length: a document is a memory, not a reworded sentence
    from ledger.attributes import MAX_COMPARED_UNITS, substitution

    long_old = " ".join(f"word{i}" for i in range(MAX_COMPARED_UNITS + 10))
    assert substitution(long_old, long_old.replace("word5 ", "other ")) is None
    assert insertion(long_old, long_old + " more") is None
    assert substitution("I live in York", "I live in Leeds") == ("york", "leeds")


@pytest.mark.parametrize("old,new", [
    ("I'm allergic to penicillin", "I'm not allergic to penicillin"),
    ("我对青霉素过敏", "我对青霉素不过敏"),  # 不过敏 is a negation, not 不过 (but)
    ("我对花生过敏", "其实我对花生不过敏"),
])
def test_the_opposite_said_in_a_slot_is_never_a_reaffirmation(fresh_ledger, old, new):
    r, facts = revise(fresh_ledger, old, new, user=f"a{abs(hash(new)) % 10**6}")
    assert (r.decision, facts.get(new), facts.get(old)) == ("supersede", "current", None), r.explanation


def test_another_verb_is_another_attribute(minilm_ledger):
    ml = minilm_ledger
    ml.remember("cam", "I live in Boston", observed_at=T1)
    r = ml.remember("cam", "I work in Cambridge now", observed_at=T2)
    facts = {f.text: f.status for f in ml.profile("cam").facts.values()}
    assert facts.get("I live in Boston") == "current", r.explanation


def test_a_statement_at_the_length_limit_is_remembered_with_its_evidence_clipped(fresh_ledger):
    from ledger.schemas import MAX_TEXT

    ml = fresh_ledger
    ml.remember("long", "I live in Boston", observed_at=T1)
    text = "b " * ((MAX_TEXT - 20) // 2) + "I live in Paris"
    assert len(text) <= MAX_TEXT
    r = ml.remember("long", text, observed_at=T2)
    assert r.decision == "supersede" and all(len(h.reason or "") < 5000 for h in ml.history("long", r.key))


@pytest.mark.parametrize("text", ["\u200b\u200b", "\u00ad", " \u3000 "])
def test_a_text_that_shows_nothing_is_refused_as_text(fresh_ledger, text):
    from ledger.errors import BadInput

    head = fresh_ledger.head()
    with pytest.raises(BadInput) as err:
        fresh_ledger.remember("u", text)
    assert (err.value.field, err.value.problem, fresh_ledger.head()) == ("text", "is empty", head)


@pytest.mark.parametrize("old,new,decision", [
    ("我每周二、周四浇花", "我每周二浇花", "supersede"),  # fewer days: the days are the value
    ("我家猫的名字叫球球", "我家猫叫团团", "add"),  # another name: never reaffirmed away
    ("My gate code is 1234#", "My gate code is 1234*", "supersede"),  # a keypad symbol is part of the code
])
def test_what_only_a_day_a_chinese_name_or_a_symbol_says_is_not_reaffirmed_away(fresh_ledger, old, new, decision):
    r, facts = revise(fresh_ledger, old, new, user=f"u{abs(hash(old + new))}")
    assert (r.decision, facts.get(new)) == (decision, "current"), r.explanation


def test_a_name_after_jiao_ends_its_clause():
    assert value_parts("我家猫叫团团").parts.get("name") == frozenset({"团团"})
    assert not value_parts("我叫外卖了").parts.get("name") and not value_parts("他叫什么来着吧").parts.get("name")
    assert value_parts("My gate code is 1234#").parts.get("code") == frozenset({"1234#"})
