"""Changes said in passing, by the new value alone: a home placed in another city ("the aberdeen place", 杭州这梅雨季…
衣服晾不干), a car of another make ("the tyres on my Kia Niro"), another number of the same numbered thing ("moved me
to unit 318"), the first week of a new job; and what such a statement must never do: take a trip for a move, a
question about the memory for the memory said again, a gym's locker for the office's (docs/resolution.md)."""

from __future__ import annotations

import pytest

from ledger.owned import owned_car
from ledger.places import home_city
from ledger.slots import type_statement
from ledger.value_words import numbered_nouns
from ledger.values import value_parts
from tests.test_revision_meaning import revise


def _user(old: str, new: str) -> str:
    return f"q{abs(hash(old + new)) % 10**7}"


@pytest.mark.parametrize("text,city", [
    ("the glasgow place has a damp problem, any tips?", "glasgow"),
    ("our new flat in Manchester gets zero light", "manchester"),
    ("York has been home for a decade", "york"),
    ("here in Dublin it never stops raining", "dublin"),
    ("南京这几天太热了，家里空调开了一整天", "南京"),
    # a trip, a city named without a home, a word that is a city only with its capital
    ("we're visiting Glasgow next week, any good restaurants?", None),
    ("下周去南京出差，那边有什么好吃的", None),
    ("I love Manchester United", None),
    ("our place in reading is tiny", None),
    # a home left is no home, and two homes named are a move the words of moving say
    ("Handed the Manchester flat back on Friday.", None),
    ("sold our place in York last year", None),
    ("our flat in Bristol is great, the glasgow place is freezing", None),
])
def test_the_city_a_home_is_placed_in(text, city):
    assert home_city(text) == city


@pytest.mark.parametrize("text,owned", [
    ("the brakes on my Skoda Octavia squeal", True),
    ("我那台比亚迪冬天掉电快不快", True),
    ("is a Kia Niro worth it?", False),
    ("my focus is shot today", False),
    ("my golf swing needs work", False),
])
def test_a_car_owned_is_read_by_its_make(text, owned):
    assert (owned_car(text) is not None) == owned


@pytest.mark.parametrize("text,nouns", [
    ("my storage unit is 214", {"unit"}),
    ("bike locker number 9", {"locker"}),
    ("我住5号楼", {"楼"}),
    # an amount, a distance or a time numbers nothing
    ("I run 5k at 7am", set()),
    ("I paid 300 for it", set()),
])
def test_the_noun_a_number_names(text, nouns):
    assert numbered_nouns(text) == frozenset(nouns)


@pytest.mark.parametrize("text,times", [
    ("my son has judo at half six on thursday evenings", {"18:30"}),
    ("我女儿每天晚上8:30睡觉", {"20:30"}),
    ("I take my pills at 8am and 8 at night", {"08:00", "20:00"}),
    ("I wake at 6:30 every morning", {"06:30"}),
    # a part of the day said far from the time is not the time's
    ("pickup is 3:40 from next week, can you help me move my afternoon meetings", {"03:40"}),
])
def test_a_clock_time_beside_the_evening_is_in_the_evening(text, times):
    assert value_parts(text).parts.get("time") == frozenset(times)


def test_also_in_an_exclamation_or_a_concession_adds_nothing():
    # 也太 is "far too", 说…也不算 a concession: neither adds a value beside the memory
    assert not type_statement("成都这夏天也太热了吧").additive
    assert not type_statement("房租一个月三千，说贵也不算贵").additive
    assert type_statement("我也喜欢喝茶").additive


def test_how_long_a_value_has_held_is_no_change():
    assert not type_statement("Leeds has been home for years now").change
    assert type_statement("I live in Bristol now").change


@pytest.mark.parametrize("old,new", [
    ("I live in Sheffield, moved here for work", "the glasgow place has a damp problem, any tips for the bathroom?"),
    ("我住在苏州，园区那边", "南京这几天太热了，家里空调开了一整天，电费怎么省"),
    ("I drive a Honda Jazz", "how often should the cambelt be changed on my Skoda Octavia?"),
    ("我开的是一辆本田飞度", "我那台比亚迪海豚冬天掉电快不快？"),
    ("I'm a barista at a café on Queen Street", "first week at the bank done, the suits are a shock"),
    ("I live in Manchester, got a flat just off Piccadilly.",
     "Finally got the keys to the place in Leeds, boxes are all in. Handed the Manchester flat back on Friday."),
], ids=["home-en", "home-zh", "car-en", "car-zh", "new-job", "home-left"])
def test_a_change_said_in_passing_supersedes(minilm_ledger, old, new):
    r, facts = revise(minilm_ledger, _user(old, new), old, new)
    assert (r.decision, facts.get(old), facts.get(new)) == ("supersede", None, "current"), r.explanation


@pytest.mark.parametrize("old,new", [
    ("My stuff's in storage unit 12 on Dock Road", "they moved me to unit 40 after the flood, same building"),
    ("My rent is £900 a month", "landlord says it's going up to £975 from june 😩 is that even legal?"),
])
def test_another_number_of_the_same_thing_supersedes(minilm_ledger, old, new):
    r, facts = revise(minilm_ledger, _user(old, new), old, new)
    assert (r.decision, facts.get(old), facts.get(new)) == ("supersede", None, "current"), r.explanation


