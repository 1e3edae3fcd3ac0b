"""Belief revision outside the catalogue, one case per behaviour (docs/resolution.md): what a statement is about and
what it says decide whether it replaces, adds to or sits beside a current memory. Each case is a fault once seen."""

from __future__ import annotations

import pytest

T1, T2 = "2024-01-01T09:00:00Z", "2024-02-01T09:00:00Z"


def two(ml, old: str, new: str):
    a = ml.remember("u", old, observed_at=T1)
    r = ml.remember("u", new, observed_at=T2)
    facts = {f.text: f.status for f in ml.profile("u").facts.values()}
    return a, r, facts


@pytest.mark.parametrize("old,new", [
    ("My wifi password is tulip88", "My wifi password is Tulip88"),  # a password's case is part of it
    ("My wifi password is tulip88", "My wifi password is tulip-88"),
    ("My gym locker number is 112", "My gym locker number is 245"),
    ("My rent is 2,000 a month", "My rent went up from 2,000 to 2,200"),
    ("我家WiFi密码是abc123", "WiFi密码改成xyz789了"),
    ("My bike lock combination is 0718", "My bike lock combination is 2264"),
    ("My work phone number is 020 7946 0011", "My work phone is 020 7946 0388"),  # "number": how it is known
    ("My locker at the pool is number 31", "Locker 57 is mine"),  # the value in the subject, a qualifier in it
    ("My badge id is A-4471", "My badge is A-5190"),
])
def test_a_changed_value_replaces_the_old_one(fresh_ledger, old, new):
    _, r, facts = two(fresh_ledger, old, new)
    assert (r.decision, facts.get(new), facts.get(old)) == ("supersede", "current", None), r.explanation


@pytest.mark.parametrize("old,new", [
    ("I live in Boston", "My meeting got moved to Thursday"),  # "moved to" of a meeting is no move of home
    ("I live in Boston", "My parents live in Chicago"),  # someone else's city
    ("My car is a Tesla", "My car insurance renews in October"),  # another attribute of the slot's topic
    ("我的房租是每月三千", "房租每月1号交"),  # the same noun, a value of another kind (a day of the month)
    ("我在腾讯工作", "我每天九点上班"),  # when work starts is not where
    ("My bank account number is 12345678", "My savings account number is 87654321"),
    ("My rent is 1,900 a month", "My landlord raised the rent on my storage unit to 150"),
    ("My phone number is 555-123-4567", "My landlord's phone number is 555-987-6543"),
])
def test_another_attribute_or_person_leaves_the_old_value_current(fresh_ledger, old, new):
    _, r, facts = two(fresh_ledger, old, new)
    assert (facts.get(old), facts.get(new)) == ("current", "current"), r.explanation


def test_a_statement_longer_than_a_search_query_is_remembered(fresh_ledger):
    from memledger.search import MAX_QUERY

    text = "I keep a long diary entry: " + "we walked by the river and talked. " * 150
    assert len(text) > MAX_QUERY
    r = fresh_ledger.remember("u", text, observed_at=T1)
    assert r.decision == "new" and fresh_ledger.profile("u").facts[r.key].text == text.strip()


def test_what_an_agent_reads_names_the_person_and_the_value(fresh_ledger):
    ml = fresh_ledger
    ml.remember("u", "My sister's locker number is 245", observed_at=T1)
    ml.remember("u", "Should I ask for locker 300?", observed_at=T1)
    said = {f.text: (f.attribute, f.extracted_value) for f in ml.profile("u").facts.values()}
    assert said["My sister's locker number is 245"] == ("sister's locker number", "245")
    assert said["Should I ask for locker 300?"][1] is None  # a question says no value


@pytest.mark.parametrize("old,new", [
    ("I booked the dentist for 3pm on Friday", "Sorry, I got it wrong: the appointment is at 4pm, not 3"),
    ("我车牌号是沪A12345", "刚才说错了，后几位是12354，不是12345"),
    ("The door code at my office is 4471", "I misremembered, it's 4417, not 4471"),
])
def test_a_correction_that_names_the_wrong_value_corrects_the_memory_holding_it(fresh_ledger, old, new):
    _, r, facts = two(fresh_ledger, old, new)
    assert (r.decision, facts.get(new), facts.get(old)) == ("correct", "current", None), r.explanation


@pytest.mark.parametrize("a,b", [("I'm 34", "I'm thirty-four"), ("I'm 50", "I'm fifty years old"),
                                 ("the bus leaves at 7:40 on weekdays", "Monday to Friday the bus leaves at 7:40")])
def test_numbers_in_words_and_weekday_ranges_read_as_written_in_digits(a, b):
    from ledger.values import differing, qualifiers_clash, value_parts

    assert differing(value_parts(a), value_parts(b)) == []
    assert qualifiers_clash(value_parts(a), value_parts(b)) == []


