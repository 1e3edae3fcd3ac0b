"""What holds whatever rule decided: a reaffirmation never drops what the statement says, and one past event never
replaces another (docs/resolution.md, "Nothing said is lost").

The rules of ledger/resolution.py each read one kind of evidence. Whichever decided, :func:`guard` looks at the
decision against the memory it acts on and changes it when it would lose something the statement says:

* ``opposite_polarity``    a reaffirmation of the same words negated, or no longer ("I'm not allergic to penicillin"
                           of "I'm allergic to penicillin"): the newest statement supersedes;
* ``value_added``          a reaffirmation of the memory's sentence with words added inside it ("I live in New York"
                           of "I live in York"): the fuller statement, holding every word of the memory, supersedes;
* ``another_value_beside`` a reaffirmation of the memory's sentence with a word or two swapped (昨天和小李去爬山了 of
                           上周和小王去爬山了): kept beside it, nothing retired;
* ``attitude_beside``      a reaffirmation by a statement saying how the user feels about it ("I don't like my job
                           as a nurse much" of "I work as a nurse"): kept beside it;
* ``same_thing_in_passing`` a reaffirmation or supersede by a statement naming, in passing, the home or car the
                           memory names ("any tips for keeping our flat in Bristol warm?", "took my Corolla in for its
                           MOT" of "I drive a Toyota Corolla"): news of the same thing, kept beside it;
* ``restated_with_more``   a reaffirmation of an (English) memory repeated with a clause of its own: kept beside it;
* ``another_episode``      a supersede, with no change said, of one past event by another ("I met James at the
                           conference" of "I met Sarah at the conference"): kept beside it;
* ``about_someone_named``  a supersede, with no stop or correction said, of a memory that introduces someone by name
                           ("We have two kids, Noah and Ella", 我有个女儿叫朵朵) by a statement about what that person
                           does ("Noah started kindergarten", 朵朵开始学游泳了), giving no other number, time or date: kept
                           beside it;
* ``qualifier_sibling``    a supersede, with no stop or correction said, by a statement that opens with a case or a
                           condition of a kind the memory says none of ("on Fridays ... instead", "when my dad visits
                           I crank it up to 22"): kept beside it;
* ``part_renewed``         a supersede, with no stop or correction said, by a statement naming the memory's thing and a
                           part of it put in new (雅迪今天换了个新电瓶 of 我的电动车是雅迪的): kept beside it;
* ``partial_change``       a supersede or retirement of a memory that lists two values by a statement naming one of
                           them ("I eat pork now" of "I don't eat pork or beef"): both kept, the memory "to confirm",
                           as a stop of one of several is (``partial_cessation``).
"""

from __future__ import annotations

import re
from typing import Any

from .attributes import insertion, opposite_polarity, replaced_word
from .revision_cues import says_more
from .slots import content_tokens
from .text import has_cjk
from .values import _ZH_CALLED, differing, value_parts

#: a one-off event in the past: something tried, met, read, seen, visited or done once
EPISODE = re.compile(r"\b(?:tried|met|read|saw|watched|visited|went (?:\w+ing|to see)|had (?:dinner|lunch|coffee|"
                     r"drinks|a drink) with|ran into|bumped into)\b", re.I)


#: how the user feels about a thing, said of it ("I don't like my job as a nurse much", 其实不太喜欢现在的工作): an
#: attitude, which a reaffirmation of the thing would drop
_ATTITUDE = re.compile(r"\b(?:(?:do|did)n'?t|do not|never) (?:really |much |particularly )?(?:like|love|enjoy)\b|"
                       r"\b(?:hate|can't stand|cannot stand|am sick of|i'm sick of|am tired of|i'm tired of)\b|"
                       r"不(?:太|怎么|是很)?喜欢|讨厌|受够了", re.I)
