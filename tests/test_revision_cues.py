"""What a statement's words say before any memory is compared: "again" is not "also", a statement followed by a
question still states, a correction said by the wrong figure, ages written with spaces, set phrases whose numerals
count nothing (docs/resolution.md)."""

from __future__ import annotations

import pytest

from ledger.slots import type_statement
from ledger.values import value_parts, zh_numerals

T1, T2 = "2024-01-01T09:00:00Z", "2024-02-01T09:00:00Z"


@pytest.mark.parametrize("text,additive", [
    ("豆包今天又把我拖鞋叼跑了", False),  # 又 = again
    ("吃素没坚持下去，上周开始又正常吃肉了", False),
    ("这阵子上班都坐 10 号线，人少还有座位。", False),  # 还有 = there are still
    ("我又养了一只猫", True),  # 又养 = got another
    ("我还有一个妹妹", True),
    ("还有，我也喜欢喝茶", True),
])
def test_again_is_not_also(text, additive):
    assert type_statement(text).additive is additive


@pytest.mark.parametrize("text,mood", [
    ("Payslip came through after the annual review: 46k before tax. Can we redo the budget with that?", "statement"),
    ("Marcus, my boyfriend, wants to plan our first trip together. Thinking Lisbon in May?", "statement"),
    ("Do you know where I live?", "question"),
    ("I moved. Where should I put the boxes?", "question"),  # too short to state anything of its own
])
def test_a_sentence_said_then_one_asked_is_a_statement(text, mood):
    assert type_statement(text).mood == mood


@pytest.mark.parametrize("text,slot_key,correction", [
    ("刚才报错了，我今年 26，不是 27，白白给自己多加了一岁。", "profile.age", True),
    ("我今年 27 岁。", "profile.age", False),
    ("我今年30个项目", None, False),
])
def test_a_correction_by_the_wrong_figure_and_ages_with_spaces(text, slot_key, correction):
    t = type_statement(text)
    assert (t.slot_key, t.correction) == (slot_key, correction)


@pytest.mark.parametrize("text,numbers,numerals", [
    ("楼下那家奶茶店最对我胃口，隔三差五就去一趟", set(), set()),
    ("这事我百分之百确定", set(), set()),
    ("我每周三次去游泳", set(), {"三"}),  # a frequency (three a week), read as a rate, not the number 3
])
def test_set_phrases_count_nothing(text, numbers, numerals):
    assert set(value_parts(text).parts.get("number", ())) == numbers
    assert zh_numerals(text) == numerals


def test_a_time_where_the_memory_holds_none_is_another_aspect(minilm_ledger):
    ml = minilm_ledger
    old = "我在小区门口那家瑜伽馆办了年卡。"
    ml.remember("yoga", old, observed_at=T1)
    r = ml.remember("yoga", "瑜伽馆通知说下个月起周一闭馆，营业时间改成早九点到晚九点。", observed_at=T2)
    facts = {f.text: f.status for f in ml.profile("yoga").facts.values()}
    assert facts.get(old) == "current", r.explanation


def test_a_chinese_clause_of_its_own_is_never_reaffirmed_away(minilm_ledger):
    ml = minilm_ledger
    new = "刘医生是市口腔医院正畸科的，我这副牙套就是她给我戴的。"
    ml.remember("dentist", "我的牙医是刘医生。", observed_at=T1)
    r = ml.remember("dentist", new, observed_at=T2)
    facts = {f.text: f.status for f in ml.profile("dentist").facts.values()}
    assert r.decision != "reaffirm" and facts.get(new) == "current", r.explanation


