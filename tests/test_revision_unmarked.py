"""A change said with no word of change (ledger/unmarked.py), one job at a time (work.employer / work.occupation),
a statement inside a request, and the value readings these rest on (docs/resolution.md)."""

from __future__ import annotations

import pytest

from ledger.slots import type_statement
from ledger.unmarked import specific_days
from ledger.values import value_parts
from tests.test_revision_phrasings import revise as revise_between

NEUTRAL = ("The sunset tonight was this ridiculous orange-pink color.", "今天回南天，墙上都是水珠")


def revise(ml, old: str, new: str):
    return revise_between(ml, old, new, between=NEUTRAL)


@pytest.mark.parametrize("old,new,rule", [
    ("The combination on my bike lock is 4-7-1-9.", "Bike lock code: 2286. Don't tell my roommate.",
     "unmarked_change"),
    ("我钓鱼一般都去西郊水库", "明天降温不知道鱼还开不开口，反正我照常去青龙湖那个老钓位蹲一天", "unmarked_change"),
    ("阳台那几盆花我都是周六早上浇水", "每周三吃完晚饭给绿萝多肉它们喂点水", "unmarked_change"),
    ("我们读书会每个月第一个周六在钟书阁碰头",
     "周六读书会我想带点零食过去你推荐点啥，我们这阵子都是在小林家客厅聚的，她家地方大", "unmarked_change"),
    ("Our book club meets at the Riverside Library branch on the first Tuesday of the month.",
     "What's an easy snack to bring on Tuesday? Book club gets together at Hannah's house on Linden Avenue these "
     "days and she always feeds us, so I'd like to bring something nice.", "value_replaced"),
    ("I teach chemistry at a high school in Tacoma.",
     "Can you help me word an out-of-office message? I'm a pharmacist at St. Luke's and I'll be away from the 12th "
     "to the 19th.", "job_changed"),
    ("我在美团做产品经理，主要负责外卖那块。", "入职字节第一周，光开会就开了二十多个，头都大了。", "job_changed"),
    ("每天挤地铁2号线去上班，累死", "骑小电驴到公司二十来分钟，路上还能吹吹风", "value_changed"),
    ("我早饭一般就是楼下买个煎饼果子", "最近早饭都是自己在家煮燕麦，加点蓝莓，省钱还健康", None),
    ("The garage keypad code is 4471, I keep forgetting it so just noting it here.", "garage keypad: 9032", None),
    ("我每周三晚上去上陶艺课", "陶艺课挪到周日下午了，周三老加班去不了", "unmarked_change"),  # the old day named too
    ("I live in Portland, been here about six years now and honestly still love it.",
     "My apartment in Denver has the worst water pressure, any tips for getting a decent shower?", None),
    ("我在杭州住，就西湖边上，挺方便的", "我在成都租的房子离地铁站就五分钟，还挺满意的", None),
    ("我每天坐地铁2号线上班", "每天骑电动车去公司，二十分钟就到", None),
    ("I live in Manchester", "any tips for my new flat in Leeds?", None),  # a question that takes it for granted
    ("I live in Manchester", "Moving into my new place in Leeds tomorrow, any packing tips?", None),
    ("我住在上海", "刚搬到杭州，有什么好吃的推荐吗？", None),
    ("My debit card PIN is 4821", "PIN: 9913", "unmarked_change"),  # PIN names a kind of code, not a thing
    ("My email is jo@old.com", "jo.smith@newmail.com is the best email for me", "unmarked_change"),  # the one holder
    ("I have two coffees a day", "Down to one coffee a day", None),  # "down to" says the count changed
    ("我35岁", "我今年36了", None),
    ("my barber's a guy called Remy at Sharp Edge on Cole Street",
     "My barber is Tomasz, he's got a little two-chair place next to the launderette on Mill Road.", None),
    ("我家在成都，住武侯区，离地铁站走路五分钟", "我住苏州工业园区，金鸡湖旁边那一片", None),
    ("I basically run on flat whites, two a day minimum", "My standard order is a large iced oat chai, every morning.",
     None),
    # a linked person's thing named anywhere in the sentence, here inside a question: about that person
    ("My son Theo has swimming lessons on Saturday mornings at 9.",
     "What's a good snack to pack for Theo's Wednesday 4:30 swim lesson? He always comes out absolutely starving.",
     "unmarked_change"),
])


