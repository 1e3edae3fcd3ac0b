"""The words and small readings the rules of :mod:`ledger.resolution` consult: what a statement names as replaced
("instead of ..."), lists ("tennis and golf"), change and revision hints, episodes dated in the past, third-person
narrative, a household's "we". Kept apart so that the rules read as rules."""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING, Any

from .attributes import corrected
from .lexicon import allergens, diet_of, language_names
from .slots import _GENERIC_STEMS, GENERIC, OLD_VALUE, content_tokens, type_statement
from .text import has_cjk
from .values import VALUE_KINDS, ValueParts, name_words, value_parts

if TYPE_CHECKING:
    from .slots import KeyRegistry


#: a statement that names what it replaces: "instead of the 42 bus", "rather than tea", 不再X / 不X了，改Y
INSTEAD = re.compile(r"\b(?:instead of|rather than|in place of|replac(?:ed|ing) (?:my |the )?)\s*([^,.;]+)|"
                      r"\b(?:traded|swapped|exchanged)(?: in)? (?:my |the |our )?([^,.;]+?) for\b|"
                      r"不再([^，,。]{1,10})[，,]?\s*(?:改|换|而是)|不([^，,。]{1,8})了[，,]\s*(?:改|换)", re.I)
#: words that make "also" part of a replacement, not an addition ("I now also ..." still adds)
REPLACING = re.compile(r"\b(?:instead|switched|switch(?:ing)? to|no longer|replaced|moved to)\b|"
                       r"改成|换成|改为|换为|调成|调到|改到|变成|不再|以后(?:是|改|都是)", re.I)


#: the prepositions of a verb reading, left out when two verbs are compared ("work in" / "live in")
PREPOSITIONS = frozenset({"in", "on", "at", "to", "for", "from", "with", "by", "into"})
#: verbs of a standing state, each its own attribute: "work in Cambridge" does not revise "live in Boston"
STATE_VERBS = frozenset({"liv", "live", "work", "stud", "study", "teach", "stay"})

#: a superlative preference: one value even where the slot holds several (hobbies)
FAVOURITE = re.compile(r"\bfavou?rite\b|\bthe (?:best|one) i like\b|最喜欢|最爱", re.I)

#: a word joined to a list ("tennis and golf", "a cat and a dog", 猫和狗, 英语、法语)
LIST_ITEM = re.compile(r"(?:,|\band\b|\bplus\b|&|和|、|跟|还有)\s*(?:(?:a|an|the|my|some|two|three)\s+)?([^\W\d_]+)")


def listed_words(text: str) -> set[str]:
    """The content tokens of the words ``text`` adds to a list: a value beside another, never a rewording."""
    return {t for m in LIST_ITEM.finditer(text) for t in content_tokens(m.group(1))}


def lexicon_blind(changed: list[str], mine: ValueParts, theirs: ValueParts) -> list[str]:
    """What differs between two statements naming the same closed-vocabulary values, besides what the vocabulary
    already compared: names (Cantonese / 广东话), negation ("a hard no", 碰不得: the way an allergy is said) and a
    numeral inside a word that counts the values listed (这三种)."""
    out = [k for k in changed if k not in ("negation", "name")]
    if out == ["number"] and not (mine.parts.get("number") or theirs.parts.get("number")):
        return []
    return out


def cue_words(slot_key: str, words: set[str], registry: KeyRegistry) -> set[str]:
    """The ``words`` (value tokens) that are cues of the slot ``slot_key`` names ("engag" of "engaged" in
    relationship.status): values of the slot, not rewording."""
    from .slots import CATALOGUE

    base = slot_key.split(".", 2)[2] if slot_key.startswith("family.") else slot_key
    slot = next((s for s in CATALOGUE if s.key == base), None)
    if slot is None:
        return set()
    return {w for w in words if any(p.search(w) or any(p.search(w + suf) for suf in ("e", "ed", "ing", "s"))
                                    for p in slot.patterns)}


#: the value kinds that name one value exactly (a name or a qualifier may be one of several)
#: words that say a change happened, not what it is about
CHANGE_WORDS = set("now new changed change reset raised raise bumped moved switched got started starting updated "
                    "again reshuffled these days".split()) | set("换改变新现在成了")
