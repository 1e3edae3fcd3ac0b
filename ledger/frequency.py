"""How often something is done, read as a rate per day so that one frequency said two ways compares equal: "every
10 days" = 十天一回 = 0.1, "once a week" = 一周一次 = 每周一次 = 0.143, "twice a week" = 每周两次 = 0.286, "every two
weeks" = 每两周一次 ≈ 半个月一回 (0.071 / 0.067: rates within :data:`TOLERANCE` are one frequency said loosely).
No I/O, no model. Used by ledger/values.py as the value part ``every``."""

from __future__ import annotations

import re

from .numerals import en_number_words, zh_number

#: two rates closer than this share of the larger are the same frequency ("every two weeks" / "half a month")
TOLERANCE = 0.1
_DAYS = {"day": 1, "days": 1, "week": 7, "weeks": 7, "fortnight": 14, "fortnights": 14, "month": 30, "months": 30,
         "天": 1, "日": 1, "周": 7, "星期": 7, "礼拜": 7, "月": 30}
_COUNT_EN = {"once": 1, "twice": 2, "thrice": 3}
_NUM_EN = r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fourteen|fifteen|twenty|thirty)"
#: "twice a week", "three times per month", "once-a-week"; "every 10 days", "every other week", "every two weeks"
_EN = re.compile(rf"\b(once|twice|thrice|{_NUM_EN}[- ]times)[- ](?:a|per|each|every)[- ](day|week|fortnight|month)\b|"
                 rf"\bevery[- ](other|{_NUM_EN})[- ](days?|weeks?|fortnights?|months?)\b", re.I)
_ZH_NUM = r"[零一二两三四五六七八九十半\d]+"
#: 一周浇一次, 每两周一次, 十天浇一回, 半个月一回, 每周三次 (每周三 alone is a weekday: a count needs 次/回/趟 after it)
_ZH = re.compile(rf"(?:每|一)?({_ZH_NUM})?个?(天|日|周|星期|礼拜|月)[^，,。；;\d\s]{{0,3}}?({_ZH_NUM})(?:次|回|趟)")


def _number(word: str) -> float | None:
    if word.isdigit():
        return float(word)
    if word == "半":
        return 0.5
    return zh_number(word) if re.fullmatch(r"[零一二两三四五六七八九十]+", word) else en_number_words(word)


def frequencies(text: str) -> list[tuple[tuple[int, int], str]]:
    """The frequencies said in ``text``: each as (its span, its rate per day written to three significant figures,
    e.g. "0.143")."""
    out = []
    for m in _EN.finditer(text):
        if m.group(1):
            word = m.group(1).lower().split("-")[0].split(" ")[0]
            count = _COUNT_EN.get(word) or _number(word)
            per = _DAYS[m.group(2).lower()]
        else:
            count = 1.0
            every = m.group(3).lower()
            per = (2 if every == "other" else (_number(every) or 0)) * _DAYS[m.group(4).lower()]
        if count and per:
            out.append((m.span(), f"{count / per:.3g}"))
    for m in _ZH.finditer(text):
        periods = _number(m.group(1)) if m.group(1) else 1.0
        count = _number(m.group(3))
        if periods and count:
            out.append((m.span(), f"{count / (periods * _DAYS[m.group(2)]):.3g}"))
    return out


def same_rate(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two sets of rates (from :func:`frequencies`) say the same frequencies, each within
    :data:`TOLERANCE`."""
    if len(a) != len(b):
        return False
    return all(any(abs(float(x) - float(y)) <= TOLERANCE * max(float(x), float(y)) for y in b) for x in a)
