"""Everyday phrasings of a change, a stop or a correction that name neither the slot's cue words nor a marker of the
usual kind ("Sold the Mazda", "handed plot 16 back", "that's Leeds done", "spelled my own email wrong", 领证, 打成王了),
and phrasings that look like one and are not ("my umbrella turned inside out", 换别人我不放心: someone else, if it
were) (docs/resolution.md)."""

from __future__ import annotations

import itertools

import pytest

from ledger.slots import type_statement

T0, T1, T2 = "2024-01-01T09:00:00Z", "2024-01-02T09:00:00Z", "2024-02-01T09:00:00Z"
_users = itertools.count()


@pytest.mark.parametrize("text,flags", [
    ("Sorry, I spelled my own email wrong: it's dan.hollins@fastmail.com.", {"correction"}),
    ("我刚说的车次不对，是G7382，老是把这俩数字记混。", {"correction"}),
    ("不对，是汪老师，我刚才打成王了。", {"correction"}),
    ("Sold the Mazda last weekend; it's buses from here on.", {"cessation"}),
    ("I handed plot 16 back to the council in October.", {"cessation"}),
    ("Since Priya and I split up I've been seeing Hannah.", {"cessation"}),
    ("可乐送回老家给我爸妈养了。", {"cessation"}),
    ("I've gone over to aisle seats in the quiet coach.", {"change"}),
    ("上周五和小何去民政局领证了。", {"change"}),
    ("I turned 40 last week.", {"change"}),
    ("My umbrella turned inside out on the walk back, classic.", set()),
    ("I subscribe to the New York Times", set()),  # "new" in a name says no change
    ("I got a new phone", {"change"}),
    ("He turned the music down.", set()),
    ("头发一直都是阿杰给我剪的，换别人我不放心。", set()),
    ("猫粮一直喂的渴望，换别的牌子它闻都不闻。", set()),
])
def test_markers(text, flags):
    t = type_statement(text)
    assert {n for n in ("correction", "cessation", "change") if getattr(t, n)} == flags


def test_a_stop_keeps_the_words_of_what_it_stops():
    # the marker spans "handed ... back": the object inside it is what was handed back, a value
    assert {"plot", "16"} <= type_statement("I handed plot 16 back to the council in October.").value_tokens


@pytest.mark.parametrize("text,slot,subject", [
    ("First week at Monzo has been a blur, the onboarding there is no joke.", "work.employer", "self"),
    ("Finally got the keys to our place in Bristol on Friday, so that's Leeds done.", "residence.city", "self"),
    ("上周五和小何去民政局领证了，终于不用被催了。", "relationship.status", "self"),
    ("我养了只柯基叫可乐，三岁了。", "pet", "self"),  # the dog's age, not the user's
    ("Since Priya and I split up I've been seeing Hannah, and it's going well.", "relationship.status", "self"),
])
def test_slots(text, slot, subject):
    t = type_statement(text)
    assert (t.slot, t.subject) == (slot, subject)


def test_a_name_after_seeing_is_a_partner_only_when_it_ends_the_phrase():
    assert type_statement("I've been seeing Priya at the same shop, she's better.").slot != "relationship.status"
    assert type_statement("I've been seeing a physio for my knee.").slot is None


def revise(ml, old: str, new: str, between: tuple[str, ...] = ()):
    user = f"p{next(_users)}"
    ml.remember(user, old, observed_at=T0)
    for b in between:
        ml.remember(user, b, observed_at=T1)
    r = ml.remember(user, new, observed_at=T2)
    facts = {f.text: f.status for f in ml.profile(user).facts.values()}
    return r, facts


