"""Relative time phrases -> absolute dates (memledger.relative_time).

Reference day: Monday 2023-05-08 (10:00 UTC) unless a test says otherwise. Weeks start on Monday.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone

import dateparser
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memledger.relative_time import (
    TimeMention,
    annotate,
    format_local,
    render_annotated,
    strip_annotations,
    to_local,
)

MONDAY = datetime(2023, 5, 8, 10, 0, tzinfo=timezone.utc)


def only(text: str, observed_at: datetime = MONDAY, tz: str | None = None) -> TimeMention:
    mentions = annotate(text, observed_at, tz)
    assert len(mentions) == 1, mentions
    return mentions[0]


# ---- exact dates -------------------------------------------------------------------------------------------------

CASES = [
    # phrase, resolved_date, granularity
    ("tomorrow", date(2023, 5, 9), "day"),
    ("in three days", date(2023, 5, 11), "day"),
    ("next Friday", date(2023, 5, 19), "day"),
    ("last Saturday", date(2023, 5, 6), "day"),
    ("two weeks ago", date(2023, 4, 24), "day"),
    ("next month", date(2023, 6, 1), "month"),
    ("yesterday", date(2023, 5, 7), "day"),
    ("the day after tomorrow", date(2023, 5, 10), "day"),
    ("in 2 weeks", date(2023, 5, 22), "day"),
    ("a month ago", date(2023, 4, 8), "day"),
    ("5 years from now", date(2028, 5, 8), "day"),
    ("next week", date(2023, 5, 15), "week"),
    ("last week", date(2023, 5, 1), "week"),
    ("this year", date(2023, 1, 1), "year"),
    ("明天", date(2023, 5, 9), "day"),
    ("三天后", date(2023, 5, 11), "day"),
    ("下周五", date(2023, 5, 19), "day"),
    ("上周六", date(2023, 5, 6), "day"),
    ("两周前", date(2023, 4, 24), "day"),
    ("下个月", date(2023, 6, 1), "month"),
    ("后天", date(2023, 5, 10), "day"),
    ("大前天", date(2023, 5, 5), "day"),
    ("十二天后", date(2023, 5, 20), "day"),
    ("3天以后", date(2023, 5, 11), "day"),
    ("两个星期前", date(2023, 4, 24), "day"),
    ("下星期天", date(2023, 5, 21), "day"),
    ("这个礼拜三", date(2023, 5, 10), "day"),
    ("下下周一", date(2023, 5, 22), "day"),
    ("下周", date(2023, 5, 15), "week"),
    ("上个月", date(2023, 4, 1), "month"),
    ("去年", date(2022, 1, 1), "year"),
    ("后年", date(2025, 1, 1), "year"),
    ("明晚", date(2023, 5, 9), "day"),
]


@pytest.mark.parametrize(("phrase", "expected", "granularity"), CASES)
def test_exact_dates(phrase: str, expected: date, granularity: str) -> None:
    text = f"<<{phrase}>>"
    m = only(text)
    assert (m.phrase, m.start, m.end) == (phrase, 2, 2 + len(phrase))
    assert m.resolved_date == expected
    assert m.granularity == granularity


def test_phrases_inside_sentences() -> None:
    text = "Let's meet next Friday; I was there two weeks ago and will fly in three days."
    got = [(m.phrase, m.resolved_date) for m in annotate(text, MONDAY)]
    assert got == [
        ("next Friday", date(2023, 5, 19)),
        ("two weeks ago", date(2023, 4, 24)),
        ("in three days", date(2023, 5, 11)),
    ]
    text = "我们三天后见，下周五开会，上周六去了上海，两周前也去过，下个月搬家"
    got = [(m.phrase, m.resolved_date.isoformat()) for m in annotate(text, MONDAY)]
    assert got == [
        ("三天后", "2023-05-11"), ("下周五", "2023-05-19"), ("上周六", "2023-05-06"),
        ("两周前", "2023-04-24"), ("下个月", "2023-06-01"),
    ]


# ---- the weekday convention: next/last/this pick the Monday-start week, then the day -----------------------------


@pytest.mark.parametrize(
    ("observed_day", "phrase", "expected"),
    [
        # Monday 05-08: "next Friday" is the Friday of next week, not the coming Friday (05-12)
        (date(2023, 5, 8), "next Friday", date(2023, 5, 19)),
        (date(2023, 5, 11), "next Friday", date(2023, 5, 19)),  # Thursday: still next week's, not tomorrow
        (date(2023, 5, 13), "next Friday", date(2023, 5, 19)),  # Saturday
        (date(2023, 5, 14), "next Friday", date(2023, 5, 19)),  # Sunday (still the week of 05-08)
        (date(2023, 5, 13), "next Sunday", date(2023, 5, 21)),  # Saturday: 8 days ahead, by the convention
        (date(2023, 5, 14), "last Saturday", date(2023, 5, 6)),  # Sunday: last week's Saturday, not yesterday
        (date(2023, 5, 14), "this Friday", date(2023, 5, 12)),  # this week's Friday, even though past
        (date(2023, 5, 8), "this Friday", date(2023, 5, 12)),
        (date(2023, 5, 11), "下周五", date(2023, 5, 19)),
        (date(2023, 5, 14), "上周六", date(2023, 5, 6)),
        (date(2023, 5, 14), "本周五", date(2023, 5, 12)),
        (date(2023, 5, 14), "周五", None),  # bare weekday: no relative cue, not annotated
        (date(2023, 5, 14), "on Friday", None),
    ],
)
def test_weekday_convention(observed_day: date, phrase: str, expected: date | None) -> None:
    observed_at = datetime.combine(observed_day, datetime.min.time(), timezone.utc) + timedelta(hours=9)
    mentions = annotate(phrase, observed_at)
    if expected is None:
        assert mentions == []
    else:
        assert [(m.phrase, m.resolved_date, m.resolved_by) for m in mentions] == [(phrase, expected, "rule")]


def test_why_the_rule_layer_exists() -> None:
    """Documents dateparser 1.5 behaviour the rule layer corrects (if this changes, revisit the rule layer)."""
    base = {"RELATIVE_BASE": datetime(2023, 5, 8, 12), "PREFER_DATES_FROM": "future"}
    assert dateparser.parse("next Friday", settings=base).date() == date(2023, 5, 12)  # the coming Friday
    for phrase in ("下周五", "上周六", "三天后", "两周前", "明晚", "后年"):
        assert dateparser.parse(phrase, languages=["zh"], settings=base) is None, phrase


def test_library_does_the_arithmetic_where_it_can() -> None:
    """Offsets and periods are resolved by dateparser, and agree with plain calendar arithmetic on awkward days."""
    from memledger.relative_time import _RULES, _rule_date

    phrases = ["tomorrow", "in three days", "two weeks ago", "a year ago", "in one month", "next month",
               "last week", "next year", "明天", "三天后", "两周前", "下个月", "上个月", "明年", "去年", "前年",
               "3个月后", "一年前", "下周", "这个月"]
    bases = [date(2023, 5, 8), date(2024, 1, 31), date(2024, 2, 29), date(2023, 12, 31), date(2023, 3, 31)]
    for base in bases:
        observed_at = datetime.combine(base, datetime.min.time(), timezone.utc) + timedelta(hours=12)
        for phrase in phrases:
            m = only(phrase, observed_at)
            assert m.resolved_by == "dateparser", (phrase, base)
            intent = next(to_intent(match) for pattern, to_intent in _RULES if (match := pattern.fullmatch(phrase)))
            assert m.resolved_date == _rule_date(intent, base), (phrase, base)


# ---- time zones ----------------------------------------------------------------------------------------------------


def test_user_time_zone_decides_the_local_date() -> None:
    late = datetime(2023, 5, 12, 23, 30, tzinfo=timezone.utc)  # already 07:30 on the 13th in Shanghai
    assert only("tomorrow", late, "Asia/Shanghai").resolved_date == date(2023, 5, 14)
    assert only("tomorrow", late).resolved_date == date(2023, 5, 13)  # default UTC
    assert only("明天", late, "Asia/Shanghai").resolved_date == date(2023, 5, 14)
    assert only("tomorrow", late, "America/Los_Angeles").resolved_date == date(2023, 5, 13)


def test_observed_at_offset_is_respected() -> None:
    # the same instant written with another offset gives the same answer
    same = datetime(2023, 5, 13, 7, 30, tzinfo=timezone(timedelta(hours=8)))
    assert only("tomorrow", same).resolved_date == date(2023, 5, 13)  # UTC date is the 12th
    assert only("tomorrow", same, "Asia/Shanghai").resolved_date == date(2023, 5, 14)


def test_naive_observed_at_is_refused() -> None:
    with pytest.raises(ValueError, match="observed_at"):
        annotate("tomorrow", datetime(2023, 5, 8, 10, 0))
    with pytest.raises(ValueError, match="observed_at"):
        render_annotated("tomorrow", datetime(2023, 5, 8, 10, 0))


def test_dates_beyond_the_calendar_are_dropped_not_raised() -> None:
    end = datetime(9999, 12, 31, 12, tzinfo=timezone.utc)
    assert annotate("tomorrow, next week, in 999 years, next Monday, 明年", end) == []
    assert [m.phrase for m in annotate("yesterday or tomorrow", end)] == ["yesterday"]
    with pytest.raises(ValueError, match="observed_at"):
        annotate("tomorrow", datetime(1, 1, 1, tzinfo=timezone.utc), "America/New_York")


def test_unknown_time_zone_is_refused() -> None:
    for bad in ("Mars/Olympus", "", "../etc/passwd", "+08:00"):
        with pytest.raises(ValueError, match=r"tz.*IANA"):
            annotate("tomorrow", MONDAY, bad)
    with pytest.raises(ValueError, match=r"tz.*IANA"):
        format_local(MONDAY, "Shanghai")


def test_to_local_and_format_local() -> None:
    stored = datetime(2023, 5, 12, 4, 45, tzinfo=timezone.utc)
    local = to_local(stored, "Asia/Shanghai")
    assert (local.hour, local.minute, local.utcoffset()) == (12, 45, timedelta(hours=8))
    assert local == stored  # same instant
    assert format_local(stored, "Asia/Shanghai") == "2023-05-12 12:45 +08:00"
    assert format_local(stored) == "2023-05-12 04:45 +00:00"
    assert format_local(stored, "America/St_Johns") == "2023-05-12 02:15 -02:30"
    with pytest.raises(ValueError, match="dt"):
        to_local(datetime(2023, 5, 12, 4, 45), "Asia/Shanghai")


# ---- false positives -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "I may go",
        "the second time",
        "We met on May 7, 2023 and now we are friends",
        "In today's world we all wear watches",
        "today’s news",
        "this sun is hot, last sat night",
        "the last week of May was the next Friday after that",
        "within three days",
        "然后天气变冷了，之前天天跑步",
        "如今年轻人都这样",
        "他很聪明天赋高",
        "等一下周五不行",
        "上月球",
        "周末见",
        "5月7日见",
        "每三天跑一次",
        "第三天后",
    ],
)
def test_no_annotation(text: str) -> None:
    assert annotate(text, MONDAY) == []
    assert render_annotated(text, MONDAY) == text


def test_guarded_words_do_not_swallow_real_mentions() -> None:
    assert [m.phrase for m in annotate("下周一起吃饭，下周一开会", MONDAY)] == ["下周", "下周一"]
    assert only("下周一起吃饭").granularity == "week"


# ---- rendering -------------------------------------------------------------------------------------------------


def test_render_examples() -> None:
    assert render_annotated("see you next Friday", MONDAY) == "see you next Friday [= 2023-05-19]"
    assert render_annotated("三天后见", MONDAY) == "三天后 [= 2023-05-11]见"
    assert render_annotated("next week or next month, maybe next year", MONDAY) == (
        "next week [= week of 2023-05-15] or next month [= 2023-06], maybe next year [= 2024]"
    )


def test_render_keeps_original_bytes() -> None:
    text = "Héllo 👋\r\n  we said NEXT friday,\tthen 两周前 — “tomorrow”…  done\u200b"
    out = render_annotated(text, MONDAY, "Asia/Shanghai")
    assert out == (
        "Héllo 👋\r\n  we said NEXT friday [= 2023-05-19],\tthen 两周前 [= 2023-04-24] — “tomorrow [= 2023-05-09]”…"
        "  done\u200b"
    )
    assert strip_annotations(out).encode("utf-8") == text.encode("utf-8")


def test_render_is_idempotent() -> None:
    once = render_annotated("tomorrow and 下周五", MONDAY)
    assert render_annotated(once, MONDAY) == once


# ---- properties ------------------------------------------------------------------------------------------------

PHRASES = [p for p, _, _ in CASES] + [
    "today", "Next  Friday", "this sun", "last fri", "this Sunday", "the next week", "may", "二十", "周", "下",
    "后天气", "[= ", "]", " ", "\n", "ago", "in", "9999 years ago",
]
texts = st.lists(st.one_of(st.text(max_size=12), st.sampled_from(PHRASES)), max_size=8).map("".join)
instants = st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(timezone.utc))
zones = st.sampled_from([None, "UTC", "Asia/Shanghai", "America/New_York", "Pacific/Kiritimati", "Pacific/Pago_Pago"])
CUE = re.compile(r"tomorrow|yesterday|today|tonight|ago|from\s+now|\bin\s|next|last|this|[明后昨前今去]|[下上本这][个周星礼月]",
                 re.IGNORECASE)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, observed_at=instants, tz=zones)
def test_removing_annotations_gives_back_the_original(text: str, observed_at: datetime, tz: str | None) -> None:
    out = render_annotated(text, observed_at, tz)
    mentions = annotate(text, observed_at, tz)
    # exact, for any text: delete the inserted annotations at the positions they were inserted
    pieces, pos, shift = [], 0, 0
    for m in mentions:
        if text.startswith(" [= ", m.end):
            continue
        at = m.end + shift
        assert out[at:at + len(m.annotation)] == m.annotation
        pieces.append(out[pos:at])
        pos = at + len(m.annotation)
        shift += len(m.annotation)
    pieces.append(out[pos:])
    assert "".join(pieces) == text
    # and by pattern, when the text had no annotation-looking sequence of its own
    if "[=" not in text:
        assert strip_annotations(out) == text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, observed_at=instants, tz=zones)
def test_mentions_are_exact_sorted_and_cued(text: str, observed_at: datetime, tz: str | None) -> None:
    mentions = annotate(text, observed_at, tz)
    last_end = 0
    for m in mentions:
        assert last_end <= m.start < m.end <= len(text)
        assert text[m.start:m.end] == m.phrase
        assert CUE.search(m.phrase), m.phrase
        assert "[" not in m.label and "]" not in m.label
        last_end = m.end


@settings(deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list("下上本这个周星期礼拜一二三四五六日天后前年月明昨今大两十3 "))))
def test_chinese_soup_never_crashes(text: str) -> None:
    assume(text)
    for m in annotate(text, MONDAY, "Asia/Shanghai"):
        assert text[m.start:m.end] == m.phrase