@pytest.mark.parametrize("text,additive", [("我也喜欢喝咖啡", True), ("咪咪上周走了，也算寿终正寝", False),
                                           ("搬家也好，离公司近", False), ("I also play chess", True)])
def test_also_adds_but_ye_suan_is_no_also(text, additive):
    """也 adds ("me too"), but 也算 / 也好 / 也罢 / 也行 / 也是 / 也许 are other words ("can be counted as", "fine")."""
    from ledger.slots import type_statement

    assert type_statement(text).additive is additive


def test_a_companys_shuttle_is_no_work_qualifier():
    """公司的 names a work qualifier only before what a person has at home and at work (phone, e-mail, laptop, ...):
    the company's shuttle bus is the same bus whoever says it."""
    from ledger.values import value_parts

    assert value_parts("公司的班车早上7点40发车").qualifiers == {}
    assert value_parts("公司的电话是123456").qualifiers == {"place": frozenset({"work"})}


@pytest.mark.parametrize("old,new", [
    ("I have a tabby cat called Pickles, he's nine", "Pickles died last month, the house is so quiet now"),
    ("I play five-a-side football every Wednesday night", "I've given up the football, my knee can't take it"),
])
def test_a_cessation_naming_what_stops_retires_it(fresh_ledger, old, new):
    """A name at the start of the sentence is still a name; the clause that says what stopped counts, not the reason
    after it; "five-a-side" names one thing, not five."""
    _, r, facts = two(fresh_ledger, old, new)
    assert r.decision == "retire" and facts.get(old) is None, r.explanation


@pytest.mark.parametrize("old,new", [
    ("please always answer me in French", "Please call me Sam from now on"),
    ("以后回答简短一点", "以后叫我小王"),
])
def test_one_wish_about_how_to_be_served_does_not_replace_another(fresh_ledger, old, new):
    """How to answer and what to call the user are two wishes: the second is added, the first stays."""
    _, r, facts = two(fresh_ledger, old, new)
    assert (facts.get(old), facts.get(new)) == ("current", "current"), r.explanation


@pytest.mark.parametrize("text,time", [("以后回答简短一点", None), ("早一点到", None), ("我一点钟下班", "01:00"),
                                       ("凌晨一点睡", "01:00"), ("一点半开会", "01:30")])
def test_yidian_is_a_bit_unless_it_is_a_time(text, time):
    from ledger.values import value_parts

    assert value_parts(text).parts.get("time") == (frozenset({time}) if time else None)


@pytest.mark.parametrize("text,numbers,names", [
    ("Every Sunday I go for a five kilometre run", {"5"}, set()),  # "a five" holds no extra one
    ("I bought a dozen eggs", {"12"}, set()),
    ("I paid a hundred dollars", {"100"}, set()),
    ("Eagle Ridge is the trail I love hiking most", set(), {"eagle ridge"}),  # a name may open the sentence
    ("On Monday Tony from QuickFix called", set(), {"tony", "quickfix"}),  # a weekday is no name
])
def test_numbers_and_names_read_as_said(text, numbers, names):
    from ledger.values import value_parts

    vp = value_parts(text)
    assert (set(vp.parts.get("number", ())), set(vp.parts.get("name", ()))) == (numbers, names)


@pytest.mark.parametrize("text,correction", [
    ("I speak Portuguese too, not perfectly but enough to get by on holiday", False),  # how, not what
    ("I go running, though not very often", False),
    ("It is Lisbon, not Porto", True),
    ("Actually it's Tuesday, not Wednesday", True),
])
def test_not_before_a_word_of_degree_says_nothing_was_wrong(text, correction):
    from ledger.slots import type_statement

    assert type_statement(text).correction is correction


@pytest.mark.parametrize("text,mood,cessation", [
    ("钢琴课停了，孩子实在不想学", "statement", True),  # 不想学 is no plan to learn
    ("咪咪上周走了，十四岁", "statement", True),  # 走了 ending a clause: gone
    ("我今天走了一万步", "statement", False),  # a walk
    ("我想学日语", "tentative", False),
])
def test_chinese_wishes_and_departures(text, mood, cessation):
    from ledger.slots import type_statement

    t = type_statement(text)
    assert (t.mood, t.cessation) == (mood, cessation)