@pytest.mark.parametrize("old,new,decision", [
    ("I live in Leeds, in a terraced house near Hyde Park.",
     "Finally got the keys to our place in Bristol on Friday, so that's Leeds done after eight years.", "supersede"),
    ("I'm a data analyst at Ocado, mostly working on delivery forecasting.",
     "First week at Monzo has been a blur, the onboarding there is no joke.", "supersede"),
    ("You can send the invoice to dan.hollis@fastmail.com.",
     "Sorry, I spelled my own email wrong: it's dan.hollins@fastmail.com, with an n before the s.", "correct"),
    ("I drive a 2016 Mazda 3, the grey hatchback.",
     "Sold the Mazda last weekend; it's buses and the car club from here on.", "retire"),
    ("On the Edinburgh train I always book 23A in coach B, the window seat with a table.",
     "I've gone over to aisle seats in the quiet coach for the Edinburgh run, 41C in coach E if it's free.",
     "supersede"),
])
def test_the_old_statement_is_no_longer_current_and_the_new_one_is(minilm_ledger, old, new, decision):
    r, facts = revise(minilm_ledger, old, new)
    assert (r.decision, facts.get(old), facts.get(new)) == (decision, None, "current"), r.explanation


def test_an_umbrella_turning_inside_out_changes_nothing(minilm_ledger):
    fog = "The fog this morning was so thick I couldn't see the end of the street."
    r, facts = revise(minilm_ledger, "I pay £10.99 a month for the Criterion Channel.",
                      "My umbrella turned inside out on the walk back, classic.", between=(fog,))
    assert r.decision == "new" and facts.get(fog) == "current", r.explanation


def test_a_negation_about_someone_else_is_no_change_of_the_memory(minilm_ledger):
    old = "我剪头发一直找阿杰，就在万达三楼那家店。"
    r, facts = revise(minilm_ledger, old, "头发一直都是万达三楼的阿杰给我剪的，换别人我不放心。")
    assert r.decision != "supersede" and facts.get(old) == "current", r.explanation


@pytest.mark.parametrize("text,names", [
    ("My boyfriend Tom is hopeless with directions.", {"tom"}),
    ("Marcus, my boyfriend, wants to plan our first trip together.", {"marcus"}),
    ("Since Priya and I split up I've been seeing Hannah, and it's going well.", {"hannah"}),
    ("Honestly, my husband is a saint.", set()),  # a sentence opener is no name
    ("My ex-boyfriend Tom called last night.", set()),
    ("我男朋友叫陈浩，他是个游戏迷。", {"陈浩"}),
    ("下个月想和男朋友周毅去厦门玩几天。", {"周毅"}),
    ("我老公是程序员。", set()),  # an occupation, not a name
    ("I'm now dating someone named Casey", {"casey"}),
    ("My partner's name is Jordan.", {"jordan"}),
    ("我现在在和李明约会", {"李明"}),
    ("My boyfriend is Tom", {"tom"}),
    ("Not with Tom anymore, I'm seeing Alex now", {"alex"}),
    ("I'm seeing Priya at the same shop", set()),  # the name must end the phrase
    ("I'm seeing Dr. Patel.", set()),
    ("My wife is a nurse", set()),
])
def test_partner_names(text, names):
    from ledger.revision_cues import partner_names

    assert partner_names(text) == names


@pytest.mark.parametrize("old,new,replaced", [
    ("My boyfriend Tom is hopeless with directions, we got lost twice on holiday.",
     "Marcus, my boyfriend, is taking me to Lisbon in May.", True),
    ("My girlfriend Priya and I are planning a trip to Lisbon in May.",
     "Since Priya and I split up in the spring I've been seeing Hannah, and honestly it's going really well.", True),
    ("My boyfriend Tom is hopeless with directions.", "Tom, my boyfriend, got us lost again today.", False),
    ("My wife Anna and I live in Berlin.", "My husband Tom is a chef.", False),  # the city is not lost
    ("My boyfriend Tom loves hiking", "I've been seeing Hannah", True),  # what was said of the partner
    ("我男朋友叫陈浩", "我现在在和李明约会", True),
])
def test_another_name_for_the_partner_replaces_the_memory(minilm_ledger, old, new, replaced):
    r, facts = revise(minilm_ledger, old, new)
    assert (facts.get(old) is None, facts.get(new)) == (replaced, "current"), r.explanation


