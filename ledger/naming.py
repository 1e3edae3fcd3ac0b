"""Which memory a cessation or a correction names: "Biscuit passed away", "I gave up chess", 我放弃减肥了, "not Maine".

Read by the resolution rules (ledger/resolution.py) when a statement stops or corrects something without landing in
a catalogue slot, or in a slot holding several values. No I/O.
"""

from __future__ import annotations

import re

from .decision import Candidate
from .revision_cues import FAMILY, WE
from .slots import _GENERIC_STEMS, GENERIC, Typing, has_cjk
from .value_words import cjk_bigrams, shared_cjk_word
from .values import ValueParts, name_words


def named(pool: list[Candidate], text: str, typing: Typing, mine_vp: ValueParts,
          cue_tokens: set[str]) -> tuple[list[tuple[float, float, Candidate]], bool]:
    """The memories of ``pool`` holding the value words of ``text`` (typed as ``typing``, its value parts
    ``mine_vp``), or the words it says were wrong, best first as ``(share, score, candidate)``, and whether the best
    is the only best (a share >= 0.5, strictly ahead of the second). ``cue_tokens`` are the words of the clause that
    says what stopped or was wrong, when there is one."""
    found = []
    # "数学补习班我们不上了", "we cancelled the swim lessons": a household speaking may end what was said of a child
    we = bool(WE.search(text))
    for c in pool:
        if c.typing is None or not (c.typing.subject in ("self", "none") or (we and c.typing.subject in FAMILY)
                                    or typing.correction  # "I got it mixed up": the speaker, not the subject
                                    if typing.subject == "self"
                                    else typing.subject == "none" or c.typing.subject == typing.subject):
            # "my son quit the football league" names what of the son's it ends; a sentence naming no one
            # ("钢琴课停了") may end what was said of anyone, when it names it
            continue
        theirs = c.typing.value_tokens
        # the share of its value words the memory holds, or of the words it says were wrong ("not Maine")
        frac = max(len(typing.value_tokens & theirs) / max(1, len(typing.value_tokens)),
                   len(typing.negated_tokens & theirs) / max(1, len(typing.negated_tokens)))
        shared = typing.value_tokens & theirs
        if len(shared) >= 2 and frac < 0.5:
            # a long sentence ("褪黑素我已经停了，医生说长期吃不好...") holds the memory's words among many of its own:
            # the share of the memory's words it names counts too
            frac = max(frac, len(shared) / max(1, len(theirs)))
        if cue_tokens:
            # the clause that says what stopped ("I've given up the football", not the reason after it)
            frac = max(frac, len(cue_tokens & theirs) / len(cue_tokens))
        if (name_words(mine_vp) & name_words(c.values) or shared_cjk_word(text, c.text)
                or any(re.search(rf"(?<!\w){re.escape(w)}(?!\w)", text, re.I) for w in name_words(c.values)
                       if len(w) > 2 and not has_cjk(w))
                or any(w in text for w in name_words(c.values) if len(w) >= 2 and has_cjk(w))):  # 团子上周走了
            frac = max(frac, 0.75)  # "Cancelled Spotify last night", "Biscuit passed away": it names what it ends
        if frac < 0.6 and _only_theirs(text, cue_tokens or typing.value_tokens, c, pool):
            frac = 0.6  # "handed the allotment keys back", 闲鱼那摊子不弄了: a word of the stop's clause only it holds
        if frac > 0:
            found.append((frac, c.score, c))
    found.sort(key=lambda t: (-t[0], -t[1]))
    return found, bool(found and found[0][0] >= 0.5 and (len(found) == 1 or found[1][0] < found[0][0]))


def _only_theirs(text: str, cue_tokens: set[str], c: Candidate, pool: list[Candidate]) -> bool:
    """Whether the clause that says what stopped or was wrong (its words ``cue_tokens``; the whole statement's when it
    is one clause) shares a distinctive word with memory ``c`` and with no other memory of ``pool``: an English word of four letters or more that is not generic
    ("allotment", "podcast", a pet's name written in lower case), or a pair of Chinese characters of that clause
    (闲鱼). The words a cessation and its memory share are few; one no other memory holds still names it."""
    if not cue_tokens or c.typing is None:
        return False
    others = [o for o in pool if o is not c and o.typing is not None]
    words = {w for w in cue_tokens & c.typing.value_tokens
             if len(w) >= 4 and not has_cjk(w) and not w.isdigit() and w not in GENERIC and w not in _GENERIC_STEMS}
    if any(not any(w in o.typing.value_tokens for o in others) for w in words):
        return True
    if not has_cjk(text):
        return False
    pairs = {p for p in cjk_bigrams(text) if p[0] in cue_tokens and p[1] in cue_tokens} & cjk_bigrams(c.text)
    return any(not any(p in o.text for o in others) for p in pairs)