CHANGE_STEMS = {t for w in CHANGE_WORDS for t in content_tokens(w)} | CHANGE_WORDS


#: words that say a value was replaced, beside the change markers of the typing ("they reassigned the lockers",
#: "the landlord hiked it", "from next month", 跳槽走了, 涨租): used only where a value of the same kind is given
REVISION_HINT = re.compile(r"\bmoved (?:\w+ ){1,3}(?:over )?to\b|\bexpired\b|\b(?:reassigned|re-?assigned|shuffled|gave me|put me|moved me|hiked|different|"
                            r"from (?:today|now|next|this|january|february|march|april|may|june|july|august|september|"
                            r"october|november|december)|as of|left|replaced|swapped|instead|no longer)\b|"
                            r"跳槽|走了|涨租|涨了|降了|下个月开始|从下个月|从今天|以后|换了|新的", re.I)
#: a sentence that says what holds now, whatever happened before ("reset the router yesterday, wifi's now ...")
NOW = re.compile(r"\bnow\b|现在|如今", re.I)
#: a sentence dated in the past ("five years ago", "last week", 三年前) tells an episode
PAST_EVENT = re.compile(r"\b(?:ago|yesterday|last (?:week|month|year|night|friday|saturday|sunday|monday|tuesday|"
                         r"wednesday|thursday)|the day before)\b|\d+\s*年前|昨天|上周|去年|前天|"
                         # a value said as the old one: slots.OLD_VALUE, 以前的地址是 ...
                         + OLD_VALUE + r"|(?:以前|之前|原来)的[^，,。]{1,8}是", re.I)
NARRATIVE_STARTS = set("The My Our I We It This That There These Those His Her Their A An On In At For When After "
                        "Before Btw Oh So And But Also Now Sorry Actually Oops Hmm Well Yes No Ok Okay Just Got Started "
                        "Traded Cleared Swim Rent Landlord Netflix Parking Our Every Movie Wednesdays They He She You Someone Everyone "
                        "Everything Nothing Gym Birthday Home Work".split())


def is_narrative(text: str, user_name: str | None) -> bool:
    """Whether ``text`` is third-person narrative: it opens with a name (the user's, or another capitalised word
    followed by a verb or a possessive) rather than with I / my / a noun phrase."""
    t = unicodedata.normalize("NFC", text).strip()
    if user_name and re.match(rf"{re.escape(user_name)}(?:'s|’s)?\b", t, re.I):
        return True
    m = re.match(r"([A-Z][a-z]+)(?:'s|’s)?\s+(?:is|was|has|had)\b", t)
    # a language, an allergen or a diet opening the sentence is its topic, not a person ("Portuguese is the one
    # I'm good at")
    return bool(m) and m.group(1) not in NARRATIVE_STARTS and not (language_names(m.group(1)) or allergens(m.group(1))
                                                                   or diet_of(m.group(1)))


#: the user speaking for the household
WE = re.compile(r"\b(?:we|we've|we're|us|our)\b|我们|咱们|咱家|我家", re.I)
#: the subjects a household's "we" speaks for
FAMILY = {"son", "daughter", "children", "wife", "husband", "partner"}

#: value kinds that are one per person and attribute: a new one replaces the one memory that holds one
PERSONAL = ("email", "phone", "url")


def names_replacement(text: str) -> bool:
    return bool(REPLACING.search(text))


_CLAUSES = re.compile(r"[,;，；。!?！？—]|\.(?=\s|$)|\s(?:because|since|so|but|as|and now|which|after)\s", re.I)


#: the clauses of a statement read for its cue: a statement says what stopped near its start, and a pasted document
#: would be typed clause by clause otherwise
MAX_CLAUSES = 12


def clauses(text: str) -> list[str]:
    """The statement's clauses (split at punctuation and joining words), the first :data:`MAX_CLAUSES` of them."""
    return [c for c in _CLAUSES.split(text) if c and c.strip()][:MAX_CLAUSES]