def test_the_new_value_replaces_the_old(minilm_ledger, old, new, rule):
    r, facts = revise(minilm_ledger, old, new)
    assert (r.decision, facts.get(old), facts.get(new)) == ("supersede", None, "current"), r.explanation
    assert rule is None or f"by rule {rule}:" in r.explanation
    assert all(facts.get(b) == "current" for b in NEUTRAL)


@pytest.mark.parametrize("old,new,decision", [
    ("我养了一只柯基叫团子，三岁，腿短短的超可爱", "团子上周走了……查出来肾衰，没救回来。暂时不想再养了", "retire"),
    ("I volunteer at the Eastside food bank every Thursday evening, mostly sorting tins",
     "I've stepped away from the food bank completely — did my last Thursday shift, just can't fit it in anymore",
     "retire"),
    ("in my Thursday pottery class I'm on wheel 6, the one by the window",
     "actually no, I'm on wheel 9 — wheel 6 is the one Priya uses, I always get them muddled", "correct"),
])
def test_the_old_statement_stops_or_is_corrected(minilm_ledger, old, new, decision):
    r, facts = revise(minilm_ledger, old, new)
    assert (r.decision, facts.get(old), facts.get(new)) == (decision, None, "current"), r.explanation
@pytest.mark.parametrize("old,new", [
    ("My running shoes are size 10", "My dress shoes are a size 9.5"),  # another modifier of the noun: another case
    ("At the downtown office my desk is on floor 5", "At the Oakland office I sit on floor 2"),
    ("在北京办公室我坐5楼", "去上海办公室的时候我坐12楼"),
    ("I rent a storage unit at SafeKeep, unit B-19", "the storage unit is $85 a month, autopay on the 1st"),
    ("I rent unit 214 at the Public Storage on Route 9.", "Stopped by unit 214 on Sunday to grab the camping gear."),
    ("I work at Google in the Dublin office", "Title-wise I'm a senior UX researcher, mostly on the Maps team"),
    ("平时上班我坐公交", "下雨天我就打车去公司"),  # the weather names a case, as a season does
    ("我钓鱼一般都去西郊水库", "明天我去青龙湖钓鱼"),  # one outing, not the habit
    ("I have a cat named Miso", "We adopted a beagle called Pepper last weekend"),
    ("My rent is 1,900 a month", "My landlord raised the rent on my storage unit to 150"),
    ("工作日早上我都要喝一杯冰美式，不然醒不过来", "周末就不喝美式了，一般在家慢慢泡杯拿铁"),  # another case stops
    ("I live in Paris", "My alarm code at home is 4411"),  # "home is 4411" says nothing of where home is
    ("I live in Berlin", "Before I moved here I lived in Paris for ten years"),  # a past home
    ("I take my vitamins at 8am", "In the evening I take magnesium at 9pm"),  # a clock time alone is no topic
    ("我去罗马的航班9:40起飞", "回程航班18:05起飞"),
    ("I'm a software engineer", "I work for Spotify now"),  # one job said twice: no workplace was held
    ("I live in Denver", "Should I move to Boston? I love the mountains."),
    ("My debit card PIN is 4821", "My credit card PIN is 1234"),
    ("My work email is a@acme.com", "For personal stuff use alexkim88@gmail.com"),  # another case
    ("My cell is 415-555-0182", "My brother's number is 415-555-9999"),
    ("My personal mobile is 07911 123 456", "For anything work-related, use my office line, 0161 496 0732"),
    ("On weekdays I run the canal loop, about 6k", "Weekends I do the longer route up Kestrel Hill and back"),
    ("我的邮箱是 mei@example.com", "My phone number is 07700 900123"),  # a phone number is no new e-mail address
    ("I keep the thermostat at 20 degrees at night", "daytime thermostat: 22 degrees"),  # day and night: two cases
    ("晚上空调我开到26度", "白天空调开24度"),
    ("I was born in Porto", "I was born on 3 March 1990"),  # a birthplace and a birth date
])
def test_both_stay_current(minilm_ledger, old, new):
    r, facts = revise(minilm_ledger, old, new)
    assert (facts.get(old), facts.get(new)) == ("current", "current"), r.explanation


@pytest.mark.parametrize("old,new", [
    ("My kombucha SCOBY gets fresh sweet tea every 10 days.", "I refresh the scoby's tea roughly once every ten days."),
    ("我是小学语文老师", "我在小学教语文的"),  # 语文 is a school subject, not a language
])
def test_said_again_in_other_words(minilm_ledger, old, new):
    r, facts = revise(minilm_ledger, old, new)
    assert r.decision == "reaffirm" and facts.get(old) == "current", r.explanation