@pytest.mark.parametrize("old,new,decision", [
    ("Our Slack workspace is called brightco-team", "Our Slack workspace got renamed to brightco-hq", "supersede"),
    ("坐高铁我喜欢靠窗的A座", "坐高铁我现在都选过道的C座了", "supersede"),
    ("The team offsite with Dana is in Lisbon", "The team offsite with Dana has changed", "conflict"),  # no new value
])
def test_a_change_to_the_one_memory_holding_its_words_replaces_it(fresh_ledger, old, new, decision):
    fresh_ledger.remember("u", "I fixed the squeaky hinge on the bathroom cabinet", observed_at=T1)
    _, r, facts = two(fresh_ledger, old, new)
    assert r.decision == decision, r.explanation
    if decision == "supersede":
        assert (facts.get(new), facts.get(old)) == ("current", None)
    assert facts["I fixed the squeaky hinge on the bathroom cabinet"] == "current"


def test_a_sentence_naming_no_one_revises_what_was_said_of_a_child(fresh_ledger):
    _, r, facts = two(fresh_ledger, "我儿子幼儿园早上八点半入园", "幼儿园改了作息，八点就得到")
    assert (r.decision, facts.get("幼儿园改了作息，八点就得到"), facts.get("我儿子幼儿园早上八点半入园")) == (
        "supersede", "current", None), r.explanation


def test_a_question_in_the_slots_words_finds_the_fact(fresh_ledger):
    ml = fresh_ledger
    ml.remember("u", "My mobile number is 07700 900 412", observed_at=T1)
    ml.remember("u", "I got a letter from an old pen pal I haven't heard from in fifteen years", observed_at=T1)
    ml.remember("u", "My mobile is 07700 900 587.", observed_at=T2)
    hits = ml.search("u", "What number should people ring to get hold of me?", k=2)
    assert hits[0].text == "My mobile is 07700 900 587."


@pytest.mark.parametrize("old,new", [
    ("I sing in a community choir on Wednesday evenings.",
     "I've quit the choir. Couldn't keep up with the Wednesday nights on top of everything."),  # a sentence per clause
    ("We've got a tabby cat called Biscuit, she's eleven.", "Biscuit died over the weekend. The house is so quiet."),
])
def test_a_cessation_in_its_own_sentence_retires_what_it_names(fresh_ledger, old, new):
    _, r, facts = two(fresh_ledger, old, new)
    assert (r.decision, facts.get(old)) == ("retire", None), r.explanation


@pytest.mark.parametrize("old,new", [
    ("夏天空调我一般开26度。", "冬天开空调制热的话，我调到22度。"),  # summer and winter: both kept
    ("我工作邮箱是 li.na@huaxin.com。", "私人的事发我163邮箱：lina_1988@163.com。"),  # work and private
])
def test_a_value_under_another_qualifier_replaces_nothing(fresh_ledger, old, new):
    _, r, facts = two(fresh_ledger, old, new)
    assert (facts.get(old), facts.get(new)) == ("current", "current"), r.explanation


@pytest.mark.parametrize("text,slot,mood,correction,change,additive", [
    ("最近都喝燕麦拿铁了，美式太苦，胃也受不了。", "preference.drink", "statement", False, True, False),  # 胃也
    ("我也喜欢喝咖啡", "preference.drink", "statement", False, False, True),
    ("Actually it was never B12, I read the wrong sign. My bay's D12.", None, "statement", True, False, False),
    ("I'm not planning to move", "plan", "statement", False, False, False),
    ("Bumping the food shop budget up to £475 a month", None, "statement", False, True, False),
])
def test_markers_read_in_their_clause(text, slot, mood, correction, change, additive):
    from ledger.slots import type_statement

    t = type_statement(text)
    assert (t.slot_key, t.mood, t.correction, t.change, t.additive) == (slot, mood, correction, change, additive)


def test_ordinal_dates_in_words():
    from ledger.values import value_parts

    assert value_parts("I was born on the twelfth of March").parts["date"] == {"03-12"}
    assert value_parts("March the twenty-first").parts["date"] == {"03-21"}


def test_a_cessation_naming_nothing_held_contests_nothing(fresh_ledger):
    ml = fresh_ledger
    ml.remember("u", "My gym locker number is 112.", observed_at=T1)
    ml.remember("u", "They gave me a new locker, it's 307 now.", observed_at=T1)
    r = ml.remember("u", "I no longer play tennis.", observed_at=T2)
    statuses = {f.text: f.status for f in ml.profile("u").facts.values()}
    assert r.decision != "conflict", r.explanation
    assert statuses["They gave me a new locker, it's 307 now."] == "current"
    assert statuses["I no longer play tennis."] == "current"


def test_another_weekday_said_as_a_change_moves_the_value(fresh_ledger):
    old = "Leo's swimming lessons are Tuesdays at 4:30 at the leisure centre"
    new = "The leisure centre reshuffled its timetable, so from this term Leo swims on Thursdays at 5:15"
    _, r, facts = two(fresh_ledger, old, new)
    assert (facts.get(new), facts.get(old)) == ("current", None), r.explanation
