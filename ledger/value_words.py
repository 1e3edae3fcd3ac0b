"""Word-level helpers of value comparison: a name written short ("Beacon St." / "Beacon Street"), a shared Chinese
word or character pair, whether a text names a relative. No I/O, no model."""

from __future__ import annotations

import re
from typing import Callable

from .subjects import RELATIONS_EN, RELATIONS_ZH
from .text import STOP_ZH, has_cjk


def abbreviates(short: str, long: str) -> bool:
    """Whether ``short`` is a written short form of ``long``: "st." of "street" (or "saint"), "ave" of "avenue",
    "dr" of "doctor": at most four letters, the same first letter, its letters in order in the longer word."""
    short, long = short.rstrip(".").lower(), long.rstrip(".").lower()
    if not short or len(short) > 4 or len(short) >= len(long) or short[0] != long[0] or not short.isalpha():
        return False
    rest = iter(long)
    return all(ch in rest for ch in short)


def names_within(words: set[str], others: set[str]) -> bool:
    """Whether every name word of ``words`` is one of ``others``, written in full or short ("Beacon St." within
    "Beacon Street")."""
    return all(any(w.rstrip(".") == o.rstrip(".") or abbreviates(w, o) or abbreviates(o, w) for o in others)
               for w in words)


def shared_cjk_word(a: str, b: str) -> bool:
    """Whether two Chinese sentences share a run of three or more characters that are not function words (褪黑素,
    钟点工): a named thing, as distinctive as a shared name."""
    if not (has_cjk(a) and has_cjk(b)):
        return False
    import difflib

    m = difflib.SequenceMatcher(None, a, b, autojunk=False).find_longest_match(0, len(a), 0, len(b))
    run = a[m.a:m.a + m.size]
    return m.size >= 3 and sum(1 for ch in run if has_cjk(ch) and ch not in STOP_ZH) >= 3


def cjk_bigrams(text: str) -> set[str]:
    """The pairs of adjacent Chinese characters in ``text`` neither of which is a function character (快递, 驿站, 羽毛)."""
    return {text[i:i + 2] for i in range(len(text) - 1)
            if has_cjk(text[i]) and has_cjk(text[i + 1]) and text[i] not in STOP_ZH and text[i + 1] not in STOP_ZH}


def names_relative(text: str, subject: str) -> bool:
    """Whether ``text`` names the relative ``subject`` ("brother", "daughter", ...; "swim practice for my daughter"
    names the daughter); never for the user ("self") or no one ("none")."""
    if subject in ("self", "none"):
        return False

    words = [w for w, rel in {**RELATIONS_EN, **RELATIONS_ZH}.items() if rel == subject]
    low = text.lower()
    return any((w in low) if has_cjk(w) else re.search(rf"\b{re.escape(w)}\b", low) for w in words)



_CLAUSE = re.compile(r"[，,。；;！!？?]")


def clause_unsaid(text: str, old: str, valued: Callable[[str], bool]) -> bool:
    """Whether a Chinese statement has a clause ``old`` does not say: one sharing no character pair with it
    (刘医生是口腔医院正畸科的，我这副牙套就是她给我戴的), unless that clause is a remark holding no value (``valued``: a
    number, name, date or code) beside a clause saying ``old`` again with at most three characters of its own
    besides common words (血型的话我是O型，献血的时候测过)."""
    clauses = [cl for cl in _CLAUSE.split(text) if cl.strip()]
    theirs = cjk_bigrams(old)
    apart = [cl for cl in clauses if len(cjk_bigrams(cl)) >= 2 and not cjk_bigrams(cl) & theirs]
    if not apart:
        return False
    if any(valued(cl) for cl in apart):
        return True
    own = [{ch for ch in cl if has_cjk(ch) and ch not in old and ch not in STOP_ZH} for cl in clauses if cl not in apart]
    return not any(len(chars) <= 3 for chars in own)


_NUMBERED_EN = re.compile(r"\b([a-z][a-z-]+)(?:'s|\s+(?:is|was)|\s*[:=])?\s+(?:(?:no\.?|number|num\.?)\s*)?#?\s*"
                          r"\d+(?![\d.,:])"
                          r"(?!\s*(?:k|km|kg|g|lbs?|mi|miles?|minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?|"
                          r"am|pm|%|percent|times|x|st|nd|rd|th)\b)")
#: what a Chinese number names: 56号柜, 5号楼, 柜子203, 车位B12 (a noun character beside the number)
_ZH_NUMBERED = "柜楼线床房位门窗桌座库室间铺舍栋"
_NUMBERED_ZH = re.compile(rf"\d+\s*号?([{_ZH_NUMBERED}])|([{_ZH_NUMBERED}])子?\s*(?:是|在|用)?\s*[A-Za-z]?\d+")
#: words before a number that say how much, when or where, not which thing the number names
_NOT_NUMBERED = set("a an the at by to from is was are be been around about every over under than and or of after "
                    "before till until since in on for with now just only last next like maybe roughly nearly almost "
                    "approx approximately up down into onto it its my our your his her their me us them i we he she "
                    "they this that these those got get gets paid pay costs cost spent spend per each".split())


def numbered_nouns(text: str) -> frozenset[str]:
    """The nouns a number names in ``text``: "unit" of "storage unit 214" and of "moved me to unit 318", "locker" of
    "locker number 112", 柜 of 56号柜 or 柜子203, 楼 of 5号楼; not an amount or a time ("run 5k", "at 7am"). Two
    statements that number the same noun differently give two values of one thing, whatever else they share."""
    low = text.lower()
    found = {m.group(1).strip("'-") for m in _NUMBERED_EN.finditer(low)}
    found = {w for w in found if w not in _NOT_NUMBERED and len(w) > 2}
    found |= {m.group(1) or m.group(2) for m in _NUMBERED_ZH.finditer(text)}
    return frozenset(found)