@pytest.mark.parametrize("text,slot", [
    ("CRANE is my first guess in Wordle, every single time.", None),  # "single" is no relationship status
    ("I'm single and not looking.", "relationship.status"),
    ("我在小区后面租了块菜地，种了小白菜和葱", None),  # a vegetable plot is no cuisine
    ("我爱吃川菜", "preference.food"),
    ("My cell is 415-555-0182 if you need it for the form.", "contact.phone"),
    ("Put 628-555-0349 down as my mobile.", "contact.phone"),
    ("联系电话填 159 8765 4321 就行", "contact.phone"),
    ("My mobile phone is an iPhone 15.", "device.phone"),
    ("My work phone number is 555-0199", "contact.work_phone"),  # the work line is not the user's own mobile
    ("我办公电话是010-12345678", "contact.work_phone"),
    ("我是小学语文老师，带三年级", "work.occupation"),
    ("I'm 183 cm tall.", None),  # a height is no age
    ("I'm 34", "profile.age"),
    ("My locker at the pool is 57", None),  # a thing's number is no age
    ("My seat in the office is 42", None),
    ("My son is 7", "profile.age"),
    ("He is 34", "profile.age"),
])
def test_more_slots(text, slot):
    assert type_statement(text).slot == slot


@pytest.mark.parametrize("text,slot,mood", [
    ("I stopped going to yoga", "hobby", "statement"),  # going, not a plan: a stop
    ("I'm going to move to Berlin", "plan", "tentative"),
    ("I switched my phone plan to Orange", None, "statement"),  # a phone plan is no plan of the user's
    ("I plan to move to Berlin", "plan", "tentative"),
])
def test_going_to_and_a_phone_plan(text, slot, mood):
    t = type_statement(text)
    assert (t.slot, t.mood) == (slot, mood)


def test_a_question_then_a_statement_states():
    t = type_statement("Can you help me word an out-of-office message? I'm a pharmacist at St. Luke's.")
    assert t.mood == "statement"
    assert type_statement("Can you help me word an out-of-office message?").mood == "question"
    assert type_statement("Lily's piano lessons are with Mr. Alvarez, I got mixed up before.").correction


@pytest.mark.parametrize("a,b,same", [
    ("I've been married to Priya for eight years.", "Priya's my spouse, 8 years married.", True),
    ("I'm 34", "I'm thirty-four years old", True),  # years are implied, as a currency is
    ("我自行车锁的密码是0527", "单车锁密码零五二七哈", True),  # digits said one by one
    ("The code is 0527", "单车锁密码零五二八", False),
    ("I weigh 82", "I weigh 82 kg", False),  # a unit of measure is new
])
def test_values_written_another_way(a, b, same):
    from ledger.values import differing, value_parts

    assert (not differing(value_parts(a), value_parts(b))) is same


@pytest.mark.parametrize("old,new,decision,old_current", [
    ("My cell is 415-555-0182 if you need it for the form.", "Put 628-555-0349 down as my mobile.",
     "supersede", False),
    ("I drink oolong from a little tea shop in Chinatown.", "I only drink the oolong in the afternoons.",
     "add", True),  # the same value narrowed to a time of day: both true
    ("My daughter Lily's piano teacher is Mrs. Henderson.",
     "Lily's piano lessons are with Mr. Alvarez, I got mixed up before, Mrs. Henderson was her teacher two years ago.",
     "correct", False),
])
def test_revised_end_to_end(minilm_ledger, old, new, decision, old_current):
    r, facts = revise(minilm_ledger, old, new)
    assert (r.decision, facts.get(old) == "current", facts.get(new)) == (decision, old_current, "current"), \
        r.explanation
