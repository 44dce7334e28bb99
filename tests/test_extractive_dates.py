"""The relative-date resolver against hand-computed calendar cases (8 May 2023 is a Monday)."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tmem.construct.extractive.dates import Granularity, format_day, resolve_relative_dates

MONDAY = date(2023, 5, 8)
SUNDAY = date(2023, 5, 14)


def one(text: str, anchor: date = MONDAY) -> tuple[date, date, Granularity]:
    found = resolve_relative_dates(text, anchor)
    assert len(found) == 1, found
    return found[0].start, found[0].end, found[0].granularity


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I went to a LGBTQ support group yesterday", date(2023, 5, 7)),
        ("we talked last night", date(2023, 5, 7)),
        ("the day before yesterday I ran", date(2023, 5, 6)),
        ("today was great", MONDAY),
        ("see you tonight", MONDAY),
        ("tomorrow I fly", date(2023, 5, 9)),
        ("the day after tomorrow", date(2023, 5, 10)),
        ("three days ago", date(2023, 5, 5)),
        ("3 days ago", date(2023, 5, 5)),
        ("a week ago", date(2023, 5, 1)),
        ("two weeks ago", date(2023, 4, 24)),
        ("a month ago", date(2023, 4, 8)),
        ("a couple of days ago", date(2023, 5, 6)),
        ("two years ago", date(2021, 5, 8)),
        ("in two weeks", date(2023, 5, 22)),
        ("last Friday", date(2023, 5, 5)),
        ("last Monday", date(2023, 5, 1)),  # strictly before the anchor, so a week back on a Monday
        ("next Monday", date(2023, 5, 15)),
        ("this Friday", date(2023, 5, 12)),
        ("next friday", date(2023, 5, 12)),
    ],
)
def test_day_expressions(text: str, expected: date) -> None:
    start, end, gran = one(text)
    assert (start, end, gran) == (expected, expected, Granularity.DAY)


def test_month_arithmetic_clamps_to_month_end() -> None:
    assert one("a month ago", date(2023, 3, 31))[0] == date(2023, 2, 28)


@pytest.mark.parametrize(
    ("text", "anchor", "start", "end", "gran"),
    [
        ("last week", MONDAY, date(2023, 5, 1), date(2023, 5, 7), Granularity.WEEK),
        ("last week", SUNDAY, date(2023, 5, 1), date(2023, 5, 7), Granularity.WEEK),
        ("this week", MONDAY, date(2023, 5, 8), date(2023, 5, 14), Granularity.WEEK),
        ("next week", MONDAY, date(2023, 5, 15), date(2023, 5, 21), Granularity.WEEK),
        ("this weekend", MONDAY, date(2023, 5, 13), date(2023, 5, 14), Granularity.WEEKEND),
        ("last weekend", MONDAY, date(2023, 5, 6), date(2023, 5, 7), Granularity.WEEKEND),
        ("next weekend", MONDAY, date(2023, 5, 20), date(2023, 5, 21), Granularity.WEEKEND),
        ("last month", MONDAY, date(2023, 4, 1), date(2023, 4, 30), Granularity.MONTH),
        ("next month", date(2023, 12, 20), date(2024, 1, 1), date(2024, 1, 31), Granularity.MONTH),
        ("last year", MONDAY, date(2022, 1, 1), date(2022, 12, 31), Granularity.YEAR),
        ("this year", MONDAY, date(2023, 1, 1), date(2023, 12, 31), Granularity.YEAR),
    ],
)
def test_period_expressions(text: str, anchor: date, start: date, end: date, gran: Granularity) -> None:
    assert one(text, anchor) == (start, end, gran)


def test_labels_are_absolute_and_readable() -> None:
    labels = [r.label for r in resolve_relative_dates("yesterday, last week, last month, last year", MONDAY)]
    assert labels == ["7 May 2023", "the week of 1-7 May 2023", "April 2023", "2022"]
    assert resolve_relative_dates("a few days ago", MONDAY)[0].label == "about 5 May 2023"
    assert resolve_relative_dates("last week", date(2023, 6, 2))[0].label == "the week of 22-28 May 2023"


def test_longest_expression_wins_and_order_follows_text() -> None:
    found = resolve_relative_dates("The day before yesterday, not yesterday, and last night too.", MONDAY)
    assert [f.expression for f in found] == ["The day before yesterday", "yesterday", "last night"]
    assert [f.start for f in found] == [date(2023, 5, 6), date(2023, 5, 7), date(2023, 5, 7)]
    assert all(found[i].end_char <= found[i + 1].start_char for i in range(len(found) - 1))


def test_no_false_positives_on_ordinary_words() -> None:
    assert resolve_relative_dates("The yesterdays of a lasting weekday; I ran last, then went next door.", MONDAY) == []


@given(st.dates(min_value=date(1950, 1, 1), max_value=date(2100, 12, 31)))
def test_weekday_rules_hold_for_any_anchor(anchor: date) -> None:
    last, nxt, this = (resolve_relative_dates(f"{w} friday", anchor)[0].start for w in ("last", "next", "this"))
    assert last.weekday() == nxt.weekday() == this.weekday() == 4
    assert 1 <= (anchor - last).days <= 7 and 1 <= (nxt - anchor).days <= 7
    assert (this - anchor).days == 4 - anchor.weekday()
    week = resolve_relative_dates("last week", anchor)[0]
    assert week.start.weekday() == 0 and (week.end - week.start).days == 6 and week.end < anchor


def test_format_day() -> None:
    assert format_day(date(2023, 5, 7)) == "7 May 2023"


@given(st.dates(min_value=date(1950, 1, 1), max_value=date(2100, 12, 31)))
def test_this_coming_weekend_is_always_ahead_like_this_coming_saturday(anchor: date) -> None:
    # "this coming" names the next one strictly after the anchor, for a weekend as for a weekday: said on a
    # Saturday or Sunday it is not the weekend under way.
    weekend = resolve_relative_dates("this coming weekend", anchor)[0]
    saturday = resolve_relative_dates("this coming Saturday", anchor)[0]
    assert weekend.start == saturday.start and weekend.start > anchor and (weekend.start - anchor).days <= 7
    assert weekend.granularity is Granularity.WEEKEND and (weekend.end - weekend.start).days == 1


@pytest.mark.parametrize(
    "text",
    [
        # all four "in <count> <unit>" phrases of the dev split say how long, not when
        "Hey Nate! Haven't talked in a few days. Crazy things happened to me!",
        "Hey Gina! We haven't talked in a few days.",
        "Rome wasn't built in a day so keep pushing on!",
        "It was the first time in two years that I saw her.",
        "I had not been there in a month.",
        "She never called in three weeks.",
    ],
)
def test_in_count_unit_after_a_past_negation_is_a_duration_not_a_date(text: str) -> None:
    assert resolve_relative_dates(text, MONDAY) == []


def test_in_count_unit_is_future_elsewhere_in_the_same_text() -> None:
    found = resolve_relative_dates("We haven't talked in a week, but I'm moving in two weeks.", MONDAY)
    assert [(f.expression, f.start) for f in found] == [("in two weeks", date(2023, 5, 22))]
    assert one("I won't be back in a week")[0] == date(2023, 5, 15)  # a future negation still names a date