#: two values joined in one sentence: "pork or beef", "tennis and golf", 猪肉和牛肉, 英语、法语
_PAIR = re.compile(r"\b([a-z]+),? (?:and|or|nor) ([a-z]+)\b|([\u4e00-\u9fff]{2,4})[和或、跟]([\u4e00-\u9fff]{2,4})", re.I)
#: set phrases that join two words and name no two values ("rain or shine" is "always")
_JOINED_IDIOMS = frozenset({
    ("rain", "shine"), ("more", "less"), ("now", "then"), ("on", "off"), ("off", "on"), ("back", "forth"),
    ("sooner", "later"), ("here", "there"), ("over", "over"), ("again", "again"), ("give", "take"), ("by", "large"),
    ("safe", "sound"), ("sick", "tired"), ("pros", "cons"), ("ups", "downs"), ("day", "night"), ("true", "false"),
    ("trial", "error"), ("wear", "tear"), ("bits", "pieces"), ("odds", "ends"), ("hit", "miss"), ("touch", "go"),
})


#: a memory that introduces people or animals by name: "a budgie called Kiwi", "two kids, Noah and Ella", 女儿叫朵朵
_INTRODUCED = (re.compile(r"\b(?:called|named)\s+([a-z][\w'-]+)", re.I),
               re.compile(r"\b(?:kids|children|sons|daughters|twins|boys|girls|cats|dogs)\b[^.;!?]{0,20}?\b([a-z]+),? and "
                          r"([a-z]+)\b", re.I),
               _ZH_CALLED,
               re.compile(r"(?:儿子|女儿|孩子|猫|狗)[^，,。]{0,4}?([\u4e00-\u9fff]{2})和([\u4e00-\u9fff]{2})"))


def introduced_names(memory: str) -> set[str]:
    """The names a memory introduces someone by (lower-cased): "We have two kids, Noah and Ella" gives noah, ella."""
    return {g.lower() for p in _INTRODUCED for m in p.finditer(memory) for g in m.groups() if g}


def about_named(memory: str, text: str) -> bool:
    """Whether ``text`` opens a clause with someone ``memory`` introduced by name ("Noah started kindergarten", 朵朵这
    学期开始学游泳了): it speaks of what that person does, not of the memory's value. "Chris and I got engaged" speaks
    of the user too."""
    low = text.lower()
    return any(re.search(rf"(?:^|[,.;!?，。！；]\s*|\b(?:and|but|so) ){re.escape(n)}(?![a-z0-9_])"
                         r"(?!\s*(?:and|&) (?:i|me)\b|和我|跟我|我俩)", low) for n in introduced_names(memory))


#: a statement opening with a case or a condition: "on Fridays", "in winter", "at home", "when my dad visits", 周末
_CASE_OPENING = re.compile(r"^(?:on (?:mon|tues|wednes|thurs|fri|satur|sun)days\b|on weekends\b|at weekends\b|in (?:the )?"
                           r"(?:summer|winter|spring|autumn|fall)\b|at (?:home|work)\b|(?:when|whenever|if) (?!i was\b|i moved\b)"
                           r"[a-z']+ (?:[a-z']+ )?(?:visits?|comes? (?:over|round|to stay)|(?:is|are|'s) (?:here|over|away|off|"
                           r"home|ill|sick)|stays? over)\b|"
                           # a habit's case, not when it happened (周一去字节报到了 is one Monday)
                           r"(?:每逢?周[一二三四五六日末]|周末(?:的话|一般)|[冬夏]天(?:的时候|的话)?|在家(?:的时候|的话)|上班的时候))",
                           re.I)
_CASE_KINDS = ("day", "tod", "season", "place", "whom")


def case_of_its_own(memory: str, text: str) -> bool:
    """Whether ``text`` opens with a case or a condition ("on Fridays I'm on the Thameslink instead", "when my dad
    visits I crank it up to 22") of a kind ``memory`` says none of: the same attribute under another case is a sibling
    (docs/resolution.md, "Qualifiers make siblings")."""
    opening = _CASE_OPENING.match(text.strip().lower())
    if opening is None:
        return False
    vm, vo = value_parts(memory), value_parts(opening.group(0))
    kinds = [k for k in _CASE_KINDS if vo.qualifiers.get(k)]
    if kinds:
        return not any(vm.qualifiers.get(k) for k in kinds)
    return not re.match(r"(?:when|whenever|if)\b", memory.strip().lower())  # a condition said of one side only


