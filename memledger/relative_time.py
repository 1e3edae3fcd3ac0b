"""Make time explicit in stored text: annotate relative date phrases with the absolute date they meant.

A message saying "see you next Friday" or "三天后见" is only meaningful relative to when it was said. When an
agent reads it back days later (session resume, a state card, a fact's ``text``) the anchor is gone, so we
append the absolute date right after the phrase, never altering the original characters::

    >>> from datetime import datetime, timezone
    >>> render_annotated("see you next Friday", datetime(2023, 5, 8, 10, tzinfo=timezone.utc))
    'see you next Friday [= 2023-05-19]'

Inputs and units
----------------
- ``observed_at``: when the source said it; a timezone-aware :class:`~datetime.datetime` (naive is refused with
  :class:`~ledger.errors.BadInput`, a ``ValueError`` naming the field). Only its *local calendar date* matters.
- ``tz``: the user's IANA zone name ("Asia/Shanghai"); ``None`` means UTC. The local date is the date of
  ``observed_at`` in that zone: 2023-05-12T23:30Z is already the 13th in Shanghai, so "tomorrow" is the 14th.
- offsets (``start``/``end``) are Python ``str`` indices (code points, not bytes), half-open: ``text[start:end]
  == phrase``.
- ``resolved_date`` is a :class:`~datetime.date` in the user's zone, read with ``granularity``:

  - ``day`` — that day ("tomorrow", "in 3 days", "two weeks ago", "next Friday", 明天, 三天后, 两周前, 下周五);
    rendered ``2023-05-19``;
  - ``week`` — the Monday of that week ("next week", "last week", 下周, 上周); rendered ``week of 2023-05-15``;
  - ``month`` — the 1st of that month ("next month", 下个月, 本月); rendered ``2023-06``;
  - ``year`` — 1 January of that year ("next year", 明年, 去年); rendered ``2024``.

  Counted offsets ("in 2 weeks", "两周前", "a month ago") are exact day arithmetic (granularity ``day``):
  they name a day, not a calendar period. Month/year offsets clamp to the month's last day (Jan 31 + 1 month
  = Feb 28/29).

Conventions (chosen, documented, tested)
----------------------------------------
- Weeks start on **Monday** (ISO 8601 and the Chinese convention).
- ``next <weekday>`` / ``last <weekday>`` / ``this <weekday>`` pick the *week* first (the week after / before /
  containing the observed date), then the weekday inside it — exactly like 下周五 / 上周六 / 本周五 in Chinese.
  So said on Monday 2023-05-08, "next Friday" is 2023-05-19 (not the coming Friday, 05-12), "last Saturday"
  is 2023-05-06, "this Friday" is 2023-05-12. Said on Sunday 2023-05-14, "last Saturday" is 2023-05-06 (the
  Saturday of the previous week, not yesterday) and "this Friday" is 2023-05-12 (already past). One rule for both
  languages keeps the annotation predictable; the annotation shows the reader which reading we took.
- Only phrases with a relative cue are annotated (tomorrow/yesterday/today/tonight, in N <unit>, N <unit> ago,
  N <unit> from now, next/last/this + week|month|year|weekday; 明天/后天/昨天/前天/今天..., N天后/N周前/N个月后/
  N年前, 下周X/上周X/本周X, 下周/上周, 下个月/上个月, 明年/去年/今年...). Absolute dates ("May 7, 2023") are
  left alone, and so are bare weekdays ("on Friday", "周五": past or future is a guess), "now"/"现在" (an
  instant, and mostly a discourse word: "I like green now") and the possessive "today's" (mostly generic:
  "today's kids"). ``the next week`` / ``the last Saturday of May`` are not deictic and are skipped.

Why a grammar + rule layer around dateparser (measured with dateparser 1.5.0)
------------------------------------------------------------------------------
dateparser does the date arithmetic wherever it is right (``resolved_by="dateparser"``). It is not used to *find*
phrases, and it is not trusted for weekday phrases:

- ``search_dates`` spans are unreliable for storage offsets: "see you next Friday at the cafe" gives
  ``'next Friday at the'``; "We met on May 7, 2023 and now" gives ``'We'`` (read as Wednesday) and
  ``'2023 and now'``; "I may go" gives ``'may'``. On Chinese it truncates 下周五 to 下周 and 上周六 to 上周 (the
  week, not the day) and misses 三天后 / 两周前 entirely. So spans come from the small cue-anchored grammar
  below; every span contains a cue by construction.
- ``parse("next Friday")`` returns the *coming* Friday (2023-05-12 from Monday 05-08), which contradicts the
  convention above, and ``parse("下周五")`` / ``parse("上周六")`` return ``None``. Weekday phrases in both
  languages are therefore computed by the rule layer (``resolved_by="rule"``).
- Chinese gaps: ``parse`` returns ``None`` for Chinese numerals (三天后, 两周前 — yet ``3天后`` works), for
  以后/之后/以前/之前, 个星期/礼拜, 这周/这个月/下月/上月/下星期, 今晚/明晚/昨晚/明早 and 前年/后年. The rule layer
  rewrites these to forms dateparser reads (``3天后``, ``2周前``, ``本周``, ``明天``, ``2年前``) and lets it compute.
- If dateparser still returns ``None`` (e.g. a future version drops a form), plain calendar arithmetic — the same
  arithmetic the tests cross-check dateparser against — answers, with ``resolved_by="rule"``.
- Period phrases ("next week", "下个月") come back from dateparser as base ± 7 days / 1 month; we snap them to
  the start of the calendar period (Monday / 1st / 1 January).

Known limits: no hours/minutes ("in 3 hours" can cross midnight), no vague amounts ("a few days", 几天后,
一两天后, 半个月后), no "weekend"/周末, no "the week after next"; Chinese has no word boundaries, so a few common
collisions are guarded by look-arounds (然后天气, 之前天, 如今年轻, 过去年, 聪明天, 一下周, 下周一起) but an
unusual word can still produce a false positive.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from functools import lru_cache
from typing import Callable, Literal

import dateparser
from pydantic import BaseModel, ConfigDict, Field

from ledger.errors import BadInput

# to_local and format_local are re-exported: they belong to this module's documented names (__all__)
from .timefmt import format_local, require_aware, to_local, user_zone  # noqa: F401

__all__ = [
    "TimeMention",
    "Granularity",
    "annotate",
    "render_annotated",
    "strip_annotations",
    "to_local",
    "format_local",
]

Granularity = Literal["day", "week", "month", "year"]
Unit = Literal["day", "week", "month", "year"]

ANNOTATION_OPEN = " [= "
"""Every inserted annotation is ``ANNOTATION_OPEN + label + "]"``; labels never contain brackets."""

_ANNOTATION_RE = re.compile(r" \[= [^\[\]\n]*\]")


class TimeMention(BaseModel):
    """One relative date phrase found in a text.

    ``text[start:end] == phrase`` (code-point offsets, half-open). ``resolved_date`` is in the user's zone and
    means: the day itself (``granularity="day"``), the Monday of the week, the 1st of the month, or 1 January of
    the year. ``resolved_by`` says whether dateparser computed the date or the rule layer did.
    """

    model_config = ConfigDict(frozen=True)

    phrase: str
    start: int = Field(ge=0)
    end: int = Field(ge=0)
    resolved_date: date
    granularity: Granularity
    resolved_by: Literal["dateparser", "rule"]

    @property
    def label(self) -> str:
        """The absolute form shown in the annotation: ``2023-05-19``, ``week of 2023-05-15``, ``2023-06``,
        ``2024``."""
        d = self.resolved_date
        if self.granularity == "day":
            return d.isoformat()
        if self.granularity == "week":
            return f"week of {d.isoformat()}"
        if self.granularity == "month":
            return f"{d.year:04d}-{d.month:02d}"
        return f"{d.year:04d}"

    @property
    def annotation(self) -> str:
        """The exact string :func:`render_annotated` inserts after the phrase, e.g. ``" [= 2023-05-19]"``."""
        return f"{ANNOTATION_OPEN}{self.label}]"


# --------------------------------------------------------------------------------------------------------------
# calendar arithmetic (the rule layer's own answers; also the fallback and the tests' cross-check)


def _add_months(d: date, months: int) -> date:
    """Shift by whole months, clamping the day to the target month's length (Jan 31 + 1 -> Feb 28/29)."""
    index = d.year * 12 + (d.month - 1) + months
    year, month0 = divmod(index, 12)
    day = min(d.day, calendar.monthrange(year, month0 + 1)[1])
    return date(year, month0 + 1, day)


