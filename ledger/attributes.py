"""What a statement is *about* (its attribute) and what it *says* about it (its value), read from the sentence's
form in English and Chinese — not from a list of cues per slot. No I/O, no model.

Forms read, in this order (the first that fits wins):

* a change of value: "my rent went up from 2,000 to 2,200", "they lowered my rent to 1,900", "renamed the
  group chat to Hikers", 房租从三千涨到三千五, 房租降到两千八, 车牌换成了粤B88888 — attribute: what changed
  (rent, group chat, 房租, 车牌), value: what it is now;
* a copula or possessive: "my gym locker number is 245", "the wifi password is now tulip88", 我的车牌是沪A12345,
  我家WiFi密码是… — attribute: the noun phrase before the copula, value: after it;
* a verb that carries the attribute: "I shop at Aldi", "I sleep on the left side", "we bank with Chase",
  我在永辉买菜 — attribute: the verb with its preposition (shop at, sleep on, 在…买菜), value: its object.
  Verbs that say little by themselves (be, have, like, love, go, do, get, want, visit, ...) make no attribute:
  "I like jazz" and "I like hiking" are two likes, not one like changing.

The attribute is kept as a phrase and as *lemmas* (content words crudely stemmed, or CJK characters), compared
by overlap: two statements are about the same attribute when their subjects agree and their attribute lemmas
mostly coincide (:func:`same_attribute`). The slot catalogue (ledger/slots.py) stays the authority for the slots
it knows; this reading is what lets two statements outside it meet.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from .slots import (_REL_EN_RE, _REL_ZH_RE, _ROLE_EN_RE, _ROLE_ZH_RE, REGISTRY, KeyRegistry,
                    content_tokens, has_cjk, nfc_lower, type_statement)
from .slot_labels import SLOT_LABELS
from .values import value_parts

#: verbs that name no attribute by themselves (a statement made with them is an episode or a taste, not a value)
WEAK_VERBS = set("""
be am is are was were been being have has had having like likes liked love loves loved enjoy enjoys enjoyed
go goes went going do does did doing get gets got make makes made want wants wanted need needs needed think
thinks thought feel feels felt know knows knew see sees saw seen hate hates hated visit visits visited watch
watches watched read reads try tries tried buy buys bought take takes took meet met find found keep keeps kept
say says said tell told start started finish finished learn learned learnt miss missed remember remembered
prefer prefers preferred play plays played listen listens listened cook cooks cooked collect collects collected
eat eats ate drink drinks drank speak speaks spoke write writes wrote study studies studied practise practice
practises practices
""".split())
#: verbs whose object is a single value even without a preposition ("I drive a Tesla", "I pay 1,900 in rent"):
#: any other verb names an attribute only with its preposition ("shop at", "sleep on")
VALUE_VERBS = set("""
drive drives weigh weighs earn earns pay pays rent rents owe owes wear wears charge charges
""".split())
#: words that mark a change or a discourse move, not the attribute ("now", "btw", "actually")
_NOISE = set("""
now currently these days nowadays anymore still actually btw oh and also too so well just recently finally
sorry meant mean correction wait no yes ok okay then again newly already officially over
""".split()) | {"day"}
_ZH_NOISE = set("现在目前最近如今已经刚刚刚才终于对了话说其实说错了不对我是说另外还有也又还就都了的吗呢吧啊呀哦嗯每个月天周年号才子里")

_LEAD = re.compile(r"^(?:(?:btw|by the way|oh|and|also|so|well|actually|sorry|oops|wait|no|ok|okay|update|fyi|"
                   r"heads up|correction|i meant|i mean|quick update|just so you know)\b[\s,:;.!-]*)+", re.I)
_ZH_LEAD = re.compile(r"^(?:(?:对了|话说|另外|还有|更新一下|说错了|不对|我是说|其实|哦|嗯|刚才说错了|记错了|纠正一下|更正一下)"
                      r"[，,。：:！!\s]*)+")

_CHANGE_EN = re.compile(
    r"^(?P<attr>.+?)\s+(?:(?:has|have|just)\s+)?(?:went|go(?:es)?|changed?|moved|increased|decreased|dropped|rose|"
    r"jumped|fell|climbed|grew|shrank|was (?:raised|lowered|increased|reduced|cut|changed|moved|bumped|updated)|"
    r"(?:got|was|been|has been) (?:raised|lowered|bumped|cut|moved|changed|pushed|renamed|switched|rescheduled|"
    r"updated|upgraded|reduced|increased|shifted|reset)|is going)\s+(?:up\s+|down\s+|back\s+)?"
    r"(?:from\s+(?P<old>.+?)\s+)?to\s+(?P<val>.+)$", re.I)
_SET_EN = re.compile(
    r"^(?:(?:i|we|they|he|she|(?:the|my|our) \w+)\s+(?:have\s+|just\s+|finally\s+|again\s+)*)?(?:renamed|lowered|raised|changed|moved|"
    r"increased|reduced|set|switched|updated|upgraded|bumped|cut|upped|reset|rescheduled|pushed|shifted|"
    r"extended|shortened)\s+(?:up\s+|down\s+)?(?P<attr>.+?)\s+(?:from\s+(?P<old>.+?)\s+)?to\s+(?P<val>.+)$", re.I)
_COPULA_EN = re.compile(
    r"^(?P<attr>(?:my|our|the|his|her|their|[a-z]+'s)\s.+?|[a-z][\w' -]+?)\s*(?:\s(?:is|are|was|were|has become|"
    r"became|becomes|will be|stays?|remains?))\s+(?:now\s+|currently\s+|still\s+|actually\s+|officially\s+)?"
    r"(?P<val>.+)$", re.I)
_NOUN_VERB_EN = re.compile(
    r"^(?P<attr>(?:the\s+|my\s+|our\s+)?[a-z][a-z' -]*?)\s+(?P<verb>[a-z]+s)\s+(?P<prep>at|on|in|with|to|for|from|by|"
    r"around|after|before|until|every)\s+(?P<val>.+)$", re.I)
_VERB_EN = re.compile(
    r"^(?:(?:i|we)(?:'ve|'d)?\s+|(?=[a-z]+s\s))(?:(?:now|currently|usually|always|still|mostly|normally|just|mainly|also|only|"
    r"generally|typically|often)\s+)*(?P<verb>[a-z]+)(?:\s+(?P<prep>at|on|in|with|to|for|from|by|into|via|through|"
    r"under|near|around|off|up|out))?\s+(?P<val>.+)$", re.I)
_ZH_CHANGE = re.compile(r"^(?:[^，,把]{0,8}把)?(?P<attr>.+?)(?:已经|刚刚|刚|又)?(?:从(?P<old>.+?))?(?:变成了?|改成了?|换成了?|降到了?|涨到了?|升到了?|"
                        r"调到了?|调整为|调整到|改为|变为|提高到|降低到|增加到|减少到|减到|加到|涨了?到|挪到|搬到|推迟到|提前到)"
                        r"(?P<val>.+)$")
#: a verb with its preposition: 我住在杭州, 我们搬到了苏州, 我在腾讯上班 is read by _ZH_AT
_ZH_VERB = re.compile(r"^(?:我|我们)(?:现在|目前|一直|已经|还|都)*(?P<verb>住|搬|工作|上班|上学|读书|定居|生活)了?"
                      r"(?P<prep>在|到|去|进)了?(?P<val>.+)$")
_ZH_COPULA = re.compile(r"^(?P<attr>.+?)(?:现在|目前|其实|已经|还)?(?:是|为|叫)(?P<val>.+)$")
#: a predicate word that opens a copula's complement and belongs to the attribute: "rent is *due on* the 1st" is
#: about when rent is due, not what rent is; "the network is *called* Casa" names the network
_PREDICATE = re.compile(r"^(?P<p>called|named|due|located|based|open|opens|closed|closes|held|scheduled|paid|valid|"
                        r"available|renewed|renews|booked|picked up|delivered|collected|parked|stored|kept|run|managed)"
                        r"\b(?:\s+(?P<prep>on|in|at|by|until|till|from|to|with|for|every))?\s*", re.I)
_ZH_AT = re.compile(r"^(?:我|我们)(?:现在|平时|一般|通常|都|也|还|一直|经常|常常)*在(?P<val>.{1,10}?)(?P<verb>买|吃|办|看|存|租|剪|修|"
                    r"练|学|上|停|住|健身|打|游|做|存钱|理发|锻炼|加油|洗|寄|取|充)(?P<rest>.*)$")

_SELF_EN = re.compile(r"^(?:my|our|i|we|i'm|we're)\b", re.I)
_POSSESSIVE = re.compile(r"^(?:my|our)\s+", re.I)
_ZH_POSSESSIVE = re.compile(r"^(?:我们?(?:的|家)?)")


@dataclass(frozen=True)
class Reading:
    """What :func:`read_statement` found: ``form`` (change | set | copula | verb | at | none), the attribute
    phrase and its lemmas, the value phrase (as written), and, for a change form, the old value named."""

    form: str
    attribute: str | None
    lemmas: frozenset[str]
    value: str | None
    old_value: str | None = None
    head: str | None = None  # an English noun attribute's head noun, stemmed ("password"), or its predicate ("due")

    @property
    def found(self) -> bool:
        return self.attribute is not None and bool(self.lemmas)

    def describe(self) -> str:
        if not self.found:
            return "attribute none"
        return f"attribute {self.attribute!r} ({self.form}), value {self.value!r}" + (
            f", was {self.old_value!r}" if self.old_value else "")


#: one attribute said with other nouns: a car's "reg", "plate" and "registration"; a "cell" and a "mobile"
_SAME_NOUN = {"reg": "registration", "plat": "registration", "numberplat": "registration", "cell": "mobil",
              "passcod": "password", "wi-fi": "wifi", "apartment": "flat"}


def _lemmas(phrase: str) -> frozenset[str]:
    toks = content_tokens(phrase)
    return frozenset(_SAME_NOUN.get(t, t) for t in toks if t not in _NOISE and t not in _ZH_NOISE and not t.isdigit())


def _clean_attr(attr: str) -> str:
    a = attr.strip(" ,.;:!?，。；：！？")
    a = re.sub(r"\b(?:now|currently|still|actually|finally|just|officially|these days|nowadays|anymore)\b", " ", a,
               flags=re.I)
    # 我早饭一般就是… / 最近早饭都是…: how often or since when is not what the attribute is
    a = re.sub(r"一般|通常|平时|平常|最近|现在|如今|目前|这阵子|这段时间|基本上?|(?<=[\u4e00-\u9fff])[都就](?=$|是)", "", a)
    return re.sub(r"\s+", " ", a).strip()


def _clean_val(val: str) -> str:
    v = val.strip(" ,.;:!?，。；：！？")
    v = re.sub(r",?\s+not\s+[^,]+$|[，,]\s*(?:而)?不是.+$", "", v)  # "Portland, Oregon, not Maine": the value said
    v = re.sub(r"\s*(?:now|these days|nowadays|from now on|anymore|instead|as well|too|also)\s*$", "", v, flags=re.I)
    v = re.sub(r"(?:了|啦|呢|吧|啊)+$", "", v)
    return v.strip(" ,.;:!?，。；：！？")


@functools.lru_cache(maxsize=8192)
def read_statement(text: str) -> Reading:
    """Read the attribute and value of one statement (see the module docstring). Pure; cached."""
    t = unicodedata.normalize("NFC", text).strip()
    # the subject ("my sister's ...", 我女儿的...) is read by the slot typing; the attribute is what follows it
    m = (_REL_EN_RE.match(nfc_lower(t)) or _REL_ZH_RE.match(t) or _ROLE_EN_RE.match(nfc_lower(t))
         or _ROLE_ZH_RE.match(t))
    if m:
        t = t[m.end():].lstrip(" 的,，")
    else:
        named = _NAMED_SUBJECT.match(t)
        if named and named.group(1) not in _NOT_NAMES:
            if not named.group(2):
                # "Caroline is researching adoption agencies": a person's state or doings, not an attribute
                return Reading("none", None, frozenset(), None)
            t = t[named.end():]  # "Jon's dance studio is ...": the attribute is the dance studio (of Jon)
    found = _read_zh(t) if has_cjk(t) else _read_en(t)
    if found.found and not re.search(r"[，,;；]", found.attribute or ""):
        return found
    # a sentence of several clauses ("提前还了一部分，房贷降到每月5200了", "they closed it, so I bank at ..."): the
    # clause that says what changed carries the attribute; a change form first, then any form
    clauses = [c.strip() for c in re.split(r"(?<!\d)[，,;；]|[，,;；](?!\d)|\s+(?:and|so|but|because)\s+", t)
               if c.strip()]
    if len(clauses) > 1:
        readings = [_read_zh(c) if has_cjk(c) else _read_en(c) for c in clauses]
        readings = [r for r in readings if r.found]
        for r in sorted(readings, key=lambda r: r.form not in ("change", "set")):
            return r
    if found.found:
        return found
    vp = value_parts(t)
    if any(vp.parts.get(k) for k in ("number", "time", "date", "email", "url", "phone", "code")):
        # no form fits, but the sentence holds a value (a number, a time, a code, a name): what surrounds the value
        # is its attribute ("我女儿的学校八点上课" / "...九点上课")
        residue = re.sub(r"\s+", " ", vp.residue).strip(" ,.;:!?，。；：！？")
        lem = _lemmas(residue)
        episode = re.match(r"^(?:i|we)\s+(?P<v>[a-z]+)(?:\s+(?P<w>[a-z]+))?", residue.lower())
        if episode and any(v and (v in WEAK_VERBS or v.endswith("ed")) for v in episode.group("v", "w")):
            return found  # "I visited museum number 5": an episode, each its own memory, not a value changing
        if len(lem) >= 2:
            return Reading("template", residue, lem, None)
    return found


#: a correction that names the wrong value and the right one: "不是杭州，是苏州", "it's Oregon, not Maine"
_CORRECTED_ZH = re.compile(r"不是(?P<old>[^，,。]+?)[，,]?\s*(?:而|应该|其实)?是(?P<val>[^，,。]+)")
#: the right value first: "最后四位是5687，不是5678"
_CORRECTED_ZH_AFTER = re.compile(r"(?:是|为)(?P<val>[^，,。是]+?)[，,]\s*(?:而)?不是(?P<old>[^，,。]+)")
#: the right value, then how the wrong one came about: "舞蹈课是周四晚上七点，我之前写成周三了", "是汪老师…我刚才打成王了"
_CORRECTED_ZH_MISWRITTEN = re.compile(r"(?:是|为)(?P<val>[^，,。是]+?)[，,].{0,12}?(?:写成|打成|记成|说成|看成|写错成|打错成)"
                                      r"(?P<old>[^，,。了]+)")
_CORRECTED_EN = re.compile(r"(?:it'?s|is|was|are|i'?m|meant)\s+(?P<val>[^,.;]+?),?\s+not\s+(?P<old>[^,.;]+)|"
                           r"\bnot\s+(?P<old2>[^,.;]+?),?\s+(?:but|it'?s|rather)\s+(?P<val2>[^,.;]+)", re.I)


def corrected(text: str) -> tuple[str, str] | None:
    """The (right, wrong) values a correction names, or None: "说错了，不是杭州，是苏州" gives ("苏州", "杭州")."""
    t = unicodedata.normalize("NFC", text)
    m = _CORRECTED_ZH.search(t)
    if m:
        return _clean_val(m.group("val")), _clean_val(m.group("old"))
    m = _CORRECTED_ZH_AFTER.search(t) or _CORRECTED_ZH_MISWRITTEN.search(t)
    if m:
        return _clean_val(m.group("val")), _clean_val(m.group("old"))
    m = _CORRECTED_EN.search(t)
    if m:
        val, old = (m.group("val"), m.group("old")) if m.group("val") else (m.group("val2"), m.group("old2"))
        return _clean_val(val), _clean_val(old)
    return None


# a qualifier inside an attribute phrase ("my locker at work"): the qualifier is read as one (ledger/values.py),
# the attribute is the rest ("locker")
_QUALIFIER_PHRASE = re.compile(r"\s+(?:at|in|on|during|for)\s+(?:work|home|the office|school|weekends?|weekdays?|"
                               r"summer|winter|the (?:morning|evening|weekend)s?)\b")
_PLACE_PHRASE = re.compile(r"\s+(?:at|in|on|near|by)\s+")
_OWNED = re.compile(r"(?:mine|ours|my one|the one i (?:use|have|got))\b")
_VALUE_IN_ATTR = re.compile(r"(?:\bnumber\s+|\bno\.?\s*|#)?\b[a-z]*\d[\w-]*(?:\s+\w*\d\w*)*$")


def _read_en(text: str) -> Reading:
    t = _LEAD.sub("", nfc_lower(text)).strip().rstrip(".!")
    t = re.sub(r"^(?:(?:as of|since)\s+\w+(?:\s+\w+)?|these days|nowadays|from now on|now|currently|lately)\s*,?\s+",
               "", t)
    t = re.sub(r"\s+(?:last|this|next)\s+(?:week|month|year|monday|tuesday|wednesday|thursday|friday|saturday|"
               r"sunday)$", "", t)
    for form, pattern in (("change", _CHANGE_EN), ("set", _SET_EN)):
        m = pattern.match(t)
        if m:
            attr = _clean_attr(_POSSESSIVE.sub("", m.group("attr")))
            lem = _lemmas(attr)
            if lem:
                return Reading(form, attr, lem, _clean_val(m.group("val")),
                               _clean_val(m.group("old")) if m.group("old") else None, _last_noun(attr))
    m = _COPULA_EN.match(t)
    if m and not re.match(r"^(?:i|we|you|he|she|it|they|this|that|there|here|what|who)\b", m.group("attr")):
        attr = _QUALIFIER_PHRASE.sub("", _clean_attr(_POSSESSIVE.sub("", m.group("attr")))).strip() or m.group("attr")
        val = m.group("val")
        owned = _OWNED.match(val)
        if owned:  # "Locker 245 is mine": the value is in the subject, the attribute is the rest of it
            inverted = _VALUE_IN_ATTR.search(attr)
            if inverted:
                return Reading("copula", _clean_attr(attr[:inverted.start()]), frozenset(_lemmas(attr[:inverted.start()])),
                               _clean_val(inverted.group(0)), head=_last_noun(attr[:inverted.start()]))
        pm = _PREDICATE.match(val)
        if pm:
            attr = f"{attr} {pm.group(0).strip()}"
            val = val[pm.end():]
        lem = _lemmas(attr) | ({pm.group("p").lower()} if pm else set())
        if lem:
            # "locker at the pool": the noun before a place phrase is what the attribute is
            head = pm.group("p").lower() if pm else _last_noun(_PLACE_PHRASE.split(attr)[0])
            return Reading("copula", attr, frozenset(lem), _clean_val(val), head=head)
    m = _NOUN_VERB_EN.match(t)
    if m and not re.match(r"^(?:i|we|you|he|she|it|they|this|that|there)\b", m.group("attr")):
        noun = _clean_attr(_POSSESSIVE.sub("", m.group("attr")))
        attr = noun + f" {m.group('verb')} {m.group('prep')}"
        lem = _lemmas(attr) | {m.group("prep")}
        # the head is the noun with its verb: "the bus leaves at" and "the car insurance renews in" speak of the
        # bus's departure and the insurance's renewal, not of the bus or the insurance
        head = _last_noun(noun)
        verb = next(iter(content_tokens(m.group("verb"))), m.group("verb"))
        return Reading("verb", attr, frozenset(lem), _clean_val(m.group("val")), head=f"{head}+{verb}" if head else None)
    m = _VERB_EN.match(t)
    if m:
        verb = m.group("verb")
        if (verb not in WEAK_VERBS and verb not in ("'m", "am", "don't", "do", "never", "no", "not")
                and (m.group("prep") or verb in VALUE_VERBS)):
            attr = verb + (" " + m.group("prep") if m.group("prep") else "")
            # lemmas of the verb itself (content_tokens drops prepositions: keep them, "sleep on" != "sleep in")
            lem = frozenset({*(_lemmas(verb) or {verb}), *([m.group("prep")] if m.group("prep") else [])})
            return Reading("verb", attr, lem, _clean_val(m.group("val")))
    return Reading("none", None, frozenset(), None)


def _read_zh(text: str) -> Reading:
    t = _ZH_LEAD.sub("", text).strip().rstrip("。！!")
    m = _ZH_CHANGE.match(t)
    if m:
        attr = _ZH_POSSESSIVE.sub("", m.group("attr")).strip("，, ")
        lem = _lemmas(attr)
        if lem:
            return Reading("change", attr, lem, _clean_val(m.group("val")),
                           _clean_val(m.group("old")) if m.group("old") else None)
    m = _ZH_VERB.match(t)
    if m:
        verb = "住" if m.group("verb") in ("搬", "定居", "生活") else m.group("verb")
        return Reading("verb", verb + "在", frozenset({*verb, "在"}), _clean_val(m.group("val")))
    m = _ZH_AT.match(t)
    if m:
        attr = "在…" + m.group("verb") + m.group("rest")
        return Reading("at", attr, _lemmas(m.group("verb") + m.group("rest")) | {"在"}, _clean_val(m.group("val")))
    m = _ZH_COPULA.match(t)
    if m:
        raw = m.group("attr")
        attr = _clean_attr(_ZH_POSSESSIVE.sub("", raw).strip("，, "))
        if attr and attr not in ("我", "我们", "他", "她", "这", "那", "它") and not re.fullmatch(r"我们?|[他她它]们?", attr):
            lem = _lemmas(attr)
            if lem:
                return Reading("copula", attr, lem, _clean_val(m.group("val")))
    return Reading("none", None, frozenset(), None)


def attribute_overlap(a: Reading, b: Reading) -> float:
    """How far two attributes coincide: |a & b| / |a | b| of their lemmas (0 when either has none)."""
    if not a.found or not b.found:
        return 0.0
    return len(a.lemmas & b.lemmas) / len(a.lemmas | b.lemmas)


#: attribute-lemma overlap at or above which two statements are about the same attribute
SAME_ATTRIBUTE = 0.6


#: nouns that name how a thing is known rather than another thing: "locker" and "locker number" are one attribute
VALUE_NOUNS = {"number", "no", "code", "id", "pin", "name", "address", "password", "figure", "amount", "one", "num",
               "sit", "websit", "url", "link", "handl"}

#: the nouns a value is known by, dropped when two attributes are compared ("mobile" is "mobile number"); not
#: "name" or "password": a wifi's name is not its password
_KNOWN_BY = frozenset({"number", "no", "num", "code", "id", "one", "sit", "websit", "url", "link", "handl"})

#: the same for two template readings (no form fitted: the attribute is all the sentence but its values)
SAME_TEMPLATE = 0.75


def _last_noun(phrase: str) -> str | None:
    """The head noun of an English noun phrase: its last content word, stemmed ("password" of "home wifi
    password"); None for Chinese or when there is none."""
    if has_cjk(phrase):
        return None
    for w in reversed(re.findall(r"[a-z0-9][a-z0-9'\-]*", phrase.lower())):
        toks = content_tokens(w) - _NOISE
        if toks:
            t = next(iter(toks))
            return _SAME_NOUN.get(t, t)
    return None


def _head(r: Reading) -> str | None:
    return r.head


def same_attribute(a: Reading, b: Reading) -> bool:
    """Whether two readings are about the same attribute: their lemmas overlap by :data:`SAME_ATTRIBUTE` (two
    templates by :data:`SAME_TEMPLATE`), or one attribute's lemmas, at least two, are within the other's ("gym
    locker" in "gym locker number"); two English noun phrases must also end in the same noun ("home wifi password"
    is not "home wifi network")."""
    if not a.found or not b.found:
        return False
    ha, hb = _head(a), _head(b)
    if ha and hb and ha != hb:
        # "gym locker" and "gym locker number" are one attribute (a number is what a locker is known by);
        # "car insurance" and "car insurance premium" are two
        small, big = (ha, hb) if ha in b.lemmas else (hb, ha) if hb in a.lemmas else (None, None)
        if small is None or big not in VALUE_NOUNS:
            return False
    if "template" in (a.form, b.form):
        if attribute_overlap(a, b) >= SAME_TEMPLATE:
            return True
        # "物业费从2块5涨到了3块" (attribute 物业费) and "物业费每平米2块5" (no form: all but its values): the named
        # attribute, two lemmas or more, within the other sentence
        named, whole = (a, b) if b.form == "template" else (b, a)
        return named.form != "template" and len(named.lemmas) >= 2 and named.lemmas <= whole.lemmas
    if attribute_overlap(a, b) >= SAME_ATTRIBUTE:
        return True
    # "mobile" and "mobile number", "locker" and "locker no": equal once the noun a value is known by is dropped
    bare_a, bare_b = a.lemmas - _KNOWN_BY, b.lemmas - _KNOWN_BY
    if bare_a and bare_a == bare_b:
        return True
    small, big = (a.lemmas, b.lemmas) if len(a.lemmas) <= len(b.lemmas) else (b.lemmas, a.lemmas)
    if ha and ha == hb and small <= big:
        return True  # one noun, one of them said more precisely ("locker" and "locker at the pool")
    return len(small) >= 2 and small <= big


_MARKERS_EN = re.compile(r"\b(?:now|currently|these days|nowadays|from now on|anymore|instead|actually|still|just|"
                         r"already|recently|finally|also|btw|by the way|oh|and|so|well|usually|often|always|normally|"
                         r"generally|typically|mostly|regularly|really|pretty much|basically)\b", re.I)
_MARKERS_ZH = re.compile(r"现在|目前|最近|如今|已经|刚刚|终于|对了|话说|其实|平时|平常|常常|经常|一般|通常|总是|往往|基本上|"
                         r"一直|始终|向来|一向|从来|依然|仍然|真的|确实|特别|非常|超级|"
                         r"了|啦|呢|吧|啊|呀|哦|嗯|都|很|挺")


#: words that say a value changed without saying the new one
_NO_VALUE = set("changed change changes different new updated moved cancelled canceled off over gone has have is was "
                "been the a an it".split()) | set("变换改新别不同取消没了")


#: sentences longer than this (words, or Chinese characters) are not compared place by place: a statement is a
#: sentence or two, and the comparison's cost grows with the square of the length (a pasted document)
MAX_COMPARED_UNITS = 240


def _units(text: str) -> list[str]:
    """A sentence as comparable units: lower-cased words for English, characters for Chinese (punctuation and
    change or discourse markers left out, so "now" or 现在 never makes a difference by itself)."""
    t = unicodedata.normalize("NFC", text).lower().replace("’", "'")
    if has_cjk(t):
        t = _MARKERS_ZH.sub("", _ZH_LEAD.sub("", t))
        return [c for c in re.findall(r"[a-z0-9]+|[^\sa-z0-9]", t) if c.isalnum()]
    t = _MARKERS_EN.sub(" ", _LEAD.sub("", t))
    return re.findall(r"[a-z0-9][a-z0-9'+@.\-]*[a-z0-9+]|[a-z0-9]", t)


@dataclass(frozen=True)
class _Alignment:
    """Two sentences' units (:func:`_units`), the places they differ (difflib's non-equal opcodes), how much they
    share (``ratio``, 0..1) and the separator their units are joined with ("" for Chinese)."""

    a: tuple[str, ...]
    b: tuple[str, ...]
    ops: tuple[tuple[str, int, int, int, int], ...]
    ratio: float
    sep: str


@functools.lru_cache(maxsize=4096)
def _aligned(old: str, new: str) -> _Alignment | None:
    """:class:`_Alignment` of ``old`` and ``new``, or None when either has no unit or one is longer than
    :data:`MAX_COMPARED_UNITS`. Cached: the rules compare the same statement with the same memory several times
    (:func:`substitution`, :func:`insertion`, :func:`replaced_word`)."""
    a, b = _units(old), _units(new)
    if not a or not b or max(len(a), len(b)) > MAX_COMPARED_UNITS:
        return None
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    ops = tuple(op for op in sm.get_opcodes() if op[0] != "equal")
    return _Alignment(tuple(a), tuple(b), ops, sm.ratio(), "" if has_cjk(old + new) else " ")


def substitution(old: str, new: str) -> tuple[str, str] | None:
    """Where two sentences differ in one place only, the two differing spans (old's, new's); None otherwise.

    "快递寄到小区东门的菜鸟驿站" / "...西门...": ("东", "西"); "our book club meets on the first Monday" / "...
    last Monday": ("first", "last"). What the two sentences share (at least 60% of the longer one) says what the
    value is about; the spans are the values. Both spans must be non-empty (an added word is a qualifier or a
    detail, not a replaced value)."""
    al = _aligned(old, new)
    if al is None or al.a == al.b or len(al.ops) != 1 or al.ops[0][0] != "replace":
        return None
    a, b, sep = al.a, al.b, al.sep
    _, i1, i2, j1, j2 = al.ops[0]
    shared = len(a) - (i2 - i1)
    if shared < 0.6 * max(len(a), len(b)) or shared < 2:
        return None
    said = sep.join(b[j1:j2])
    if not (set(re.findall(r"\w", said) if sep == "" else re.findall(r"[\w'+-]+", said)) - _NO_VALUE):
        return None  # "... has changed", "...变了": it says something changed, not what it is now
    return sep.join(a[i1:i2]), said


def insertion(old: str, new: str) -> str | None:
    """The words ``new`` adds inside ``old`` when it is ``old`` with words added and nothing replaced or dropped
    ("I live in York" / "I live in New York": "new"; "I like jazz" / "I like jazz and blues": "blues"; 我喜欢爵士乐 /
    我喜欢爵士乐和蓝调: "蓝调"), ``old`` being at least half of ``new``; None otherwise, or when what it adds says
    nothing (a marker, 了, "changed"). Markers are left out of both first (:func:`_units`)."""
    al = _aligned(old, new)
    if al is None or len(al.b) <= len(al.a) or len(al.a) < 0.5 * len(al.b):
        return None
    if not al.ops or any(op[0] != "insert" for op in al.ops):
        return None
    said = " ".join(al.sep.join(al.b[j1:j2]) for _, _, _, j1, j2 in al.ops)
    # "new" says nothing by itself ("got a new one") but is a word of a name ("New York")
    names = {w for n in value_parts(new).parts.get("name", ()) for w in n.split()}
    return said if content_tokens(said) - _NO_VALUE or set(said.split()) & names else None


def replaced_word(old: str, new: str) -> str | None:
    """The words ``new`` puts in place of words of ``old`` when the two are one sentence with a word or two swapped
    (most of their units shared, every changed place short): 上周和小王去爬山了 / 昨天和小李去爬山了 -> "李" (上周 and 昨天
    are markers, left out),
    我喜欢靠窗的座位 / 长途飞行我喜欢靠过道的座位 -> "过道". None when nothing is swapped or the sentences differ
    throughout (a rewording), or when what is swapped in says nothing (a marker, "changed")."""
    al = _aligned(old, new)
    if al is None or al.ratio < 0.6:
        return None
    a, b, sep = al.a, al.b, al.sep
    swapped = [sep.join(b[j1:j2]) for op, i1, i2, j1, j2 in al.ops
               if op == "replace" and i2 - i1 <= 4 and j2 - j1 <= 4
               and content_tokens(sep.join(a[i1:i2])) - _NO_VALUE
               and content_tokens(sep.join(b[j1:j2])) - _NO_VALUE - content_tokens(old)]  # not "work" / "working"
    return " ".join(swapped) or None


#: the words that say a sentence is negated, left out when two sentences' words are compared
_NEGATORS = frozenset({"don't", "dont", "not", "no", "never", "doesn't", "isn't", "aren't", "can't", "won't",
                       "不", "没", "别", "未"})


def opposite_polarity(old: str, new: str) -> bool:
    """Whether ``new`` says the opposite of ``old``: one is negated and the other not (:func:`value_parts`), and
    their words are the same once negators and markers are left out ("I don't eat pork" / "I eat pork",
    我不吃猪肉 / 我现在吃猪肉了). Two words or more must remain: "not now" / "now" says nothing."""
    if value_parts(old).negated == value_parts(new).negated:
        return False
    a, b = set(_units(old)) - _NEGATORS, set(_units(new)) - _NEGATORS
    return len(a) >= 2 and a == b


#: a sentence that opens with a person's name, possessive or not ("Jon's dance studio ...", "Caroline is ...")
_NAMED_SUBJECT = re.compile(r"([A-Z][a-z]+)(?:('s|’s)\s+|\s+(?=(?:is|was|has|had|and|[a-z]+(?:s|ed))\b))")
#: capitalised words that open sentences without naming anyone
_NOT_NAMES = set("The My Our I We It This That There These Those His Her Their A An On In At For When After Before "
                 "Btw Oh So And But Also Now Sorry Actually Oops Hmm Well Yes No Ok Okay Just Got Started Every Each "
                 "Some Most Rent Parking Movie Swim Landlord Traded Cleared Netflix Monday Tuesday Wednesday Thursday "
                 "Friday Saturday Sunday Wednesdays Today Tomorrow Yesterday Last Next Since Until If".split())
#: a value longer than this (in characters) is a description, not a value: it is not shown as one
MAX_SHOWN_VALUE = 48


@dataclass(frozen=True)
class Said:
    """What a fact's sentence says, for the reader: the ``attribute`` it is about (the catalogue slot's label, or
    the phrase read from the sentence), the ``value`` found for it (as written; None when none was found), and
    whether the sentence says the attribute ``ended`` ("咪咪去世了", "I cancelled my gym membership")."""

    attribute: str | None
    value: str | None
    ended: bool = False


def _label(key: str, registry: KeyRegistry) -> str | None:
    owner = ""
    k = key
    if key.startswith("family."):
        parts = key.split(".")
        owner, k = f"{parts[1]}'s ", ".".join(parts[2:])
    slot = registry.slot_of(k)
    if slot is None:
        return None
    label = SLOT_LABELS.get(slot, slot.replace("_", " ").replace(".", " "))
    return owner + label


_BARE_LEAD = re.compile(r"^(?:it'?s|it is|that'?s|that is|is|was|it was|应该是|是)\s*", re.I)
_BARE_TAIL = re.compile(r"\s*(?:\bnow\b|\binstead\b|了|才对)?\s*[.!。！]*$", re.I)


def bare_value(text: str) -> str | None:
    """What a statement that names no attribute gives as its value, once its markers are off ("sorry, I meant March
    15" -> "March 15", 不对，是沪A12346 -> 沪A12346, "actually it's 245 now" -> "245"); None when nothing short is
    left. Read with the attribute of the memory it revised (memledger/context.py)."""
    t = unicodedata.normalize("NFC", text).strip()
    t = _ZH_LEAD.sub("", _LEAD.sub("", t))
    t = _BARE_TAIL.sub("", _BARE_LEAD.sub("", t)).strip(" ,，:：")
    return t if t and len(t) <= MAX_SHOWN_VALUE and t != text.strip() else None


def said(key: str, text: str | None, registry: KeyRegistry = REGISTRY, value: Any = None) -> Said:
    """Read a fact's sentence for display (see :class:`Said`). Pure; cached. The sentence itself is unchanged:
    this is a reading of it, made again at every read from the same rules that resolved it.

    A structured fact (``value`` given and not the sentence itself: ``assert u1 preference.drink tea``) is not read:
    its attribute is the slot's label and its value the value, so a profile of structured facts compiles none of
    the free-text patterns."""
    if value is not None and value != text:
        label = _label(key, registry)
        shown = value if isinstance(value, str) else (json.dumps(value, ensure_ascii=False)
                                                      if isinstance(value, (int, float, bool)) else None)
        return Said(label, shown if shown is None or len(shown) <= MAX_SHOWN_VALUE else None)
    return _said(key, text, registry)


@functools.lru_cache(maxsize=8192)
def _said(key: str, text: str | None, registry: KeyRegistry = REGISTRY) -> Said:
    label = _label(key, registry)
    if not text:
        return Said(label, None)
    typing = type_statement(text, registry)
    if (thing := typing.in_passing) is not None:
        # "the glasgow place is freezing, tips?": the home city (or the car, the phone) said in passing is the value
        return Said(label, thing.title() if thing.isascii() else thing)
    fix = corrected(text) if typing.correction else None
    r = read_statement(text)
    own = re.sub(r"^(?:the|my|our)\s+", "", r.attribute, flags=re.I) if r.found else None
    # a noun phrase the sentence names ("my gym locker number is 245") says more than the slot a cue word chose
    # ("gym": hobby); a verb's attribute ("I switched to ...") says less than the slot's label ("drink")
    attribute = own if own and r.form in ("copula", "change", "set") and not fix else (label or own)
    named = _NAMED_SUBJECT.match(unicodedata.normalize("NFC", text).strip())
    if attribute and attribute == own and named and named.group(2) and named.group(1) not in _NOT_NAMES:
        attribute = f"{named.group(1)}'s {attribute}"  # whose it is: "Jon's dance studio"
    if attribute and r.form == "template":
        attribute = re.sub(r"\s+", " ", attribute).strip()
    value = fix[0] if fix else (r.value if r.found and r.value else None)
    if value is None and r.found and r.form == "template":
        vp = value_parts(text)
        value = ", ".join(sorted(v for k in ("number", "time", "date", "email", "url", "phone", "code")
                                 for v in vp.parts.get(k, ()))) or None
    if typing.mood != "statement":
        return Said(label, None)  # a question or a plan says no value of anything
    if attribute and typing.subject not in ("self", "none") and not attribute.startswith(f"{typing.subject}'s"):
        attribute = f"{typing.subject}'s {attribute}"  # "my sister's locker number": the sister's, not the user's
    ended = typing.cessation and typing.mood == "statement" and not typing.change
    if value is not None:
        # the value ends where the clause does: "on tenuous grounds, but he is staying positive"
        value = re.split(r",\s*(?:but|and|so|because|which|though)\b|[;；]|，\s*(?:但|不过|因为|所以)", value)[0].strip()
    if value is None and not ended:
        value = _vocabulary_value(registry.slot_of(key) or typing.slot, text)
    if value is not None and len(value) > MAX_SHOWN_VALUE:
        return Said(label, None, ended)  # "working on a business plan and looking for investors ...": not a value
    return Said(attribute, None if ended or value is None else _as_written(text, value), ended)


def _vocabulary_value(slot: str | None, text: str) -> str | None:
    """The values of a closed vocabulary a sentence names, as the sentence writes them ("English, Portuguese" of "I
    speak English and Portuguese"), for a slot that has one (ledger/lexicon.py); else None."""
    from .lexicon import LANGUAGE_RE, base_slot, slot_values

    base = base_slot(slot)
    if base == "profile.languages":
        t = unicodedata.normalize("NFC", text)
        low = t.lower()
        spans = [m.span() for m in LANGUAGE_RE.finditer(low)]
        said = [t[a:b] if len(low) == len(t) else low[a:b] for a, b in spans]  # in the sentence's own letters
        return ", ".join(dict.fromkeys(said)) or None
    if base == "health.allergy":
        return ", ".join(sorted(slot_values(base, text))) or None
    return None


def _as_written(text: str, value: str) -> str:
    """``value`` (read from the lower-cased sentence) in the sentence's own letters: "Berlin", not "berlin"."""
    i = unicodedata.normalize("NFC", text).lower().replace("’", "'").find(value)
    return text[i:i + len(value)] if i >= 0 and len(text) == len(text.lower()) else value