def _another_number(memory: str, text: str) -> bool:
    """Whether ``text`` gives a number, time or date where ``memory`` gives another of the same unit ("Noah is 7 now"
    of "Noah, 6")."""
    vm, vt = value_parts(memory), value_parts(text)
    if vm.parts.get("unit", frozenset()) != vt.parts.get("unit", frozenset()):
        return False  # "cried for ten minutes" says no other count of "two kids"
    return any(vm.parts.get(k) and vt.parts.get(k) and vm.parts[k] != vt.parts[k] for k in ("number", "time", "date"))


#: a part put in new: 换了个新电瓶, 换了新的轮胎, "got new tyres", "new brakes fitted" (the noun is the part)
#: parts of a car, a bike or a phone: put in new, they are news of the thing, never another thing
_PARTS = frozenset("tyres tires tyre tire battery brakes brake pads chain cassette exhaust clutch windscreen windshield "
                   "wipers filter saddle pedals screen case charger strap gears bulbs headlights mirror 电瓶 电池 轮胎 "
                   "车胎 刹车 屏幕 滤芯 链条 外胎 内胎 座垫 车灯 雨刷".split())
_NEW_PART = re.compile(r"换了?(?:个|一个|一块|块|条|只|套|副|对)?新的?([\u4e00-\u9fff]{2})|"
                       r"\b(?:got|get|gets|had|fitted|put in)(?: \w+)? (?:some |a |an |a pair of |two |four )?new ([a-z]+)|"
                       r"\bnew ([a-z]+) (?:fitted|put in|on|and)\b|\bnew (" + "|".join(p for p in _PARTS if p.isascii())
                       + r")\b")


def part_renewed(memory: str, text: str) -> bool:
    """Whether ``text`` opens by naming the thing ``memory`` is about and says a part of it was put in new (雅迪今天换了
    个新电瓶 of 我的电动车是雅迪的; "the Corolla got new tyres" of "I drive a Corolla"): news of the thing, not another
    thing in its place. The part must be a word the memory does not say."""
    m = _NEW_PART.search(text)
    if m is None:
        return False
    part = next(g for g in m.groups() if g)
    if part.lower() in _PARTS:
        return True  # "the Corolla got new tyres" is news of a car, whichever car the memory names
    if part.lower() in memory.lower():
        return False
    if has_cjk(text):
        opening = re.match(r"\s*(?:我的|我家的?|我那[台辆个])?([\u4e00-\u9fff]{2,4})", text)
        return opening is not None and any(opening.group(1)[i:i + 2] in memory
                                           for i in range(len(opening.group(1)) - 1))
    thing = {w for n in value_parts(memory).parts.get("name", ()) for w in n.split()}
    return any(_names_word(w, text[:m.start()].lower()) for w in thing)


def _names_word(word: str, text: str) -> bool:
    """Whether ``text`` holds ``word`` as a word of its own, or its plural ("rain" is not in "train")."""
    return re.search(rf"\b{re.escape(word)}(?:s|es)?\b", text) is not None


def _content_pair(m: re.Match[str]) -> bool:
    """Whether a :data:`_PAIR` match joins two values: two content words, not a set phrase (Chinese: always)."""
    if not m.group(1):
        return True
    a, b = m.group(1).lower(), m.group(2).lower()
    return (a, b) not in _JOINED_IDIOMS and a != b and bool(content_tokens(a)) and bool(content_tokens(b))


def names_one_of_two(memory: str, text: str) -> bool:
    """Whether ``memory`` joins two values ("pork or beef", 猪肉和牛肉) and ``text`` names one of them, not both.

    Only a pair of content words counts ("six years now and still ..." and "evening, and I ..." join clauses, not
    values), never a set phrase ("rain or shine"); a word counts as named only whole ("rain" is not in "train")."""
    t = text.lower()
    if any(_content_pair(m) for m in _PAIR.finditer(text)):
        return False  # "no eggs or dairy for me anymore": it says the whole list again, not one of the memory's
    for m in _PAIR.finditer(memory):
        if m.group(1):
            if not _content_pair(m):
                continue
            a, b = m.group(1).lower(), m.group(2).lower()
            if _names_word(a, t) != _names_word(b, t):
                return True
        else:
            a, b = m.group(3)[-2:], m.group(4)[:2]
            if (a in t) != (b in t):
                return True
    return False