def _shift(d: date, amount: int, unit: Unit) -> date:
    if unit == "day":
        return d + timedelta(days=amount)
    if unit == "week":
        return d + timedelta(weeks=amount)
    if unit == "month":
        return _add_months(d, amount)
    return _add_months(d, 12 * amount)


def _period_start(d: date, unit: Unit) -> date:
    if unit == "week":
        return d - timedelta(days=d.weekday())
    if unit == "month":
        return d.replace(day=1)
    if unit == "year":
        return d.replace(month=1, day=1)
    return d


# --------------------------------------------------------------------------------------------------------------
# what a matched phrase means


@dataclass(frozen=True)
class _Intent:
    """A phrase reduced to its meaning.

    kind ``offset``: ``amount`` units from the base day (granularity day).
    kind ``period``: the calendar ``unit`` containing the base day, shifted by ``amount`` (granularity = unit).
    kind ``weekday``: ``weekday`` (0 = Monday) of the week shifted by ``amount`` weeks (rule layer only).
    ``query``/``lang``: what to hand dateparser (``None``: the rule layer answers).
    """

    kind: Literal["offset", "period", "weekday"]
    amount: int
    unit: Unit
    weekday: int | None = None
    query: str | None = None
    lang: str = "en"


_EN_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}
_EN_WEEKDAYS = {
    "monday": 0, "tue": 1, "tues": 1, "tuesday": 1, "wednesday": 2, "thu": 3, "thur": 3, "thurs": 3,
    "thursday": 3, "fri": 4, "friday": 4, "saturday": 5, "sunday": 6,
}
_EN_DAYWORDS = {
    "the day after tomorrow": 2, "the day before yesterday": -2, "tomorrow": 1, "yesterday": -1,
    "tonight": 0, "today": 0,
}
_EN_SHIFT = {"next": 1, "last": -1, "this": 0}