@pytest.mark.parametrize("old,new", [
    # a question about the memory's value is kept beside it, never taken for the memory said again
    ("I live in Bristol", "any tips for keeping our flat in Bristol warm this winter?"),
    ("I drive a Toyota Corolla", "how often should I rotate the tyres on my Corolla?"),
    # news of the same home or car, said in passing, is neither the memory said again nor another value
    ("I live in Leeds", "our flat in Leeds has a mould problem in the bathroom"),
    ("我住在杭州", "杭州这几天太热了，家里空调一直开着"),
    ("I drive a Tesla Model 3", "my tesla's battery is degrading faster than I expected"),
    ("我开的是比亚迪汉", "我那台比亚迪今天去做了保养，花了八百"),
    # a trip is no move
    ("I live in Leeds", "we're visiting Bristol next week, any good restaurants?"),
    # another place's locker is a sibling, not a replacement
    ("my locker at the office is number 12", "at the leisure centre pool i always grab locker 48"),
])
def test_what_is_said_beside_the_memory_keeps_both(minilm_ledger, old, new):
    r, facts = revise(minilm_ledger, _user(old, new), old, new)
    assert (facts.get(old), facts.get(new)) == ("current", "current"), r.explanation


def test_a_correction_opening_with_hang_on_corrects(minilm_ledger):
    old, new = "I'm allergic to walnuts", "no hang on, it's pecans i react to. walnuts are fine"
    user = _user(old, new)
    minilm_ledger.remember(user, old)
    r = minilm_ledger.remember(user, new)
    assert r.decision == "correct", r.explanation


def test_the_same_amount_of_another_thing_is_kept_beside(minilm_ledger):
    # 也是两千二: another fee of the same amount, never the first said again
    old, new = "我家物业费一年两千二", "车位管理费一年也是两千二"
    r, facts = revise(minilm_ledger, _user(old, new), old, new)
    assert (facts.get(old), facts.get(new)) == ("current", "current"), r.explanation


def test_on_the_way_to_a_place_names_no_road():
    assert "name" not in value_parts("每天去公司路上得花90分钟左右").parts


def test_a_teacher_named_by_surname_is_replaced_by_another(minilm_ledger):
    # 老师姓周 names 周老师: 陈老师 of the same lessons is another teacher; 周老师 again is the same one
    old = "我的钢琴老师姓周，教得特别耐心"
    r, facts = revise(minilm_ledger, "zhou1", old, "跟陈老师上了两节钢琴课了，她抠指法抠得特别细，我手都酸了")
    assert (r.decision, facts.get(old)) == ("supersede", None), r.explanation
    r, facts = revise(minilm_ledger, "zhou2", old, "周老师今天夸我指法进步了")
    assert facts.get(old) == "current", r.explanation
    assert value_parts(old).parts["name"] == frozenset({"周老师"})


@pytest.mark.parametrize("text", ["My seat in the office is 42", "it's my civic duty", "my Puma trainers are done",
                                  "my A4 notebook"])
def test_a_make_that_is_a_common_word_names_no_car(text):
    assert owned_car(text) is None


@pytest.mark.parametrize("old,new", [
    # a move or a new job said in a clause of its own is stated, whatever plan follows it
    ("我哥王磊在苏州工作，做外贸的", "王磊跳槽去无锡了，说那边房价便宜不少，准备今年买房"),
    ("我开的是一辆白色卡罗拉", "换了新车了，比亚迪汉"),
])
def test_a_change_said_beside_a_plan_or_by_a_new_car_supersedes(minilm_ledger, old, new):
    r, facts = revise(minilm_ledger, _user(old, new), old, new)
    assert (r.decision, facts.get(old), facts.get(new)) == ("supersede", None, "current"), r.explanation


@pytest.mark.parametrize("old,new", [
    ("我的电动车是雅迪的", "雅迪今天换了个新电瓶，花了六百多，跑得比以前远了"),
    ("I drive a Toyota Corolla", "the Corolla got new tyres today, feels like a different car now"),
])
def test_a_part_put_in_new_keeps_the_thing(minilm_ledger, old, new):
    r, facts = revise(minilm_ledger, _user(old, new), old, new)
    assert (facts.get(old), facts.get(new)) == ("current", "current"), r.explanation


@pytest.mark.parametrize("text,kind,values", [
    ("network GoatNet_5G, password on the back", "code", {"GoatNet_5G"}),  # no 5 grams inside an identifier
    ("家里网络的名字叫“别蹭了谢谢”", "name", {"别蹭了谢谢"}),  # a quoted name, as written
    ("I take 50g of oats", "number", {"50"}),
])
def test_identifiers_and_quoted_names_are_read_whole(text, kind, values):
    assert value_parts(text).parts.get(kind) == frozenset(values)