def cue_clause_tokens(text: str, registry: Any, user_name: str | None) -> set[str]:
    """The value words of the clause that carries a cessation or correction ("I've given up the football, my knee
    can't take it" -> football), or an empty set when the sentence is one clause or no clause carries the cue."""
    parts = clauses(text)
    if len(parts) < 2:
        return set()
    for clause in parts:
        t = type_statement(clause, registry, user_name)
        if t.cessation or t.correction:
            return {w for w in t.value_tokens if "'" not in w}
    return set()


def wrong_value(value: str) -> re.Pattern[str] | None:
    """How a value a correction calls wrong is found in a memory: as a word of its own ("8" in "8pm", not in "18"),
    or, for three digits or more, as the end of a longer run ("5678" of "13812345678": "the last four digits")."""
    v = unicodedata.normalize("NFKC", value).strip().lower()
    if not v or len(v) > 40:
        return None
    if v.isdigit():
        return re.compile(rf"(?<![0-9]){v}(?![0-9])" + (rf"|[0-9]+{v}(?![0-9])" if len(v) >= 3 else ""))
    if len(v) < 2:
        return None
    if has_cjk(v):
        return re.compile(re.escape(v))  # Chinese has no spaces: 周三 is found inside 每周三晚上
    return re.compile(rf"(?<!\w){re.escape(v)}(?!\w)")


def wrong_value_holder(text: str, candidates: list[Any], eligible: Any) -> tuple[Any, tuple[str, str]] | None:
    """The one current memory among ``candidates`` (those ``eligible`` accepts) holding, as written, the value a
    correction calls wrong ("9pm, not 8", 我之前写成周三了), with the (right, wrong) pair; None when none or several."""
    pair = corrected(text)
    wrong = wrong_value(pair[1]) if pair else None
    holding = [c for c in candidates if c.status in ("current", "contested") and eligible(c)
               and wrong.search(unicodedata.normalize("NFKC", c.text).lower())] if wrong else []
    return (holding[0], pair) if len(holding) == 1 and pair else None


def says_more(old: str, new: str) -> bool:
    """Whether ``new`` says all ``old`` says and adds a clause of its own: every content word of ``old`` is in
    ``new``, and a clause of ``new`` (split at commas, semicolons, "and", "but") has two content words or more, none
    of them ``old``'s ("my wifi password is tiger123 and my router is in the kitchen"). English only: a Chinese
    clause after a paraphrase is mostly how the user knows it (献血的时候测过)."""
    if has_cjk(old) or has_cjk(new):
        return False
    a = content_tokens(old) - GENERIC - _GENERIC_STEMS
    if not a or not a <= content_tokens(new):
        return False
    for clause in re.split(r"[,;]|\b(?:and|but)\b", new, flags=re.I):
        words = content_tokens(clause) - GENERIC - _GENERIC_STEMS
        if len(words) >= 2 and not words & a:
            return True
    return False


def negation_elsewhere(text: str, memory: str, memory_negated: bool) -> bool:
    """Whether the statement's negation sits only in clauses that share no word with the memory, the clauses that
    do share being as negated as the memory ("头发一直都是万达三楼的阿杰给我剪的，换别人我不放心" of "我剪头发一直找阿杰":
    the "not" is about anyone else): then the negation says nothing of the memory's value. False for one clause."""
    parts = clauses(text)
    if len(parts) < 2:
        return False
    theirs = content_tokens(memory) - GENERIC - _GENERIC_STEMS
    shared = [c for c in parts if (content_tokens(c) - GENERIC - _GENERIC_STEMS) & theirs]
    return bool(shared) and len(shared) < len(parts) and \
        all(value_parts(c).negated == memory_negated for c in shared)