_CN_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_CN_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_CN_SHIFT = {"下下": 2, "上上": -2, "下": 1, "上": -1, "本": 0, "这": 0}
_CN_UNITS: dict[str, Unit] = {
    "天": "day", "日": "day", "周": "week", "星期": "week", "个星期": "week", "礼拜": "week", "个礼拜": "week",
    "个月": "month", "年": "year",
}
# the form of each unit dateparser's Chinese data reads ("2个星期后" -> None, "2周后" works)
_CN_CANON_UNIT = {"day": "天", "week": "周", "month": "个月", "year": "年"}
# day words: offset in days, and the form dateparser reads (今晚/明晚/昨晚/明早/今早 -> None in dateparser 1.5)
_CN_DAYWORDS = {
    "大后天": (3, "大后天"), "大前天": (-3, "大前天"), "后天": (2, "后天"), "前天": (-2, "前天"),
    "明天": (1, "明天"), "明早": (1, "明天"), "明晚": (1, "明天"), "昨天": (-1, "昨天"), "昨晚": (-1, "昨天"),
    "今天": (0, "今天"), "今晚": (0, "今天"), "今早": (0, "今天"),
}
# periods: the forms dateparser reads for a shift of -1, 0, +1 (larger shifts become "2周后" etc.)
_CN_PERIOD_CANON = {
    "week": {-1: "上周", 0: "本周", 1: "下周"},
    "month": {-1: "上个月", 0: "本月", 1: "下个月"},
    "year": {-1: "去年", 0: "今年", 1: "明年"},
}
_CN_YEARS = {"今年": 0, "明年": 1, "去年": -1, "后年": 2, "前年": -2}


def _cn_number(s: str) -> int | None:
    """Arabic (incl. full-width) or Chinese numerals up to 99: 3, ３, 三, 两, 十, 十二, 二十, 二十三."""
    if s.isdigit():
        return int(s)
    if "十" not in s:
        return _CN_DIGITS[s] if len(s) == 1 and s in _CN_DIGITS else None
    tens, _, ones = s.partition("十")
    if "十" in ones or len(tens) > 1 or len(ones) > 1 or tens == "零" or ones == "零":
        return None
    t = 1 if tens == "" else _CN_DIGITS.get(tens)
    o = 0 if ones == "" else _CN_DIGITS.get(ones)
    if t is None or o is None or (tens == "两" and s != "两"):
        return None
    return t * 10 + o


def _cn_offset_query(amount: int, unit: Unit) -> str:
    return f"{abs(amount)}{_CN_CANON_UNIT[unit]}{'后' if amount >= 0 else '前'}"