def test_a_capital_inside_a_code_is_no_name():
    assert "name" not in value_parts("我家wifi名字叫ChinaNet-8Xk2").parts


def _facts(ml, user):
    return {f.text: f for f in ml.profile(user).facts.values()}


def test_a_part_put_in_new_never_replaces_the_car_held(minilm_ledger):
    ml = minilm_ledger
    for text in ("I drive a Toyota Corolla", "tyres on my Skoda Octavia are worn"):
        ml.remember("parts1", text)
    r = ml.remember("parts1", "the Corolla got new tyres")
    facts = _facts(ml, "parts1")
    assert r.decision == "add", r.explanation
    assert facts["tyres on my Skoda Octavia are worn"].status == "current"
    assert (facts["tyres on my Skoda Octavia are worn"].attribute,
            facts["tyres on my Skoda Octavia are worn"].extracted_value) == ("car", "Skoda")


def test_a_question_about_a_second_home_moves_no_one(minilm_ledger):
    ml = minilm_ledger
    for text in ("I live in Glasgow", "we also have a flat in Bristol"):
        ml.remember("second1", text)
    r = ml.remember("second1", "any tips for our flat in Bristol?")
    assert r.decision == "add", r.explanation
    assert _facts(ml, "second1")["I live in Glasgow"].status == "current"


@pytest.mark.parametrize("old,new", [
    ("我住在上海", "搬到南京以后通勤方便多了"),
    ("I drive a Toyota Corolla", "just bought a Skoda Octavia"),
    ("我开的是丰田卡罗拉", "我的斯柯达明锐轮胎该换了"),
    ("im on an iphone 11 and the battery is dead by lunch", "pixel 8 lasts me a full day easy"),
    ("我用的华为mate40，电池不太行了", "小米14拍夜景真的绝了，续航比我之前那台强太多"),
])
def test_a_move_a_car_or_a_phone_said_in_passing_supersedes(minilm_ledger, old, new):
    r, facts = revise(minilm_ledger, _user(old, new), old, new)
    assert (r.decision, facts.get(old), facts.get(new)) == ("supersede", None, "current"), r.explanation


@pytest.mark.parametrize("text,slot", [
    ("我的储物柜号码是112", None),  # a locker's 号码 is no phone number
    ("我的手机号码是13812345678", "contact.phone"),
    ("我开的是丰田卡罗拉", "vehicle"),
    ("我的车是丰田卡罗拉", "vehicle"),
    # the car's colour or its insurance names no car
    ("我的车是白色的", None),
    ("我的车险每年11月到期", None),
])
def test_the_slot_of_a_locker_and_a_car(text, slot):
    assert type_statement(text).slot == slot


def test_what_a_home_said_in_passing_shows(minilm_ledger):
    minilm_ledger.remember("shown1", "I live in Leeds")
    minilm_ledger.remember("shown1", "the glasgow place is freezing, tips?")
    fact = _facts(minilm_ledger, "shown1")["the glasgow place is freezing, tips?"]
    assert (fact.status, fact.attribute, fact.extracted_value) == ("current", "home city", "Glasgow")


@pytest.mark.parametrize("old,new", [
    ("我开的是白色大众朗逸，开了五年了", "比亚迪海豹开起来是真的爽，小区充电桩充一晚上就满了"),
    ("我住成都，高新区这边", "深圳这夏天也太热了吧🥵 我住西丽，每天坐哪条地铁最不挤啊"),
])
def test_a_car_or_a_home_named_beside_daily_life_supersedes(minilm_ledger, old, new):
    r, facts = revise(minilm_ledger, _user(old, new), old, new)
    assert (r.decision, facts.get(old), facts.get(new)) == ("supersede", None, "current"), r.explanation


def test_the_one_before_says_this_one_replaced_it():
    # 也 beside 比我之前那台 adds nothing: the phone said in passing replaced the one before
    assert not type_statement("小米14拍夜景真的绝了，续航也比我之前那台强太多").additive


@pytest.mark.parametrize("old,new,decision", [
    ("my son Alfie goes to Oakfield Primary", "sorry not oakfield, it's Oakwood Primary, i always mix the two up",
     "correct"),
    ("our beagle Rufus is 14 now", "we said goodbye to rufus on sunday. house is so quiet without him", "retire"),
])
def test_sorry_not_corrects_and_a_goodbye_stops(minilm_ledger, old, new, decision):
    r, facts = revise(minilm_ledger, _user(old, new), old, new)
    assert (r.decision, facts.get(old)) == (decision, None), r.explanation


def test_a_colleague_named_is_someone_else():
    assert type_statement("同事老张的工位是A-31，就在我斜对面").subject == "other"


def test_the_first_week_of_a_new_job_ends_a_job_filed_by_its_hours(minilm_ledger):
    old = "I work as a nurse at St Mary's, mostly night shifts"
    new = "First week done as a pharmacy technician at Boots, regular daytime hours"
    r, facts = revise(minilm_ledger, _user(old, new), old, new)
    assert (r.decision, facts.get(old), facts.get(new)) == ("supersede", None, "current"), r.explanation
    assert "job_changed" in r.explanation
