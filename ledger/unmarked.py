"""A change said with no word of change: the statement gives another value of the same kind for the same topic.

"The combination on my bike lock is 4-7-1-9", then "Bike lock code: 2286"; 我钓鱼一般都去西郊水库, then
明天……反正我照常去青龙湖那个老钓位; "I water the plants on Sunday mornings", then "Thursday evenings are when the
ferns get their water". Nothing says "now" or "changed", yet a topic holds one value and the user gave another.

The reading (:func:`unmarked_target`): the one current memory of the same subject that

* holds a value of a kind the statement also gives — an id (a bare number, a code, a phone number, an e-mail
  address, a URL), a name or named place, or specific weekdays (and a clock time when the statement says
  something changed: "vitamins at 8am" / "magnesium at 9pm" are two things) — and none of the statement's values of that
  kind (a statement repeating a value refines or adds to the memory: "Stopped by unit 214 on Sunday");
* shares its topic: two content words besides the values, or one when either side has at most two;
* is not about another case (summer / winter, at home / at work, weekdays / weekends: ledger/values.py
  ``qualifiers_clash``); another weekday is the value here, not a case;
* is not a sibling of a closed multi-valued slot (pets, allergies, conditions, languages, plans: two of them are two
  values, whatever they share).

It must be strictly ahead of any other such memory. A statement about one occasion ("tomorrow I'm fishing at
Qinglong Lake") changes nothing unless it says it is the habit (as usual, always, 照常, 一般).

:func:`job_left` reads the one change of this kind the catalogue knows: a new employer or a change of job said in one
job slot ends the job the other slot holds.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable

from .attributes import Reading, same_attribute
from .frequency import same_rate
from .slots import _GENERIC_STEMS, GENERIC, content_tokens
from .subjects import FIRST_DAYS
from .text import STOP_ZH, has_cjk
from .value_words import abbreviates, numbered_nouns, shared_cjk_word
from .values import ValueParts, name_words, qualifiers_clash

if TYPE_CHECKING:
    from .decision import Candidate
    from .slots import Typing

#: multi-valued slots whose siblings are values of one closed kind: two of them are both true
CLOSED_MULTI = ("pet", "health.", "profile.languages", "plan")
_DAY_EN = re.compile(r"\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b")
_DAY_ZH = re.compile(r"(?:周|星期|礼拜)([一二三四五六日天])(?![次回趟遍个]|下(?!午))")
_ZH_DAY = {"一": "monday", "二": "tuesday", "三": "wednesday", "四": "thursday", "五": "friday", "六": "saturday",
           "日": "sunday", "天": "sunday"}
#: the search relevance (0..1) at which the first memory found is near enough for one shared topic word
NEAR_SCORE = 0.5
#: one occasion rather than the habit: today, tomorrow, this weekend, 明天, 这周末
_OCCASION = re.compile(r"\b(?:today|tomorrow|tonight|yesterday|this (?:morning|afternoon|evening|weekend|week)|"
                       r"last (?:night|weekend|week))\b|今天|明天|今晚|昨天|这周末|这个周末|上周末")
#: the habit said over an occasion: as usual, always, 照常, 一般, 老地方
_HABIT = re.compile(r"\b(?:as usual|as always|usually|always|normally|every|each|these days|nowadays)\b|"
                    r"照常|照旧|一般|通常|平常|老地方|老钓位|老位置|每[周天次个]|这阵子|最近都")
_ZH_ROLE = re.compile(r"(阿姨|老师|师傅|医生|大夫|律师|经理|教练)$")
_ZH_NUMERALS = set("零〇一二两三四五六七八九十百千万")
#: words of time and habit, which say when or how often, not what about
_TIME_WORDS = {"morn", "morning", "afternoon", "even", "evening", "night", "week", "weekend", "weekday", "day",
               "month", "year", "usually", "always", "normally", "every", "each", "sunday", "monday", "tuesday",
               "wednesday", "thursday", "friday", "saturday", "now", "these", "days", "nowadays", "first",
               "last", "next", "time", "today", "tomorrow", "tonight", "don't", "can't", "still",
               # verbs any topic uses: a shared "take" or "get" says nothing of what both are about
               "tak", "take", "took", "get", "got", "go", "goe", "went", "mak", "make", "kep", "keep", "put", "see",
               "set", "com", "come", "need", "want", "lik", "like", "lov", "love", "try", "tri", "start", "us", "use",
               # words of a reminder: "note to self", "don't forget"
               "forget", "forgot", "remember", "note", "reminder", "self"}
_ZH_NOT_TOPIC = set("去在到来回般都每周星期礼拜天早晚上下午点些那这个们它他她你啥吗呢吧啊哈呀嘛就还才再也又很挺太真"
                    "明今昨年月日号第次回趟阵子最近照常反正不知道想要能会得着过把被给让对跟和与及或忘记别")


def specific_days(text: str) -> frozenset[str]:
    """The weekdays named one by one in ``text`` ("Sunday mornings", 每周三, 周六): not weekdays or weekends as a
    category, which name a case (ledger/values.py ``qualifiers_clash``)."""
    low = text.lower()
    days = {m.group(1) for m in _DAY_EN.finditer(low)}
    days |= {_ZH_DAY[m.group(1)] for m in _DAY_ZH.finditer(low)}
    return frozenset(days)


def _values(vp: ValueParts, text: str) -> dict[str, frozenset[str]]:
    ids = {f"{k}:{v}" for k in ("code", "phone", "email", "url") for v in vp.parts.get(k, ())}
    if not (vp.parts.get("unit") or vp.parts.get("time") or vp.parts.get("date")):
        # a bare number is an id (a locker, a combination, a floor); an amount with its unit ("5k", "five
        # kilometres") or a count beside times ("every 12 hours, at 8am") is another reading, left to the other rules
        ids |= {f"number:{v}" for v in vp.parts.get("number", ())}
    out = {"id": frozenset(ids), "name": frozenset(n for n in vp.parts.get("name", ()) if not n.startswith("lang:")),
           "day": specific_days(text), "every": vp.parts.get("every", frozenset())}  # how often: "once a week"
    # a clock time alone is no topic's value ("vitamins at 8am" / "magnesium at 9pm" are two things): unless a change
    # is said, it counts only with a topic shared more widely (:func:`unmarked_target`)
    out["time"] = vp.parts.get("time", frozenset())
    return {k: v for k, v in out.items() if v}


def _other_contact(mine: frozenset[str], theirs: frozenset[str]) -> bool:
    """Whether one side gives a contact (e-mail, phone, URL) of a kind the other has none of: another thing."""
    kind = {i.split(":", 1)[0] for i in mine}
    held = {i.split(":", 1)[0] for i in theirs}
    return bool((kind | held) & {"email", "phone", "url"}) and not kind & held


def _personal(ids: frozenset[str]) -> bool:
    return any(i.startswith(("email:", "phone:")) for i in ids)


def _topic(vp: ValueParts, text: str) -> set[str]:
    base = vp.residue or text
    for name in vp.parts.get("name", ()):  # a place read in Chinese is not blanked in the residue: its words go
        base = re.sub(re.escape(name), " ", base, flags=re.I)
    words = content_tokens(base) - GENERIC - _GENERIC_STEMS - _TIME_WORDS - _ZH_NOT_TOPIC
    # 王教练 / 李教练, 张老师 / 汪老师: the role of a person named by surname and role is what both are about
    roles = {f"role:{m.group(1)}" for name in vp.parts.get("name", ()) if (m := _ZH_ROLE.search(name))}
    return {w for w in words if not w.isdigit()} | roles


def _same_timed_thing(text: str, memory: str, shared: set[str]) -> bool:
    """Whether another clock time said with no word of change is the same thing's time: a run of three Chinese
    characters both name (鲁邦种), or two English topic words both name with nothing put before them in ``text`` that
    ``memory`` does not say ("the return flight" is another flight than "my flight to Rome")."""
    if has_cjk(text):
        return shared_cjk_word(text, memory)
    if len(shared) < 2:
        return False
    mine, theirs = _modifiers(text, shared), _modifiers(memory, shared)
    return not any(mods - theirs.get(w, set()) for w, mods in mine.items())


def _modifiers(text: str, shared: set[str]) -> dict[str, set[str]]:
    """For each shared topic word, the content words said just before it ("running" of "running shoes", 京 of
    北京办公室): another modifier of the same noun names another case."""
    out: dict[str, set[str]] = {}
    low = text.lower()
    words = re.findall(r"[a-z0-9][a-z0-9'\-]*", low)
    for prev, word in zip(words, words[1:]):
        (w,) = content_tokens(word) or {""}
        mod = content_tokens(prev) - GENERIC - _GENERIC_STEMS - _TIME_WORDS
        if w in shared and mod and not prev.isdigit() and not mod & shared:
            out.setdefault(w, set()).update(mod)
    for prev, ch in zip(low, low[1:]):
        if ch in shared and has_cjk(prev) and prev not in shared and prev not in _ZH_NOT_TOPIC \
                and prev not in GENERIC and prev not in STOP_ZH and prev not in _ZH_NUMERALS:
            out.setdefault(ch, set()).add(prev)
    return out


def unmarked_target(text: str, vp: ValueParts, mine_rd: Reading, candidates: list[Candidate],
                    same_subject: Callable[[Candidate], bool], subject: str,
                    marked: bool = False) -> tuple[Candidate, list[str]] | None:
    """The one current memory ``text`` replaces without saying so, with the value kinds that differ; None when no
    memory, or more than one equally, fits (see the module docstring). ``vp``: its value parts; ``mine_rd``: its
    attribute reading; ``subject``: "self", a relation, or "none" for a sentence about no one named, which
    replaces nothing this way on one shared word ("the storage unit is $85 a month" says another thing of the unit)
    unless it says something changed (``marked``: 陶艺课挪到周日下午了); a note naming two topic words of the memory
    and another value of its kind ("overnight thermostat: 17 degrees" of "I keep the thermostat at 19 degrees
    overnight") is the user's, as a note is."""
    if _OCCASION.search(text.lower()) and not _HABIT.search(text.lower()):
        return None
    noted = subject == "none" and not marked  # a note with no one named: the strongest topic match only
    mine = _values(vp, text)
    if not mine:
        return None
    words = _topic(vp, text)
    numbered = numbered_nouns(text)
    top = max((c for c in candidates if c.status in ("current", "contested")), key=lambda c: c.score, default=None)
    # an e-mail address or a phone number held by one memory only is the one replaced, whatever the words
    # ("jo.smith@newmail.com is the best email for me" of "My email is jo@old.com")
    personal = _personal(mine.get("id", frozenset())) and sum(
        1 for o in candidates if o.status in ("current", "contested") and same_subject(o)
        and _personal(_values(o.values, o.text).get("id", frozenset()))) == 1
    found: list[tuple[int, float, Candidate, list[str]]] = []
    for c in candidates:
        if c.status not in ("current", "contested") or not same_subject(c) or c.text == text:
            continue
        if c.slot_key is not None and c.slot_key.startswith(CLOSED_MULTI):
            continue
        rd = c.reading
        if (mine_rd.head and rd.head and "+" not in mine_rd.head + rd.head and mine_rd.head != rd.head
                and not same_attribute(rd, mine_rd)):
            continue  # "the rent on my storage unit" is not "my rent": two nouns read, two attributes
        theirs = _values(c.values, c.text)
        # another value of a kind both give; a value of that kind repeated means the statement refines or adds to
        # the memory ("Stopped by unit 214 on Sunday"), a value of another kind repeated only says the topic is one
        # said as a change, the old value may be named beside the new one (陶艺课挪到周日下午了，周三老加班去不了)
        kinds = [k for k in mine if k in theirs and (not same_rate(mine[k], theirs[k]) if k == "every" else
                                                     mine[k] - theirs[k] if marked else not mine[k] & theirs[k])]
        if not kinds or ("id" in kinds and _other_contact(mine["id"], theirs["id"])):
            continue  # a phone number never replaces an e-mail address, nor the reverse
        cases = {"day", "tod"} if "day" in kinds else set()
        if set(qualifiers_clash(c.values, vp)) - cases:
            continue
        theirs_words = _topic(c.values, c.text)
        shared = words & theirs_words | {w for w in words if any(abbreviates(w, o) for o in theirs_words)}  # pw
        if "id" in kinds and numbered & numbered_nouns(c.text):
            shared |= {"#" + w for w in numbered & numbered_nouns(c.text)}  # "unit 318" / "unit 214": one topic
        mods_mine, mods_theirs = _modifiers(text, shared), _modifiers(c.text, shared)
        if any(mods_mine[w].isdisjoint(mods_theirs[w]) for w in mods_mine.keys() & mods_theirs.keys()):
            continue  # "my running shoes" / "my dress shoes", 北京办公室 / 上海办公室: the same noun, another case
        if kinds == ["time"] and not marked and not _same_timed_thing(text, c.text, shared):
            continue  # "回程航班18:05起飞" of "去罗马的航班9:40起飞": another flight, not the time changed
        small = min(len(words), len(theirs_words))
        # one shared word is enough when either side has few, or when search finds this memory first and close
        # (浇水 / 喂点水: one character, but the nearest memory by far)
        if noted:  # two topic words shared, or every topic word of a short note ("柜子 203" of "储物柜我一直用 56 号")
            if ({"id", "every"} & set(kinds) or kinds == ["time"]) and (
                    len(shared) >= 2 or (shared and len(words) <= 2 and words <= shared)):
                found.append((len(shared), c.score, c, kinds))
        elif len(shared) >= 2 or (personal and "id" in kinds) or (shared and (small <= 2 or (c is top and c.score >= NEAR_SCORE))):
            found.append((len(shared), c.score, c, kinds))
    found.sort(key=lambda t: (-t[0], -t[1]))
    if not found or (len(found) > 1 and found[1][0] >= found[0][0]):
        return None
    return found[0][2], found[0][3]


#: a workplace named in a job memory ("at a high school", 在美团做): it says where the job is, not only what it is
_WORKPLACE = re.compile(r"\b(?:at|for|with) (?:a|an|the|[a-z])|在[^，,。]{1,10}(?:做|当|上班|工作|教)")
#: the first days of a job ("first week teaching year 9", 第一天去新公司, 入职): a new job
_FIRST_DAYS = re.compile(rf"\b{FIRST_DAYS}\b|第一(?:天|周|个月)|头一天|入职")
#: the two slots of one job: a change said in either ends the job the other holds
JOB_PAIRS = {"work.employer": "work.occupation", "work.occupation": "work.employer"}


def job_left(slot_key: str | None, typing: Typing, vp: ValueParts, candidates: list[Candidate],
             same_subject: Callable[[Candidate], bool]) -> Candidate | None:
    """The memory of the job left, when a statement lands in one job slot (``slot_key``: work.employer or
    work.occupation) with nothing current there and the other holds the current job: it says a change ("Started at
    Monzo last month", 入职字节第一周), or names another employer than the one held ("I'm a pharmacist at St. Luke's" of
    "I teach chemistry at a high school in Tacoma"). None otherwise: "Title-wise I'm a senior UX researcher" of "I
    work at Google" is the same job, another aspect of it."""
    other = JOB_PAIRS.get(slot_key or "")
    if other is None or typing.mood != "statement" or typing.additive:
        return None
    started = _FIRST_DAYS.search(vp.residue.lower()) is not None
    # the first days of a new job end the job held, even one filed by its hours ("I work as a nurse at St Mary's,
    # mostly night shifts": work.shift)
    slots = (other, "work.shift") if started else (other,)
    held = [c for c in candidates if c.slot_key in slots and c.status in ("current", "contested")
            and same_subject(c) and (c.typing is None or not c.typing.cessation)
            and (c.slot_key == other or _WORKPLACE.search(c.text.lower()))]
    if len(held) != 1:
        return None
    mine_names, their_names = name_words(vp), name_words(held[0].values)
    if not (their_names or _WORKPLACE.search(held[0].text.lower())):
        return None  # "I'm a software engineer" then "I work for Spotify now": one job said twice, both kept
    elsewhere = slot_key == "work.employer" and mine_names and their_names and not mine_names & their_names
    # "first week teaching year 9", 第一天去新公司: the first days of a job are a new one
    return held[0] if typing.change or elsewhere or started else None