# ---- the grammar: (compiled pattern, function turning the match into an intent or None) ------------------------

_WS = r"[ \t]+"
_EN_NUM = r"(?P<n>[0-9]{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_EN_UNIT = r"(?P<unit>day|week|month|year)s?"
# abbreviations that are also English words ("this sun", "last sat", "mon", "wed") are left out
_EN_WEEKDAY = r"(?P<wd>monday|tuesday|tues|tue|wednesday|thursday|thurs|thur|thu|friday|fri|saturday|sunday)"
_EN = re.IGNORECASE | re.ASCII  # ASCII: no Unicode case folding (the Kelvin sign is not a 'k'); \b is ASCII
_NOT_THE = r"(?<!\bthe )"  # "the next week", "the last Saturday of May" are not deictic


def _en_number(s: str) -> int:
    s = s.lower()
    return int(s) if s.isdigit() else _EN_NUMBERS[s]


def _en_phrase(m: re.Match[str]) -> str:
    return re.sub(_WS, " ", m.group(0))


def _en_dayword(m: re.Match[str]) -> _Intent:
    return _Intent("offset", _EN_DAYWORDS[re.sub(_WS, " ", m.group(0).lower())], "day", query=_en_phrase(m))


def _en_in(m: re.Match[str]) -> _Intent:
    return _Intent("offset", _en_number(m["n"]), m["unit"].lower(), query=_en_phrase(m))  # type: ignore[arg-type]


def _en_ago(m: re.Match[str]) -> _Intent:
    return _Intent("offset", -_en_number(m["n"]), m["unit"].lower(), query=_en_phrase(m))  # type: ignore[arg-type]


def _en_weekday(m: re.Match[str]) -> _Intent:
    # rule layer: dateparser reads "next Friday" as the coming Friday (see module docstring)
    return _Intent("weekday", _EN_SHIFT[m["shift"].lower()], "week", weekday=_EN_WEEKDAYS[m["wd"].lower()])


def _en_period(m: re.Match[str]) -> _Intent:
    unit = m["unit"].lower()
    return _Intent("period", _EN_SHIFT[m["shift"].lower()], unit, query=_en_phrase(m))  # type: ignore[arg-type]


_CN_NUMCHARS = "0-9０-９零一二两三四五六七八九十百千万几第每"
# "然后天气", "之前天", "以后年" ...: 后/前 ending another word, not starting 后天/前天/后年/前年
_CN_NOT_AFTER_HOUQIAN = r"(?<![然之以最提目当眼从向往面跟午])"
# words ending in 明 that can precede 天: 聪明天才, 光明天地 ... ("说明天" is left alone: "他说明天来" is common)
_CN_NOT_AFTER_MING = r"(?<![聪光透文发证表声黎清鲜简])"
# 一下周五 / 以下 / 晚上周五 / 早上 / 马上: 下/上 ending another word
_CN_NOT_AFTER_SHIFT = r"(?<![一以晚早马])"
_CN_SHIFT_RE = r"(?P<shift>下下|上上|下|上|本|这)个?"


def _cn_dayword(m: re.Match[str]) -> _Intent:
    days, canon = _CN_DAYWORDS[m.group(0)]
    return _Intent("offset", days, "day", query=canon, lang="zh")


def _cn_offset(m: re.Match[str]) -> _Intent | None:
    n = _cn_number(m["n"])
    if n is None:
        return None
    unit = _CN_UNITS[m["unit"]]
    amount = n if m["dir"] in ("后", "以后", "之后") else -n
    return _Intent("offset", amount, unit, query=_cn_offset_query(amount, unit), lang="zh")


def _cn_weekday(m: re.Match[str]) -> _Intent:
    # rule layer: dateparser returns None for 下周五 / 上周六 and search_dates truncates them to 下周 / 上周
    return _Intent("weekday", _CN_SHIFT[m["shift"]], "week", weekday=_CN_WEEKDAYS[m["d"]])


def _cn_period(unit: Unit) -> Callable[[re.Match[str]], _Intent]:
    def intent(m: re.Match[str]) -> _Intent:
        amount = _CN_SHIFT[m["shift"]]
        canon = _CN_PERIOD_CANON[unit].get(amount) or _cn_offset_query(amount, unit)
        return _Intent("period", amount, unit, query=canon, lang="zh")

    return intent


