"""Changes said plainly, without the usual markers: a stop named by the one word only its memory holds, a death said
as a burial, a correction that says where the wrong name came from, a Chinese 不是X in mid-sentence, a clock time said
in number words, a limit that is no negation, a question that asks about what it states, and what someone a memory
introduces by name does (docs/resolution.md)."""

from __future__ import annotations

import pytest

from ledger.numerals import split_number_words
from ledger.slots import type_statement
from ledger.values import value_parts
from tests.test_revision_meaning import revise


def _user(old: str, new: str) -> str:
    return f"s{abs(hash(old + new)) % 10**7}"


@pytest.mark.parametrize("old,new", [
    # a word of the stop's clause that no other memory holds names what stopped
    ("I lease a workshop unit on Mill Lane for my pottery", "handed the workshop keys back to the landlord today, "
                                                            "rent got silly"),
    ("我在小红书上卖手工耳环，算是副业", "小红书那个店不做了，太累，一个月也挣不了几个钱"),
    # said as what ended it
    ("We have a hamster called Nibbles.", "we buried nibbles in the garden this morning, the kids made a little sign"),
    ("I run a small book podcast with my sister, new episode monthly", "wrapped up the book podcast for good, "
                                                                      "60 episodes is plenty"),
    # "packed in", a pet lost; a stop said in one clause names its memory by the one word only it holds
    ("I do parkrun every Saturday morning with my neighbour", "my hip's gone so I've packed in the parkrun for good"),
    ("We've got a tortoise called Shelby, he's ancient", "We lost Shelby last week, the vet says it was just old age"),
    ("I rent a beach hut at Whitstable for the summers", "Gave up the beach hut in the end - couldn't justify the fee"),
])
def test_a_stop_said_plainly_retires_the_memory_it_names(minilm_ledger, old, new):
    r, facts = revise(minilm_ledger, _user(old, new), old, new)
    assert (r.decision, facts.get(old), facts.get(new)) == ("retire", None, "current"), r.explanation


@pytest.mark.parametrize("old,new", [
    ("Our vet is Dr. Alvarez, she's great with the dog",
     "checked the bill and the vet is Dr. Alonso. no idea where I got Alvarez from"),
    ("我们公司在中关村的融科大厦", "公司地址我说错了，是融科旁边的理想大厦，不是融科，俩楼挨着"),
    # 呢 ending a statement does not make it a question
    ("我对芒果过敏", "说错了，我是对菠萝过敏，芒果我天天吃呢"),
])
def test_a_correction_said_plainly_corrects_the_memory(minilm_ledger, old, new):
    user = _user(old, new)
    r, _ = revise(minilm_ledger, user, old, new)
    assert r.decision == "correct", r.explanation
    facts = {f.text: f.status for f in minilm_ledger.profile(user, allow_sensitive=["health"],
                                                             purpose="test").facts.values()}
    assert (facts.get(old), facts.get(new)) == (None, "current"), facts


@pytest.mark.parametrize("old,new,key", [
    # a question first, then the new commute or home said in a clause of its own
    ("I take the 12 bus to work, about 35 minutes door to door",
     "is it odd that walking along the river is my favourite part of the day? 30 minutes to the office and I arrive "
     "awake", "commute"),
    ("我住在上海徐汇", "住浦东两个月了，附近有好吃的本帮菜馆吗？", "residence.city"),
    ("I'm vegan, have been for years", "any good recipes for cod? I eat fish these days, still no meat though", "diet"),
    ("我吃素三年了", "红烧鱼怎么做好吃？医生让我补铁，现在开始吃点鱼了，肉还是不吃", "diet"),
    # 再也不用 is "never again", not "also"
    ("我每天坐2号线上班，单程四十分钟", "骑电动车去公司真方便，二十分钟就到，再也不用挤地铁", "commute"),
    # one Monday is when it happened, not a case of the job
    ("我在阿里上班，做运营", "周一去美团报到了，岗位还是运营", "work.employer"),
    # the first days of a job are a new job
    ("I'm a barista at a cafe in Leith", "first week teaching year 5 and the kids are wild", "work.occupation"),
])
def test_a_change_said_beside_a_question_or_a_reason_replaces_the_old(minilm_ledger, old, new, key):
    r, facts = revise(minilm_ledger, _user(old, new), old, new)
    assert (r.decision, facts.get(old), facts.get(new)) == ("supersede", None, "current"), r.explanation
    assert r.key == key


def test_another_time_for_a_topic_named_twice_replaces_it(minilm_ledger):
    old, new = "我的酸面种每天早上八点喂一次", "天冷了，酸面种一天喂两回，中午十二点一次晚上九点一次"
    r, facts = revise(minilm_ledger, _user(old, new), old, new)
    assert (facts.get(old), facts.get(new)) == (None, "current"), r.explanation


