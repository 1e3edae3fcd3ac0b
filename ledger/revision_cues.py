"""The words and small readings the rules of :mod:`ledger.resolution` consult: what a statement names as replaced
("instead of ..."), lists ("tennis and golf"), change and revision hints, episodes dated in the past, third-person
narrative, a household's "we". Kept apart so that the rules read as rules."""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING, Any

from .lexicon import allergens, diet_of, language_names
from .slots import _GENERIC_STEMS, GENERIC, content_tokens, type_statement
from .text import has_cjk
from .values import ValueParts, cjk_bigrams, value_parts

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
                            r"from (?:today|now|next|this)|as of|left|replaced|swapped|instead|no longer)\b|"
                            r"跳槽|走了|涨租|涨了|降了|下个月开始|从下个月|从今天|以后|换了|新的", re.I)
#: a sentence that says what holds now, whatever happened before ("reset the router yesterday, wifi's now ...")
NOW = re.compile(r"\bnow\b|现在|如今", re.I)
#: a sentence dated in the past ("five years ago", "last week", 三年前) tells an episode
PAST_EVENT = re.compile(r"\b(?:ago|yesterday|last (?:week|month|year|night|friday|saturday|sunday|monday|tuesday|"
                         r"wednesday|thursday)|the day before)\b|\d+\s*年前|昨天|上周|去年|前天", re.I)
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


def cue_clause_tokens(text: str, registry: Any, user_name: str | None) -> set[str]:
    """The value words of the clause that carries a cessation or correction ("I've given up the football, my knee
    can't take it" -> football), or an empty set when the sentence is one clause or no clause carries the cue."""
    clauses = [c for c in _CLAUSES.split(text) if c and c.strip()]
    if len(clauses) < 2:
        return set()
    for clause in clauses[:MAX_CLAUSES]:
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
    return re.compile(rf"(?<!\w){re.escape(v)}(?!\w)")


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
    clauses = [c for c in _CLAUSES.split(text) if c and c.strip()][:MAX_CLAUSES]
    if len(clauses) < 2:
        return False
    theirs = content_tokens(memory) - GENERIC - _GENERIC_STEMS
    shared = [c for c in clauses if (content_tokens(c) - GENERIC - _GENERIC_STEMS) & theirs]
    return bool(shared) and len(shared) < len(clauses) and \
        all(value_parts(c).negated == memory_negated for c in shared)
