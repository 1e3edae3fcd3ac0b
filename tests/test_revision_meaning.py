"""Belief revision read from meaning and from how values are written: a statement said again in other words
(by far the nearest in meaning, every value equal) reaffirms, a marker that revises a memory held outside the
statement's slot still finds it, and values written in other forms read equal (docs/resolution.md)."""

from __future__ import annotations

import pytest

from ledger.slots import type_statement
from ledger.value_words import abbreviates
from ledger.values import value_parts

T1, T2 = "2024-01-01T09:00:00Z", "2024-02-01T09:00:00Z"
NEUTRAL = ("It rained all afternoon.", "Watched a documentary about whales.", "今天中午吃了牛肉面")


def revise(ml, user: str, old: str, new: str):
    ml.remember(user, old, observed_at=T1)
    for n in NEUTRAL:
        ml.remember(user, n, observed_at=T1)
    r = ml.remember(user, new, observed_at=T2)
    facts = {f.text: f.status for f in ml.profile(user).facts.values()}
    assert all(facts.get(n) == "current" for n in NEUTRAL), facts
    return r, facts


@pytest.mark.parametrize("old,new", [
    ("我是O型血", "血型的话我是O型"),
    ("我是O型血", "血型的话我是O型，献血的时候测过"),  # a remark holding no value beside the fact said again
    ("我的快递一般都放小区东门的菜鸟驿站", "包裹我都让快递员放东门那个菜鸟驿站，回家顺路就拿了"),
    ("I always play the same lottery numbers: 4, 11, 19, 27, 33, 42",  # "never changes" says it holds
     "my lottery line never changes — eleven, four, twenty-seven, forty-two, nineteen and thirty-three"),
    ("我每个月给我妈转1500生活费", "每月给老妈打一千五当生活费"),
    ("My bike lock combo is 3-8-1-5.", "note to self: bike lock combination = 3815"),
    # a language opening the sentence is its topic, not a person the sentence is about
    ("I speak Portuguese and a bit of Italian.", "Portuguese is the one I'm good at; my Italian is pretty basic."),
])
def test_the_same_thing_in_other_words_reaffirms(minilm_ledger, old, new):
    r, facts = revise(minilm_ledger, f"p{abs(hash(old)) % 10**6}", old, new)
    assert r.decision == "reaffirm", r.explanation
    assert facts.get(old) == "current"


@pytest.mark.parametrize("old,new", [
    # close in meaning, but a value, a negation or a person differs: never a reaffirmation (nothing said is lost)
    ("我每次剪头都找理发店的阿杰", "头发只让阿杰剪，别人剪我不放心"),  # it adds a negated clause
    ("我是O型血", "血型的话我是O型，2019年献血的时候测过"),  # a clause of its own holding a value: kept beside
    ("我的牙医是刘医生", "刘医生是市口腔医院正畸科的，我这副牙套就是她给我戴的"),  # it says where she works
    ("I'm 183 cm tall.", "I'm one metre eighty-one now, apparently."),
    ("My bike lock combo is 3-8-1-5.", "My bike lock combo is 3-8-1-6."),
    ("我的体检约在5月20号上午", "我爸的体检定在5月27号早上八点"),
    ("I stopped drinking coffee last year.", "I drink a coffee every morning."),
    ("我家猫叫咪咪，三岁了", "咪咪最近不爱吃猫粮"),
    ("I speak Portuguese and a bit of Italian.", "My Italian teacher Marco says my Portuguese accent shows."),
])
def test_near_in_meaning_with_something_new_is_never_a_reaffirmation(minilm_ledger, old, new):
    r, facts = revise(minilm_ledger, f"n{abs(hash(old + new)) % 10**6}", old, new)
    assert r.decision != "reaffirm", r.explanation
    assert facts.get(new) in ("current", "contested")


