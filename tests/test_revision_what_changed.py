"""What a change is about: a part of a thing put in new, more said of the people a memory lists, a word that only
looks like a marker ("交换", "不被投诉了", "way too much"); corrections that name the wrong value or say the digits
were swapped; who a Chinese statement with no pronoun is about; moves said in passing (docs/resolution.md)."""

from __future__ import annotations

import pytest

from ledger.slots import type_statement
from tests.test_revision_meaning import revise


@pytest.mark.parametrize("old,new", [
    # the memory lists two children; the statement says more of each: both stay
    ("We have two kids, Noah and Ella.", "Noah just started kindergarten and Ella's in third grade now."),
    # a part of the memory's thing put in new is not the thing replaced
    ("养了一缸孔雀鱼，大概三十条", "孔雀鱼那缸换了个新过滤器，水清多了，鱼也欢"),
    ("I keep guppies in a tank in the living room.", "Got a new filter for the guppy tank, the water is so clear now."),
    # 交换 is an exchange term, not 换 (a change); 不被投诉了 says the complaints stopped, not the room
    ("我妹妹佳佳在读大学，学机械的", "佳佳下个月去德国交换半年，机械专业的名额就两个"),
    ("我们乐队的排练室在创意园 B 栋地下室", "B 栋地下室排练室新装了隔音棉，打鼓终于不被投诉了"),
])
def test_a_change_of_something_else_leaves_the_memory_current(minilm_ledger, old, new):
    r, facts = revise(minilm_ledger, f"w{abs(hash(old + new)) % 10**6}", old, new)
    assert (facts.get(old), facts.get(new)) == ("current", "current"), r.explanation


@pytest.mark.parametrize("old,new,right", [
    ("The wifi password at the cabin is pinecone42.", "sorry, cabin wifi pw is pinecone24, I swapped the digits",
     "pinecone24"),
    ("我儿子豆豆生日是 6 月 18 号", "哎打错了，豆豆生日是 8 月 16，不是 6 月 18", "8 月 16"),  # the wrong date named
    ("我对花生过敏", "啊我记混了，过敏的是芒果不是花生，花生随便吃没事", "芒果"),  # an allergy shows its value
])
def test_a_correction_corrects_the_memory_it_names(minilm_ledger, old, new, right):
    user = f"c{abs(hash(old + new)) % 10**6}"
    r, _ = revise(minilm_ledger, user, old, new)
    assert r.decision == "correct", r.explanation
    # an allergy is labelled health: the operator's view shows its text
    facts = {f.text: f.status for f in minilm_ledger.profile(user, allow_sensitive=["health"],
                                                             purpose="test").facts.values()}
    assert facts.get(old) is None and facts.get(new) == "current" and right in new, facts


@pytest.mark.parametrize("old,new,key", [
    ("We live in Bristol, been here about three years now.",
     "what should I cook for my new flatmates in Leeds? two of them are vegetarian lol", "residence.city"),
    ("现在住杭州滨江这边，离公司走路十分钟", "成都这边新租的房子要添点啥家电啊，求推荐", "residence.city"),
    # a cousin named in the first statement; the new job said before a question about a gift
    ("我表妹小雨在字节做产品经理。", "小雨下周一去腾讯报到，送她点啥入职礼物好？", "family.cousin.work.occupation"),
])
def test_a_move_or_a_new_job_said_in_passing_replaces_the_old(minilm_ledger, old, new, key):
    r, facts = revise(minilm_ledger, f"m{abs(hash(old + new)) % 10**6}", old, new)
    assert (r.decision, r.key, facts.get(old), facts.get(new)) == ("supersede", key, None, "current"), r.explanation


@pytest.mark.parametrize("text,subject", [
    ("明天第一天去幼儿园上班带小班，好紧张", "self"),  # a dropped 我: the user's own
    ("现在住杭州滨江这边", "self"),
    ("提了辆比亚迪海豹，朗逸已经卖给同事了", "self"),
    ("买房的人越来越少了", "none"),  # a remark on the world, not the user
    ("玩具店关门了", "none"),
    ("我表妹小雨在字节做产品经理", "cousin"),
    ("我舅舅在深圳开出租", "uncle"),
])
def test_who_a_chinese_statement_without_a_pronoun_is_about(text, subject):
    assert type_statement(text).subject == subject


@pytest.mark.parametrize("text,additive", [
    ("Fiddle leaf fig is on a once-a-week schedule, it was drooping way too much.", False),
    ("it was too expensive so I cancelled", False),
    ("I like tea too.", True),
])
def test_too_adds_only_where_it_means_as_well(text, additive):
    assert type_statement(text).additive is additive


def test_a_sold_car_said_with_who_bought_it_stops_the_car():
    assert type_statement("朗逸已经卖给同事了").cessation


@pytest.mark.parametrize("a,b,same", [
    ("every 10 days", "十天浇一回", True),
    ("once a week", "一周浇一次", True),
    ("每两周浇一次水", "半个月浇一回水", True),  # two weeks and half a month: one frequency said loosely
    ("twice a week", "每周两次", True),
    ("every 10 days", "once-a-week", False),
    ("three times a week", "twice a week", False),
])
def test_a_frequency_is_a_rate_whatever_its_words(a, b, same):
    from ledger.values import differing, value_parts

    va, vb = value_parts(a), value_parts(b)
    assert va.parts["every"] and vb.parts["every"]
    assert ("every" not in differing(va, vb)) is same