@pytest.mark.parametrize("text,slot_key", [
    ("入职字节第一周，光开会就开了二十多个，头都大了。", "work.employer"),  # a dropped subject opening with 入职
    ("上个月转岗成功了，现在做产品经理，开会开到头秃", "work.occupation"),
    ("I'm a junior UX designer, been doing it about two years.", "work.occupation"),
    ("Got the promotion! Officially senior UX designer from Monday.", "work.occupation"),
    ("Big news, we finally did the move — got a flat near the river in Ljubljana", "residence.city"),
    ("Spent the whole weekend unpacking boxes in our Aberdeen flat", "residence.city"),
    ("这周末终于把杭州新家的东西都收拾完了", "residence.city"),
    ("我们的新家很大", None),  # no place named
    ("入口处有个保安", None),  # 入 opens no job
])
def test_a_new_job_or_home_said_by_what_happened(text, slot_key):
    assert type_statement(text).slot_key == slot_key


@pytest.mark.parametrize("text,slot_key", [
    ("我现在在一家咖啡店当店长", "work.occupation"),  # a coffee shop is no drink
    ("我在银行当柜员", "work.occupation"),
    ("我喜欢喝咖啡", "preference.drink"),
])
def test_a_coffee_shop_job_is_a_job(text, slot_key):
    assert type_statement(text).slot_key == slot_key


@pytest.mark.parametrize("text,slot_key", [
    ("I'm 82 kg at the moment, aiming to get under 80 by summer.", "profile.weight"),  # no age
    ("Stepped on the scales this morning: 77.5.", "profile.weight"),
    ("我现在体重 68 公斤，想减到 60 以下。", "profile.weight"),
    ("早上上秤一看，63 公斤，总算没白饿。", "profile.weight"),
    ("My son weighs 30 kg", None),  # no bare "weighs": a suitcase weighs too
    ("My suitcase weighs 23 kg", None),
    ("I weigh 82 kg", "profile.weight"),
    ("I need to weigh my options", None),
    ("我的行李箱20公斤", None),
    ("I'm 34", "profile.age"),
])
def test_a_body_weight_is_its_own_slot(text, slot_key):
    t = type_statement(text)
    assert (t.slot_key, t.sensitivity if slot_key else None) == (slot_key, "health" if slot_key and "weight" in
                                                                   slot_key else None)


@pytest.mark.parametrize("text,slot_key", [
    ("Started at Monzo last month — same kind of analytics work but way less commuting.", "work.employer"),
    ("The 73 gets me to the office in twenty minutes flat", "commute"),
    ("My commute is an hour", "commute"),
    ("坚持了一个多月，今早上秤71.5，开心", "profile.weight"),  # a dropped subject opening with 坚持
])
def test_less_commuting_is_no_commute_and_a_bus_that_gets_me_to_work_is(text, slot_key):
    assert type_statement(text).slot_key == slot_key


@pytest.mark.parametrize("old,new", [
    ("I'm 82 kg at the moment.", "Stepped on the scales this morning: 77.5. Goal smashed."),
    ("我现在体重 68 公斤。", "早上上秤一看，63 公斤，总算没白饿。"),
    ("My salary's 42k before tax, for context on the budget.",
     "Payslip came through after the annual review: 46k before tax. Can we redo the budget with that?"),
    ("My salary's 52k a year before tax.", "Got my review back and they bumped me up to 58,500!! finally"),
    ("我月薪一万二", "涨薪了，现在月薪一万五"),
])
def test_a_new_weight_or_salary_replaces_the_old_one(fresh_ledger, old, new):
    ml = fresh_ledger
    user = f"w{abs(hash(old)) % 10**6}"
    ml.remember(user, old, observed_at=T1)
    r = ml.remember(user, new, observed_at=T2)
    facts = {f.text: f.status for f in ml.profile(user, allow_sensitive=["health"], purpose="test").facts.values()}
    assert (r.decision, facts.get(new), facts.get(old)) == ("supersede", "current", None), r.explanation


def test_a_salary_card_is_no_salary():
    assert type_statement("我的工资卡是工行的").slot_key is None
    assert type_statement("我的工资每月15号发").slot_key == "work.salary"