@pytest.mark.parametrize("old,new,decision", [
    ("我体检约的是5月12号。", "我记错日子了，体检其实是5月21号，周三上午。", "correct"),
    ("You can send the invite to jonah.reyes@fastmail.com.",
     "wait I typed that wrong, it's jonahreyes@fastmail.com — no dot between the names.", "correct"),
    ("我在一家外贸公司做会计", "我跳槽了，去了一家游戏公司做财务分析", "supersede"),
    ("我每天坐2号线去上班。", "每天早上挤10号线去公司，人多到脚都不用沾地。", "supersede"),
    ("I'm pescatarian, fish is the only meat I eat.",
     "I'm vegan, so could you swap the honey in that recipe for something else?", "supersede"),
    # a stop naming part of a compound word ("hive" of "beehive", "gym" of "CityGym"), said with the day it happened
    ("I keep three beehives behind my uncle's barn.", "sold all the hives to a neighbour on Saturday, done with bees",
     "retire"),
    ("I have a membership at CityGym near the station.", "I cancelled my gym membership this morning.", "retire"),
    # a note naming the topic and another value, with no one named and no word of change
    ("I set the fridge to 4 degrees because the milk kept spoiling.", "fridge setting: 3 degrees, milk lasts longer",
     "supersede"),
    ("我家空调夏天一直开 26 度。", "空调夏天 24 度，睡得舒服点", "supersede"),
    # a clause joined by "and", "rain or shine": no two values, so the change is recorded, not left to confirm
    ("I cycle to work at 7:15 every day, rain or shine.", "moved my ride to 6:40 so I can catch the early meeting",
     "supersede"),
    # a move said in passing: a question about the new place, then a sentence that drops its "I" (or a clause, 刚搬过来)
    ("I rent a room in Glasgow near the university.",
     "Where can I buy cheap furniture for a two-bed house in Cardiff? Just got the keys on Friday.", "supersede"),
    ("我住在厦门思明区，楼下就是菜市场。", "大连夏天哪里海鲜便宜？刚搬过来三周，还不太熟。", "supersede"),
    ("我住在成都高新区。", "深圳哪里逛街方便？刚拿到新房钥匙", "supersede"),
    # the wrong value said as how it was mistyped, found inside a Chinese word (每周三)
    ("儿子的围棋课在每周三下午四点。", "抱歉，围棋课是周五下午四点，我前面写成周三了。", "correct"),
    # a note whose label is written short ("pw" of "password")
    ("my router admin password is BlueHeron77", "router admin pw: RedFinch!4", "supersede"),
    # a dose of the same medicine in the same unit, though the first statement was filed in a list
    ("I take 20mg of fluoxetine every morning.", "The psychiatrist raised my fluoxetine to 40mg from Monday.",
     "supersede"),
])
def test_a_revision_reaches_the_memory_it_revises(minilm_ledger, old, new, decision):
    r, facts = revise(minilm_ledger, f"r{abs(hash(old)) % 10**6}", old, new)
    assert r.decision == decision, r.explanation
    assert facts.get(old) is None and facts.get(new) == "current", facts


@pytest.mark.parametrize("text,described", [
    ("the combo is 3-8-1-5", "number=3815"),
    ("door code 0-4-2-0", "code=0420"),
    ("闺女差一刻八点到学校", "time=07:45"),
    ("晚上差十分十点睡", "time=21:50"),
    ("我们家俩狗子", "number=2"),
    ("我每天坐2号线去上班。", "number=2"),  # a line's number, not the 2nd of the month
    ("主要负责外卖那块", "none"),  # 那块 is "that part", not an amount of yuan
    ("我一块儿去", "none"),
    ("五公斤", "number=5, unit=kg"),
    ("call me on 555-1234", "phone=5551234"),
    # a height in metres is the same number of centimetres; "1.5m" of a budget stays a million
    ("one metre eighty-three", "number=183, unit=cm"),
    ("I'm 1.83m tall", "number=183, unit=cm"),
    ("我身高一米七五", "number=175, unit=cm"),
    ("一米八的个子", "number=180, unit=cm"),
    ("the budget is 1.5m", "number=1500000"),
])
def test_values_written_in_other_forms(text, described):
    assert value_parts(text).describe() == described


def test_short_forms_of_name_words():
    assert abbreviates("St.", "Street") and abbreviates("ave", "avenue") and abbreviates("dr", "doctor")
    assert not abbreviates("Mt", "Street") and not abbreviates("Street", "St")
    assert value_parts("Dr. Okafor over on Beacon St.").describe().startswith("name=")


@pytest.mark.parametrize("text,slot,subject,mood", [
    ("我是一名高中语文老师。", "work.occupation", "self", "statement"),
    ("我在美团做产品经理，主要负责外卖那块。", "work.occupation", "self", "statement"),
    ("一直给我剪头的是Tony老师", None, "self", "statement"),  # a hairdresser called 老师 is no occupation
    ("我是研一学生", "education", "self", "statement"),
    ("我爱人在市第一人民医院当护士。", "work.occupation", "spouse", "statement"),
    ("我家猫叫咪咪，三岁了", "pet", "self", "statement"),  # the cat's age, not the user's
    ("I'm vegan, so could you swap the honey in that recipe for something else?", "diet", "self", "statement"),
    ("Do you think I should move?", None, "self", "question"),
    ("我是不是该换工作？", None, "self", "question"),
])
def test_typing_reads_jobs_spouses_pets_and_statements_before_a_request(text, slot, subject, mood):
    t = type_statement(text)
    assert (t.slot, t.subject, t.mood) == (slot, subject, mood)