_PARTNER_EN = r"(?:boyfriend|girlfriend|husband|wife|partner|fianc[eé]e?)"
#: the user's partner named by role ("my boyfriend Tom", "Marcus, my boyfriend", "I've been seeing Hannah"); the
#: name is read with its capital, so the pattern runs on the text as written. "my ex-boyfriend Tom" names no partner.
_PARTNER_NAMED_EN = re.compile(
    rf"\b[Mm]y (?:new |current )?{_PARTNER_EN},? (?P<a>[A-Z][a-z]+)\b|\b(?P<b>[A-Z][a-z]+),? my (?:new |current )?"
    rf"{_PARTNER_EN}\b|\b(?:been seeing|started seeing|dating|going out with|engaged to|married to) (?P<c>[A-Z][a-z]+)\b"
    r"|\b(?:dating|seeing) (?:someone|somebody|a (?:guy|girl|woman|man)) (?:named|called) (?P<d>[A-Z][a-z]+)\b"
    rf"|\b[Mm]y {_PARTNER_EN}'s name is (?P<e>[A-Z][a-z]+)\b|\b[Mm]y (?:new |current )?{_PARTNER_EN} is (?P<f>[A-Z][a-z]+)\b"
    # "I'm seeing Alex now": the name ends the phrase ("I'm seeing Priya at the same shop" is a barber)
    r"|\b(?:I'm|I am|i'm) (?:now )?seeing (?!(?:Dr|Mr|Mrs|Ms|Prof|Doctor|Nurse)\b)(?P<g>[A-Z][a-z]+)(?= now\b|[.,!;]|$)")
_SURNAMES = ("王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔"
             "钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史黎贺顾毛郝龚邵万钱覃武戴孔汤庞樊兰殷施陶洪翟安颜倪严牛"
             "温芦季俞章鲁葛伍申尤毕聂柴焦向柳邢骆岳齐梅莫庄辛管祝左涂谷祁时舒耿牟卜路詹关苗凌费纪靳盛童欧甄项曲成游阳裴席卫"
             "查屈鲍位覃霍翁隋植甘景薄单包司柏宁柯阮桂闵欧阳解强丛华车冉房边辜吉饶刁瞿戚丘米池滕晋苑邬臧畅宫来嵺苟全褚廉简娄")
#: 我男朋友叫陈浩 / 和男朋友周毅: a surname and one or two characters, or 小/阿 and one; what follows a name (去, 是, 说 ...) ends it
_PARTNER_NAMED_ZH = re.compile(rf"(?:男朋友|女朋友|男友|女友|老公|老婆|丈夫|妻子|对象|未婚夫|未婚妻)叫?"
                               rf"(?P<z>[{_SURNAMES}][\u4e00-\u9fff]{{1,2}}|[小阿][\u4e00-\u9fff])"
                               rf"|和(?P<w>[{_SURNAMES}][\u4e00-\u9fff]{{1,2}}?|[小阿][\u4e00-\u9fff])(?:约会|在一起|谈恋爱|交往|谈朋友)")
_AFTER_NAME = set("去是在和跟说的了也都就他她又还今昨明每这那想要会给带陪送请让对把被从到很挺")
#: capitalised words that open a sentence and name no one ("Honestly, my boyfriend ...")
_NOT_NAMES = set("honestly well so yes no okay ok anyway also and but today yesterday tonight sometimes actually sadly "
                 "luckily apparently basically seriously thankfully obviously now then oh ah hey guess what sorry "
                 "monday tuesday wednesday thursday friday saturday sunday "
                 # what a partner "is" without being a name: "My wife is French", "my husband is Catholic"
                 "french german spanish italian english british american canadian australian irish scottish welsh "
                 "dutch swiss swedish norwegian danish finnish polish russian ukrainian chinese japanese korean indian "
                 "mexican brazilian portuguese greek turkish jewish catholic christian muslim buddhist hindu vegan "
                 "vegetarian pregnant retired".split())


def partner_names(text: str) -> set[str]:
    """The names a statement gives the user's partner (lower-cased; empty when it names none): "My boyfriend Tom",
    "My boyfriend is Tom", "Marcus, my boyfriend", "I've been seeing Hannah", "I'm seeing Alex now", 我男朋友叫陈浩,
    和男朋友周毅去厦门."""
    out = {next(g for g in m.group("a", "b", "c", "d", "e", "f", "g") if g).lower()
           for m in _PARTNER_NAMED_EN.finditer(text)}
    out -= _NOT_NAMES
    for m in _PARTNER_NAMED_ZH.finditer(unicodedata.normalize("NFC", text)):
        if m.group("w"):  # 和李明约会: the verb after it ends the name
            out.add(m.group("w"))
            continue
        name = m.group("z")
        if len(name) == 3 and name[-1] in _AFTER_NAME:
            name = name[:2]
        if name[-1] not in _AFTER_NAME:
            out.add(name)
    return out