@pytest.mark.parametrize("old,new", [
    # what someone the memory introduces does is said of them, not a change of the memory
    ("我儿子叫乐乐，今年六岁", "乐乐这学期开始学钢琴了，比我有耐心"),
    ("We have two boys, Sam and Leo", "sam started swimming lessons this week and leo couldn't care less"),
    ("We have two girls, Mia and Zoe", "mia started nursery and cried for twenty minutes, zoe didn't even wave"),
    # at work / at home: two cases of one drink
    ("上班的时候我一般喝美式", "在家的话我就喝点绿茶"),
    # the return flight's time is another flight's, not the outbound one changed
    ("my flight to rome leaves at 9:40", "the return flight leaves at 18:05"),
    # a case or a condition the memory says none of is a sibling
    ("I take the Victoria line to work most days", "on thursdays I'm on the overground instead cos I go to the Stratford "
                                                   "site"),
    ("In winter I keep the heating at 19 degrees", "when my mum visits I turn it up to 23, she feels the cold"),
    # a flatmate's new job is theirs
    ("I work for PwC in their tax team", "my flatmate Rosa just got a job at EY so we're rivals now"),
    # the new intern's desk is not the user's
    ("我工位在8楼C区12号", "新来的实习生坐我对面，C区15号，有事找她就行"),
])
def test_something_else_said_leaves_the_memory_current(minilm_ledger, old, new):
    r, facts = revise(minilm_ledger, _user(old, new), old, new)
    assert (facts.get(old), facts.get(new)) == ("current", "current"), r.explanation


def test_a_change_said_of_the_user_and_someone_named_still_replaces(minilm_ledger):
    old, new = "I'm seeing someone called Jamie", "Jamie and I got engaged at Christmas"
    r, facts = revise(minilm_ledger, _user(old, new), old, new)
    assert (r.decision, r.key, facts.get(old)) == ("supersede", "relationship.status", None), r.explanation


def test_a_fact_said_again_before_a_question_is_merged(minilm_ledger):
    old, new = "我在成都生活，老家是重庆的", "重庆人，在成都住着，周末有啥成都周边好玩的推荐不？"
    r, facts = revise(minilm_ledger, _user(old, new), old, new)
    assert (r.decision, r.key, facts.get(old)) == ("reaffirm", "residence.city", "current"), r.explanation


def test_a_limit_said_twice_is_merged_not_a_stop(minilm_ledger):
    old, new = "I water the fern every 7 days, no more", "the fern gets water once every seven days, any more and it droops"
    r, facts = revise(minilm_ledger, _user(old, new), old, new)
    assert (r.decision, facts.get(old)) == ("reaffirm", "current"), r.explanation


@pytest.mark.parametrize("text,cessation", [
    ("the fern gets water once every seven days, any more and it droops", False),
    ("I don't eat meat any more", True),
    ("I water it every 10 days, no more", False),
    ("no more coffee for me after lunch", True),
    ("we buried our old cat under the plum tree", True),
    ("wrapped up the choir for good last night", True),
    ("the surgeon says running's done for me", True),
])
def test_what_reads_as_a_stop(text, cessation):
    assert type_statement(text).cessation is cessation


@pytest.mark.parametrize("text,mood", [
    ("芒果我天天吃呢", "statement"),
    ("我们现在去哪儿吃呢", "question"),
])
def test_ne_asks_only_beside_a_question_word(text, mood):
    assert type_statement(text).mood == mood


@pytest.mark.parametrize("text,part,values", [
    ("I have to be on the platform for the six fifty-five", "time", {"06:55"}),
    ("I catch the seven oh-five every day", "time", {"07:05"}),
    ("中午十二点一次晚上九点一次", "time", {"12:00", "21:00"}),  # a count after the hour, not its minutes
    ("I bought seven twenty-dollar tickets", "number", {"7", "20"}),  # two numbers, never 27
    ("I play five-a-side on Wednesdays", "number", set()),  # a name, no number
])
def test_numbers_said_in_words(text, part, values):
    assert set(value_parts(text).parts.get(part, ())) == values


@pytest.mark.parametrize("text,negated", [
    ("no more than twice a week", False),
    ("every 5 days, no more", False),
    ("no more sugar for me", True),
    ("周末有啥好玩的推荐不？", False),  # 不 asking, as 吗 does
    ("我不喝咖啡", True),
])
def test_a_limit_is_no_negation(text, negated):
    assert value_parts(text).negated is negated


@pytest.mark.parametrize("words,pieces", [
    ("seven forty-two", ["seven", "forty-two"]),
    ("two hundred forty-two", ["two hundred forty-two"]),
    ("nineteen twenty", ["nineteen", "twenty"]),
    ("two thousand two hundred", ["two thousand two hundred"]),
])
def test_number_words_split_where_one_number_ends(words, pieces):
    assert split_number_words(words) == pieces


@pytest.mark.parametrize("text,place", [("上班的时候我一般喝美式", {"work"}), ("while I'm at work I drink tea", {"work"})])
def test_at_work_said_in_other_words_is_a_place(text, place):
    assert set(value_parts(text).qualifiers.get("place", ())) == place


@pytest.mark.parametrize("old,new", [
    # a request to forget ends what it names; it never becomes the value
    ("I like spicy food", "Please forget that I like spicy food"),
    ("我最喜欢的颜色是蓝色", "别记我喜欢蓝色了，忘了吧"),
    ("My favorite color is blue", "Forget what I said about my favorite color"),
])
def test_a_request_to_forget_retires_what_it_names(minilm_ledger, old, new):
    r, facts = revise(minilm_ledger, _user(old, new), old, new)
    assert (r.decision, facts.get(old)) == ("retire", None), r.explanation


@pytest.mark.parametrize("text,cessation", [("don't forget my dentist appointment on Friday", False),
                                            ("别忘了周五看牙", False), ("please forget that I like jazz", True)])
def test_a_reminder_is_no_request_to_forget(text, cessation):
    assert type_statement(text).cessation is cessation