@pytest.mark.parametrize("text,flags", [
    ("It's been three months since my last cigarette and I'm not going back.", {"cessation"}),
    ("We had to put Biscuit down on Tuesday.", {"cessation"}),
    ("Put the phone down please", set()),
    ("I put my name down for the trip", set()),
    ("Ended up getting a Honda Civic", {"change"}),
    ("That's up to you", set()),  # "ended up" says what replaced it, not that it stopped
])
def test_stops_said_another_way(text, flags):
    t = type_statement(text)
    assert {n for n in ("correction", "cessation", "change") if getattr(t, n)} == flags


def test_a_run_said_in_kilometres_is_a_paraphrase_not_a_new_number(minilm_ledger):
    r, facts = revise(minilm_ledger, "I run 5k every Sunday", "Every Sunday I go for a five kilometre run")
    assert facts.get("I run 5k every Sunday") == "current", r.explanation


@pytest.mark.parametrize("text,expected", [
    ("I run 5k every Sunday", "number=5, unit=km, day:weekend"),
    ("Every Sunday I go for a five kilometre run", "number=5, unit=km, day:weekend"),
    ("I earn 50k", "number=50000"),
    ("I refresh it once every ten days", "every=0.1"),  # how often, as a rate per day: once in ten days
    ("I swim once a week", "every=0.143"),
    ("I ran 10 kilometers", "number=10, unit=km"),
    ("I bank with Bank of America", "name=bank of america"),
    ("My debit card PIN is 4821", "number=4821"),
    ("The kids' bedtime is 8 now", "time=08:00"),  # a clock said of a time
    ("bedtime is 8 years away", "number=8, unit=y"),
    ("I bank with IBM", "name=ibm"),
    ("At the Oakland office I sit on floor 2", "name=oakland, number=2"),  # "of" never ends a name
    ("我钓鱼一般都去西郊水库", "name=西郊水库"),
    ("麻将只在老刘家打哈", "name=老刘家"),
    ("我去超市买菜", "none"),  # a place noun alone names no place
    ("下雨天我就打车去公司", "season:rain"),
    ("我的车位在负二层218号", "code=B2, number=218"),  # 负二层 is the level written B2
    ("我的车停在B2的218号位", "code=B2, number=218"),
])
def test_value_readings(text, expected):
    assert value_parts(text).describe() == expected


def test_specific_days_are_values_and_categories_are_not():
    assert specific_days("I water the plants on Sunday mornings") == {"sunday"}
    assert specific_days("每周三吃完晚饭浇水，周六也浇") == {"wednesday", "saturday"}
    assert specific_days("On weekends and weekdays alike") == frozenset()


@pytest.mark.parametrize("text,mood", [
    ("What's an easy snack to bring on Tuesday? Book club gets together at Hannah's house these days, so I'd like "
     "to bring something nice.", "statement"),
    ("I might move to Berlin next year. The rents there are crazy.", "tentative"),  # no value stated apart
    ("Can you recommend a snack? I'd like to bring something nice.", "question"),
])
def test_a_clause_that_states_apart_from_the_question_or_wish(text, mood):
    assert type_statement(text).mood == mood


@pytest.mark.parametrize("text,slot,subject", [
    ("I teach chemistry at a high school in Tacoma.", "work.occupation", "self"),
    ("我在小学教语文的", "work.occupation", "self"),
    ("My apartment in Denver has the worst water pressure.", "residence.city", "self"),
    ("我在成都租的房子离地铁站就五分钟", "residence.city", "self"),
    ("每天骑电动车去公司，二十分钟就到", "commute", "self"),
    ("garage keypad: 9032", None, "self"),  # a note of a label and one value is the user's own
    ("I'm a member at PureGym on Station Road", None, "self"),  # a member is no employee
    ("my barber's a guy called Remy", "person.hairdresser", "self"),  # "'s a" is "is a"
    ("My barber's daughter is a nurse", None, "hairdresser"),
    ("我住苏州工业园区，金鸡湖旁边那一片", "residence.city", "self"),
    ("我住院了", None, "self"),
])
def test_slots_and_subjects(text, slot, subject):
    t = type_statement(text)
    assert (t.slot, t.subject) == (slot, subject)