def guard(decision: str, rule: str, memory: str | None, text: str, typing: Any,
          key: str | None = None) -> tuple[str, str, dict] | None:
    """``(decision, rule, fields)`` to replace a decision on the memory ``key`` whose sentence is ``memory``, or
    None to keep it. ``typing``: the statement's :class:`~ledger.slots.Typing` (its change, correction and stop
    markers)."""
    if memory is None:
        return None
    passing = getattr(typing, "in_passing", None)
    if decision in ("reaffirm", "supersede") and passing and passing in memory.lower():
        # "our flat in Leeds has a mould problem", 我那台比亚迪今天去做了保养 of the home or car the memory names: news
        # of the same thing, neither that memory said again nor another value
        return "add", "same_thing_in_passing", {"fresh_key": True, "note": f"it speaks of {passing!r}, which the "
                                                                           "memory names: both kept"}
    if decision == "reaffirm" and rule != "duplicate":
        if opposite_polarity(memory, text):
            return "supersede", "opposite_polarity", {"note": "the opposite said: the newest statement holds"}
        added = insertion(memory, text)
        if added:
            return "supersede", "value_added", {"note": f"it adds {added!r} to what the memory says: nothing either "
                                                        "said is lost"}
        vm, vt = value_parts(memory), value_parts(text)
        swapped = None if not vt.empty and not differing(vm, vt) else replaced_word(memory, text)  # 7:40 / twenty to eight
        if swapped:
            return "add", "another_value_beside", {"fresh_key": True, "note": f"it says {swapped!r} where the memory "
                                                                              "says another: both kept"}
        if any(vm.qualifiers.get(k) and vt.qualifiers.get(k) and vm.qualifiers[k] != vt.qualifiers[k]
               for k in ("day", "tod")):
            # 我每周二浇花 of 我每周二、周四浇花: the days or times said are the value; another set replaces it
            return "supersede", "qualifier_changed", {"note": "the days or times it says differ: the newest holds"}
        if _ATTITUDE.search(text) and not _ATTITUDE.search(memory):
            return "add", "attitude_beside", {"fresh_key": True, "note": "it says how the user feels about it: kept "
                                                                         "beside what it is about"}
        if says_more(memory, text):
            return "add", "restated_with_more", {"fresh_key": True, "note": "it says all the memory says and adds a "
                                                                            "clause of its own: both kept"}
    if (decision == "supersede" and not (typing.change or typing.correction or typing.cessation)
            and EPISODE.search(text) and EPISODE.search(memory)):
        return "add", "another_episode", {"fresh_key": True, "note": "one past event beside another: both kept"}
    if (decision == "supersede" and not (typing.correction or typing.cessation) and introduced_names(memory)
            and (about_named(memory, text) and not about_named(text, memory) or typing.subject not in ("self", "none"))
            and not _another_number(memory, text)):
        return "add", "about_someone_named", {"fresh_key": True, "note": "it says what someone the memory names does: "
                                                                        "both kept"}
    if decision == "supersede" and not (typing.correction or typing.cessation) and part_renewed(memory, text):
        return "add", "part_renewed", {"fresh_key": True, "note": "it says a part of the thing the memory names was "
                                                                 "put in new: both kept"}
    if decision == "supersede" and not (typing.correction or typing.cessation) and case_of_its_own(memory, text):
        return "add", "qualifier_sibling", {"fresh_key": True, "note": "it says another case (a day, a season, a "
                                                                       "place, a person, a condition) the memory has "
                                                                       "none of: a sibling, not a replacement"}
    if decision in ("supersede", "retire") and not typing.correction and names_one_of_two(memory, text):
        return "conflict", "partial_change", {"contest_key": key, "note": "the memory names two values and this "
                                                                         "changes one: both kept, to confirm"}
    return None