def _cn_year(m: re.Match[str]) -> _Intent:
    amount = _CN_YEARS[m.group(0)]
    canon = _CN_PERIOD_CANON["year"].get(amount) or _cn_offset_query(amount, "year")  # 前年/后年 -> None in dateparser
    return _Intent("period", amount, "year", query=canon, lang="zh")


_RULES: list[tuple[re.Pattern[str], Callable[[re.Match[str]], _Intent | None]]] = [
    # English
    (re.compile(r"\b(?:the[ \t]+day[ \t]+after[ \t]+tomorrow|the[ \t]+day[ \t]+before[ \t]+yesterday"
                r"|tomorrow|yesterday|tonight|today(?!['’]s\b))\b", _EN), _en_dayword),
    (re.compile(rf"\bin{_WS}{_EN_NUM}{_WS}{_EN_UNIT}\b", _EN), _en_in),
    (re.compile(rf"\b{_EN_NUM}{_WS}{_EN_UNIT}{_WS}ago\b", _EN), _en_ago),
    (re.compile(rf"\b{_EN_NUM}{_WS}{_EN_UNIT}{_WS}from{_WS}now\b", _EN), _en_in),
    (re.compile(rf"{_NOT_THE}\b(?P<shift>next|last|this){_WS}{_EN_WEEKDAY}\b", _EN), _en_weekday),
    (re.compile(rf"{_NOT_THE}\b(?P<shift>next|last|this){_WS}(?P<unit>week|month|year)\b", _EN), _en_period),
    # Chinese
    (re.compile(rf"{_CN_NOT_AFTER_HOUQIAN}(?:大后天|大前天|后天|前天)|{_CN_NOT_AFTER_MING}明天|明早|明晚"
                r"|昨天|昨晚|今天|今晚|今早"), _cn_dayword),
    (re.compile(rf"(?<![{_CN_NUMCHARS}])(?P<n>[0-9０-９]{{1,3}}|[零一二两三四五六七八九十]{{1,3}})"
                r"(?P<unit>天|日|周|个星期|星期|个礼拜|礼拜|个月|年)(?P<dir>以后|之后|以前|之前|后|前)"), _cn_offset),
    (re.compile(rf"{_CN_NOT_AFTER_SHIFT}{_CN_SHIFT_RE}"
                r"(?:周(?P<d>一(?![起些直样般共下点])|[二三四五六日])|(?:星期|礼拜)(?P<d2>[一二三四五六日天]))"),
     lambda m: _cn_weekday(_MatchProxy(m))),
    (re.compile(rf"{_CN_NOT_AFTER_SHIFT}{_CN_SHIFT_RE}(?:周|星期|礼拜)(?!末)"), _cn_period("week")),
    (re.compile(rf"{_CN_NOT_AFTER_SHIFT}(?:(?P<shift>下下|上上|下|上|这)个月|(?P<shift2>下|上|本)月(?![球亮光色]))"),
     lambda m: _cn_period("month")(_MatchProxy(m))),
    (re.compile(rf"(?<![如至当迄])今年|明年|(?<![过失])去年|{_CN_NOT_AFTER_HOUQIAN}(?:后年|前年)"), _cn_year),
]


class _MatchProxy:
    """Let rules with two alternative groups (``d``/``d2``, ``shift``/``shift2``) read them under one name."""

    def __init__(self, m: re.Match[str]) -> None:
        self._m = m

    def __getitem__(self, name: str) -> str:
        value = self._m.group(name)
        if value is None and f"{name}2" in self._m.re.groupindex:
            value = self._m.group(f"{name}2")
        return value

    def group(self, *args: int | str) -> str:
        return self._m.group(*args)


# --------------------------------------------------------------------------------------------------------------
# resolution


@lru_cache(maxsize=4096)
def _dateparser_date(query: str, lang: str, base: date, prefer_future: bool) -> date | None:
    """What dateparser makes of ``query`` said on local day ``base`` (relative parser only), or ``None``."""
    settings = {
        # local noon: the answer depends only on the local date, and noon is never inside a DST gap
        "RELATIVE_BASE": datetime.combine(base, time(12)),
        "PREFER_DATES_FROM": "future" if prefer_future else "past",
        "PARSERS": ["relative-time"],  # never let it read an absolute date here
        "RETURN_AS_TIMEZONE_AWARE": False,
    }
    try:
        parsed = dateparser.parse(query, languages=[lang], settings=settings)
    except (ValueError, OverflowError):  # e.g. "in 999 years" past datetime.max on some bases
        return None
    return parsed.date() if parsed is not None else None