@pytest.mark.parametrize("text", ["wait I typed that wrong, it's 0420", "我记错日子了，是21号", "我跳槽了"])
def test_markers_of_a_typo_a_misremembered_day_and_a_job_switch(text):
    t = type_statement(text)
    assert t.correction or t.change


@pytest.mark.parametrize("old,new,decision,current", [
    # a code said digit by digit is no age, so a later age leaves it alone
    ("My bike lock combo is 3-8-1-5", "I'm 34 years old", "new", ("My bike lock combo is 3-8-1-5", "I'm 34 years old")),
    # "too" adds beside, even when only the number differs
    ("I take the 42 bus to work", "I take the 7 bus too", "add", ("I take the 42 bus to work", "I take the 7 bus too")),
    # repeating a memory and adding a clause keeps what it adds, beside it
    ("My wifi password is tiger123", "My wifi password is tiger123 and my router is in the kitchen", "add",
     ("My wifi password is tiger123", "My wifi password is tiger123 and my router is in the kitchen")),
    # the same time written another way is no change
    ("My kid's school starts at 7:40", "My kid's school starts at twenty to eight", "reaffirm",
     ("My kid's school starts at 7:40",)),
])
def test_nothing_said_is_lost_and_nothing_unchanged_is_a_change(minilm_ledger, old, new, decision, current):
    r, facts = revise(minilm_ledger, f"k{abs(hash(old + new)) % 10**6}", old, new)
    assert r.decision == decision, r.explanation
    assert all(facts.get(t) == "current" for t in current), facts


def test_a_locker_code_at_the_gym_is_no_hobby_and_no_age():
    assert type_statement("My locker code at the gym is 2222").slot is None
    assert type_statement("My suitcase combination is 3-8-1").slot is None
    assert type_statement("My son is 7").slot == "profile.age"


def test_a_closed_vocabulary_fact_shows_its_values_as_written(fresh_ledger):
    fresh_ledger.remember("u1", "I speak English and Portuguese")
    fresh_ledger.remember("u1", "我会说普通话、粤语和英语")
    fresh_ledger.remember("u1", "I am allergic to peanuts and shellfish")
    facts = fresh_ledger.profile("u1", allow_sensitive=["health"], purpose="test").facts
    shown = sorted((f.attribute, f.extracted_value) for f in facts.values())
    assert shown == [("allergy", "peanut, shellfish"), ("language", "English, Portuguese"),
                     ("language", "普通话, 粤语, 英语")]


@pytest.mark.parametrize("text,qualifiers", [
    # when something happened is no case of it
    ("I cancelled it this morning", {}), ("sold them on Sunday", {}), ("上周六把车卖了", {}), ("yesterday evening I quit", {}),
    # which mornings or days are cases: another one is a sibling, not a replacement
    ("I drink coffee in the mornings", {"tod": {"morning"}}), ("I go to church on Sunday", {"day": {"weekend"}}),
    ("我每周六去练车", {"day": {"weekend"}}),
])
def test_an_occasion_is_not_a_case(text, qualifiers):
    assert {k: set(v) for k, v in value_parts(text).qualifiers.items()} == qualifiers


def test_compound_words_and_derived_nouns_share_their_part():
    from ledger.slots import compound_shared

    assert compound_shared({"hive", "sold"}, {"beehive", "barn"}) == {"hive"}
    assert compound_shared({"gym", "membership"}, {"citygym", "member"}) == {"gym", "membership"}
    assert compound_shared({"car"}, {"card", "carpet"}) == set()  # a prefix alone is another word
    assert compound_shared({"ox"}, {"box"}) == set()  # too short to be a part


@pytest.mark.parametrize("text,subject", [
    ("Any tips for a cheap sofa? Just moved into a flat in Leeds.", "self"),  # a later sentence drops its "I"
    ("哪里能买到便宜的沙发？刚搬过来。", "self"),
    ("The cafe near the office serves a great latte.", "none"),
    ("公司楼下新开了家面馆。她说很好吃", "none"),  # a later "she" is whoever was named, not the user
])
def test_who_a_statement_is_about_is_read_in_each_sentence(text, subject):
    assert type_statement(text).subject == subject


def test_idioms_of_no_are_no_negation():
    assert not value_parts("猫吃着也没意见").negated and not value_parts("英文没问题").negated
    assert value_parts("我没养猫").negated


@pytest.mark.parametrize("text,cessation", [("我开的是一辆黑色思域，开了四年了", False),
                                             ("车子上个月卖了，不打算再买了", True)])
def test_a_car_said_by_its_model_and_sold_as_the_car_is_one_slot(text, cessation):
    typed = type_statement(text)
    assert (typed.slot, typed.cessation) == ("vehicle", cessation)