def test_a_weekday_is_no_frequency():
    from ledger.values import value_parts

    assert not value_parts("每周三晚上去上陶艺课").parts.get("every")


@pytest.mark.parametrize("old,new", [
    ("The fiddle leaf fig gets watered every 10 days.",
     "Fiddle leaf fig is on a once-a-week schedule, it was drooping way too much."),
    ("家里那盆龟背竹一般一周浇一次水", "龟背竹十天浇一回就够了，之前浇太勤根都有点烂"),
    ("I go to the gym three times a week.", "Gym twice a week these days, work is crazy."),
    ("健身房储物柜我一直用 56 号", "柜子 203，别再忘了"),  # a short note naming only the memory's topic
])
def test_another_frequency_or_number_for_the_same_topic_replaces_it(minilm_ledger, old, new):
    r, facts = revise(minilm_ledger, f"f{abs(hash(old + new)) % 10**6}", old, new)
    assert (r.decision, facts.get(old), facts.get(new)) == ("supersede", None, "current"), r.explanation


def test_a_chinese_amount_before_a_count_of_months_is_read_apart():
    from ledger.values import value_parts

    assert value_parts("税前一万二一个月，不多不少").parts["number"] == {"12000"}


@pytest.mark.parametrize("text", ["Second Hand Smoke Alarm is done, we played our last gig Friday",
                                  "we called it quits after ten years", "the band split up in May"])
def test_a_band_or_a_team_that_is_done_has_stopped(text):
    assert type_statement(text).cessation


def test_a_clock_time_said_with_the_habit_is_that_time():
    from ledger.values import value_parts

    assert value_parts("Clint Yeastwood gets fed at eight every morning.").parts["time"] == {"08:00"}
    assert value_parts("I take two every night").parts.get("time") in (None, frozenset())  # a count, no clock


def test_a_first_day_at_another_workplace_is_the_job_changed(minilm_ledger):
    old, new = "我在一家外贸公司当会计", "明天第一天去幼儿园上班带小班，好紧张，怎么跟三岁小孩打交道啊"
    r, facts = revise(minilm_ledger, "firstday", old, new)
    assert (r.decision, facts.get(old), facts.get(new)) == ("supersede", None, "current"), r.explanation


@pytest.mark.parametrize("text,slot", [
    ("Marco moved to Portland so I've been seeing Priya at the same shop", None),  # Marco's move
    ("Gave up coffee completely for matcha lattes", "preference.drink"),  # a dropped "I", no name
    ("First week at Monzo has been a blur", "work.employer"),
])
def test_a_clause_about_someone_named_is_not_the_users_slot(text, slot):
    assert type_statement(text).slot == slot


def test_someone_elses_move_leaves_the_users_city(minilm_ledger):
    old = "I live in Seattle, near Green Lake."
    r, facts = revise(minilm_ledger, "u-seattle", old, "Marco moved to Portland so I've been seeing Priya at the same "
                                                    "shop, honestly she's better.")
    assert facts.get(old) == "current", r.explanation


@pytest.mark.parametrize("old,new", [
    ("My phone number is 555-9876", "My old number was 555-1234, don't use it"),  # a past value, not the current
    ("我儿子小宝每周一上游泳课", "小宝周三的游泳课取消了"),  # another day's lesson stopped
    ("我住在广州", "小李搬到广州了"),  # someone else's move
    ("我在银行上班", "老王辞职了，去了腾讯"),  # someone else's job
])
def test_what_is_said_of_another_time_day_or_person_leaves_the_memory(minilm_ledger, old, new):
    r, facts = revise(minilm_ledger, f"o{abs(hash(old + new)) % 10**6}", old, new)
    assert facts.get(old) == "current", r.explanation


@pytest.mark.parametrize("old,new,decision,key", [
    ("My dentist is Dr. Patel", "Sorry, my dentist is Dr. Shah, not Dr. Patel", "correct", "person.dentist"),
    ("I work as a nurse", "As a new paralegal at Fisher & Co, what should I read first?", "supersede",
     "work.occupation"),
    ("I work as a nurse", "Any tips for surviving my first week as a paralegal at Fisher & Co?", "supersede",
     "work.occupation"),
])
def test_a_correction_or_a_job_taken_for_granted_revises(minilm_ledger, old, new, decision, key):
    r, _ = revise(minilm_ledger, f"j{abs(hash(old + new)) % 10**6}", old, new)
    assert (r.decision, r.key) == (decision, key), r.explanation


def test_who_treats_the_user_is_labelled_health_in_any_slot():
    assert type_statement("My therapist appointment is every Tuesday at 5pm").sensitivity == "health"
    assert type_statement("我的心理医生姓王").sensitivity == "health"
    assert type_statement("I am a doctor").sensitivity is None  # the user's job, not who treats them


def test_how_the_user_feels_about_a_fact_is_kept_beside_it(minilm_ledger):
    old, new = "I work as a nurse", "I don't like my job as a nurse much"
    r, facts = revise(minilm_ledger, "attitude", old, new)
    assert (r.decision, facts.get(old), facts.get(new)) == ("add", "current", "current"), r.explanation