def _rule_date(intent: _Intent, base: date) -> date:
    if intent.kind == "weekday":
        monday = _period_start(base, "week")
        return monday + timedelta(weeks=intent.amount, days=intent.weekday or 0)
    if intent.kind == "period":
        return _period_start(_shift(_period_start(base, intent.unit), intent.amount, intent.unit), intent.unit)
    return _shift(base, intent.amount, intent.unit)


def _resolve(intent: _Intent, base: date) -> tuple[date, Granularity, Literal["dateparser", "rule"]]:
    granularity: Granularity = intent.unit if intent.kind == "period" else "day"
    if intent.query is not None:
        got = _dateparser_date(intent.query, intent.lang, base, intent.amount >= 0)
        if got is not None:
            return _period_start(got, granularity), granularity, "dateparser"
    return _rule_date(intent, base), granularity, "rule"


def _local_date(observed_at: datetime, tz: str | tzinfo | None) -> date:
    aware = require_aware(observed_at, "observed_at")
    zone = user_zone(tz)
    try:
        return aware.astimezone(zone).date()
    except OverflowError:
        raise BadInput("observed_at", f"{aware.isoformat()} falls outside years 1..9999 in zone {zone}",
                       "give an instant between years 1 and 9999 in that zone, e.g. 2024-05-01T09:00:00Z") from None


# --------------------------------------------------------------------------------------------------------------
# public API


def annotate(text: str, observed_at: datetime, tz: str | tzinfo | None = None) -> list[TimeMention]:
    """Find the relative date phrases in ``text`` and resolve each against ``observed_at`` in zone ``tz``.

    Args:
        text: any string; it is only read.
        observed_at: when the text was said; timezone-aware (naive -> ``BadInput``/``ValueError`` naming
            ``observed_at``).
        tz: the user's IANA zone name (default UTC); unknown -> ``BadInput`` naming ``tz``.

    Returns:
        Non-overlapping mentions sorted by ``start``; where candidates overlap, the leftmost wins, then the
        longest. Dates that would fall outside year 1..9999 are dropped.
    """
    if not isinstance(text, str):
        raise BadInput("text", f"expected a string, got {type(text).__name__}", "pass the text to read as a string")
    base = _local_date(observed_at, tz)

    candidates: list[tuple[int, int, _Intent]] = []
    for pattern, to_intent in _RULES:
        for m in pattern.finditer(text):
            if m.end() > m.start():
                intent = to_intent(m)
                if intent is not None:
                    candidates.append((m.start(), m.end(), intent))
    candidates.sort(key=lambda c: (c[0], -(c[1] - c[0])))

    mentions: list[TimeMention] = []
    last_end = 0
    for start, end, intent in candidates:
        if start < last_end:
            continue
        try:
            resolved, granularity, by = _resolve(intent, base)
        except (OverflowError, ValueError):  # beyond date.min/date.max
            continue
        mentions.append(TimeMention(phrase=text[start:end], start=start, end=end, resolved_date=resolved,
                                    granularity=granularity, resolved_by=by))
        last_end = end
    return mentions


def render_annotated(text: str, observed_at: datetime, tz: str | tzinfo | None = None) -> str:
    """``text`` with ``" [= <label>]"`` inserted right after each relative phrase; nothing else changes.

    "see you next Friday" (said Monday 2023-05-08) -> "see you next Friday [= 2023-05-19]";
    "三天后见" -> "三天后 [= 2023-05-11]见"; "next month" -> "next month [= 2023-06]".
    A phrase already followed by ``" [= "`` is not annotated again, so rendering is idempotent.
    """
    parts: list[str] = []
    pos = 0
    for m in annotate(text, observed_at, tz):
        if text.startswith(ANNOTATION_OPEN, m.end):
            continue
        parts.append(text[pos:m.end])
        parts.append(m.annotation)
        pos = m.end
    parts.append(text[pos:])
    return "".join(parts)


def strip_annotations(text: str) -> str:
    """Remove every ``" [= ...]"`` annotation (brackets-free, single-line body).

    The exact inverse of :func:`render_annotated` for texts that did not already contain such a sequence.
    """
    return _ANNOTATION_RE.sub("", text)