def partner_renamed(text: str, candidates: list[Any]) -> Any | None:
    """The current memory naming the user's partner by another name than the statement does ("My boyfriend Tom ..."
    of "Marcus, my boyfriend, ..."), the best-scored if several, or None. Only a memory outside the catalogue, in
    ``relationship.status`` or about the partner (``family.partner.*``): one in another slot of the user's ("My wife
    Anna and I live in Berlin") says more than who the partner is."""
    names = partner_names(text)
    if not names:
        return None
    was = [c for c in candidates if c.status == "current"
           and (c.slot_key in (None, "relationship.status") or (c.slot_key or "").startswith("family.partner."))
           # a memory kept under another person (family.sister.memory.*: "my husband Mark" said by the sister)
           and not (c.key.startswith("family.") and not c.key.startswith("family.partner."))
           and (theirs := partner_names(c.text)) and theirs.isdisjoint(names)]
    return max(was, key=lambda c: c.score) if was else None


#: words that narrow a value to a case rather than replace it ("I only drink the oolong in the afternoons")
NARROWING = {"only", "mostly", "just", "usually", "mainly", "generally", "normally", "只", "主要", "一般"}


def narrows(memory_tokens: set[str], tokens: set[str], values: ValueParts) -> bool:
    """Whether a statement says the memory's value again and adds only a qualifier it lacks, with a narrowing word
    or none ("I only drink the oolong in the afternoons" of "I drink oolong from a little tea shop"): another case of
    the same value, kept beside it, not a new value."""
    qualifier_words = {t for vs in values.qualifiers.values() for v in vs for t in content_tokens(v)}
    extra = tokens - memory_tokens
    return bool(tokens & memory_tokens) and bool(extra & qualifier_words) and extra <= qualifier_words | NARROWING


#: the thing a change puts in new: "got a new filter", "replaced the pump", 换了个新过滤器, 新装了隔音棉
_NEW_PART = re.compile(r"\b(?:got|bought|fitted|installed|put in|ordered) (?:a |an |some )?new ([a-z]+(?: [a-z]+)?)|"
                       r"\b(?:changed|replaced|swapped|upgraded) (?:the|its|their) ([a-z]+)\b|"
                       r"(?:换|装|买|配)了?(?:个|一个|一台|一只|一套|套|台|只)?新的?([\u4e00-\u9fff]{2,4}?)(?=[，,。！!？?；;了]|$)|"
                       r"新(?:装|换|买|配)了?(?:个|一个|一套|套)?([\u4e00-\u9fff]{2,4}?)(?=[，,。！!？?；;了]|$)", re.I)


def other_part(text: str, memory: str) -> bool:
    """Whether ``text`` says a part or an accessory of what ``memory`` is about was put in new ("孔雀鱼那缸换了个新过滤器"
    of "养了一缸孔雀鱼"): the thing changed is one the memory does not name, so the memory is not what changed."""
    m = _NEW_PART.search(text)
    if m is None:
        return False
    part = next(g for g in m.groups() if g)
    if has_cjk(part):
        return not any(ch in memory for ch in part if ch not in "新个的")
    return not content_tokens(part) & content_tokens(memory)


def says_more_of(text: str, memory: str, mine: ValueParts, theirs: ValueParts) -> bool:
    """Whether a statement marked as a change says more of what ``memory`` names rather than replacing it: a part
    put in new (:func:`other_part`), or each of the names a memory lists said again with no value of a kind the
    memory holds that it does not ("Noah just started kindergarten and Ella's in third grade" of "two kids, Noah and Ella")."""
    if other_part(text, memory):
        return True
    names = name_words(theirs)  # a memory listing several ("two kids, Noah and Ella"), each named again
    if len(names) < 2 or not all(re.search(rf"(?<!\w){re.escape(n)}(?!\w)", text.lower()) for n in names):
        return False
    return not any(mine.parts.get(k, frozenset()) - theirs.parts[k] for k in VALUE_KINDS if theirs.parts.get(k))
