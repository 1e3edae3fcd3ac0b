"""The city a statement speaks of living in, when it says so only in passing: "the aberdeen place is absolutely
baltic", "any tips for our flat in Bristol?", 杭州这梅雨季……衣服晾三天都不干. A city is read from a shipped list of
city names (ledger/data/cities.txt: GeoNames, CC BY 4.0, written by scripts/make_places.py), only inside the
phrases that place the user's home there, so a city named as a trip, a team or a person's name is no home."""

from __future__ import annotations

import functools
import re
from importlib import resources

#: names of cities that are also common English words: a place only when written with a capital
_WORDS_TOO = frozenset("reading bath nice mobile split orange tours victoria florence jackson aurora independence "
                       "surprise hope deal sale march wells best union university".split())
_HOME_EN = r"(?:place|flat|house|apartment|home|pad|room|neighbou?rhood|street|building|tenement|houseshare)"
#: a trip, not a home: 出差, 旅游, "visiting", "a weekend in"
_AWAY_ZH = re.compile(r"出差|旅游|旅行|度假|游玩|玩[几两一]天|路过|转机|开会|老家|回家|来[^，。]{0,4}玩")
_AWAY_EN = re.compile(r"\b(?:visiting|trip|holiday|vacation|weekend in|business trip|conference|layover|hometown|"
                      r"parents'|mum's|mom's|dad's|grandparents')\b")
#: a move said with its city: 搬到南京, 搬去了成都, 定居在厦门 (not 想搬到 / 打算搬去: a plan is read as one elsewhere)
_MOVED_ZH = re.compile(r"(?<![想要打算准备考虑])(?:搬到|搬去了?|搬来|定居在?|落户)([\u4e00-\u9fff]{2,4})")
#: what a Chinese sentence says of daily life at home: the laundry drying, the landlord, the flat's heating
_HOME_ZH = re.compile(r"家里|我家|我们家|屋里|屋子|衣服|小区|房东|房租|楼下|阳台|暖气|租的|出租屋|宿舍|我住|我们住")


@functools.cache
def _cities() -> tuple[frozenset[str], frozenset[str]]:
    text = resources.files("ledger").joinpath("data/cities.txt").read_text(encoding="utf-8")
    names = [line for line in text.splitlines() if line and not line.startswith("#")]
    en = {n for n in names if n.isascii()}
    en |= {n[:-5] for n in en if n.endswith(" city") and n[:-5] not in _WORDS_TOO}  # "new york" of "new york city"
    return frozenset(en), frozenset(n for n in names if not n.isascii())


_WORDS = r"[a-z][\w'.-]*(?: [a-z][\w'.-]*){0,2}"
#: the home said by the city before it ("the aberdeen place") or after it ("our flat in Bristol", "here in Leeds")
_BEFORE_HOME = re.compile(rf"\b(?:the|our|my) (?:new |little )?(?P<w>{_WORDS}) {_HOME_EN}\b", re.I)
_AFTER_HOME = re.compile(rf"\b(?:(?:our|my) (?:new )?{_HOME_EN} (?:here )?(?:in|near)|here in) (?P<w>{_WORDS})", re.I)
_HOME_AFTER = re.compile(rf"\b(?P<w>{_WORDS}) (?:has been|'s been|is) (?:my |our )?home\b", re.I)


#: a home left, not lived in: "handed the Manchester flat back", "sold our old place in York", "moved out of"
_LEFT_BEFORE = re.compile(r"\b(?:handed|gave|giving|sold|selling|left|leaving|moved out of|moving out of|cleared)"
                          r"(?: \w+)?\s*$")
_LEFT_AFTER = re.compile(r"\s+back\b|\s+(?:is|was) (?:sold|let|empty)\b")


def _city_in(words: str, at_end: bool) -> str | None:
    """The longest run of ``words`` (at their end, or their start) that is a city name, as written."""
    parts = words.split()
    en, _ = _cities()
    for size in (3, 2, 1):
        if len(parts) < size:
            continue
        run = parts[-size:] if at_end else parts[:size]
        name = " ".join(run)
        if name.lower() in en and (name.lower() not in _WORDS_TOO or name[0].isupper()):
            return name.lower()
    return None


def home_city(text: str) -> str | None:
    """The city ``text`` places the speaker's home in, lower-case English or as written in Chinese, or None: "the
    aberdeen place", "our flat in Bristol", "here in Leeds", "Norwich has been home"; 搬到南京以后; 杭州这梅雨季…衣服晾不干
    (a city said as "here", with daily life at home in the same sentence). Never a trip ("visiting Leeds", 去杭州出差)."""
    low = text.lower()
    if any("\u4e00" <= ch <= "\u9fff" for ch in text):
        _, zh = _cities()
        for m in _MOVED_ZH.finditer(text):  # 搬到南京以后通勤方便多了: a move, whatever else the sentence says
            for size in (4, 3, 2):
                if m.group(1)[:size] in zh:
                    return m.group(1)[:size]
        if _AWAY_ZH.search(text) or not _HOME_ZH.search(text):
            return None
        for m in re.finditer(r"([\u4e00-\u9fff]{2,4}?)(?:这边|这里|这儿|这)", text):
            start = m.start()
            for size in (4, 3, 2):  # the city ends where 这 begins: 杭州这梅雨季, 我们成都这边
                name = text[max(start, m.end(1) - size):m.end(1)]
                if len(name) == size and name in zh:
                    return name
        return None
    if _AWAY_EN.search(low):
        return None
    found = {city for pattern, at_end in ((_BEFORE_HOME, True), (_AFTER_HOME, False), (_HOME_AFTER, True))
             for m in pattern.finditer(text) if (city := _city_in(m.group("w"), at_end)) is not None
             and not _LEFT_BEFORE.search(low[max(0, m.start() - 24):m.start()])
             and not _LEFT_AFTER.match(low, m.end())}
    # two homes named ("got the keys to the place in Leeds ... handed the Manchester flat back"): a move between them,
    # which the words of moving say, not a home said in passing
    return next(iter(found)) if len(found) == 1 else None
