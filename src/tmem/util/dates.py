"""Locale-free date formatting shared by construction, the index and answering (it sits below all of them)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

__all__ = [
    "DATE_CONVENTION",
    "DATE_PRECISIONS",
    "MONTHS",
    "WHEN_FORMS",
    "When",
    "format_day",
    "format_range",
    "month_name",
    "parse_when",
    "period",
]

MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip


def month_name(day: date) -> str:
    """The English month name (``strftime('%B')`` would follow the process's LC_TIME locale)."""
    return MONTHS[day.month - 1]


def format_day(day: date) -> str:
    """'7 May 2023' (no leading zero, English month name, never locale dependent)."""
    return f"{day.day} {month_name(day)} {day.year}"


# ------------------------------------------------------------------------------------------ dates with precision

DATE_PRECISIONS = ("day", "week", "month", "season", "year", "range")
_SEASONS = {"spring": (3, 5), "summer": (6, 8), "autumn": (9, 11), "fall": (9, 11), "winter": (12, 2)}
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")
_MONTH = re.compile(r"^(\d{4})-(\d{2})$")
_YEAR = re.compile(r"^(\d{4})$")
_SEASON = re.compile(r"^(\d{4})-(spring|summer|autumn|fall|winter)$")

WHEN_FORMS = (
    "YYYY-MM-DD (a day), YYYY-Www (an ISO week, Monday to Sunday, e.g. 2023-W19), YYYY-MM (a month), "
    "YYYY-spring|summer|autumn|winter (a season; winter YYYY runs from December YYYY to February YYYY+1), YYYY (a "
    "year) or YYYY-MM-DD/YYYY-MM-DD (a range, e.g. a weekend)"
)


@dataclass(frozen=True)
class When:
    """A date with its precision: the first and last day (inclusive) of what an expression names."""

    start: date
    end: date
    precision: str  # one of DATE_PRECISIONS

    @property
    def form(self) -> str:
        """The machine form :func:`parse_when` reads back: '2023-05-07', '2023-W19', '2023-05', '2022-summer',
        '2023', '2023-05-06/2023-05-07'."""
        if self.precision == "day":
            return self.start.isoformat()
        if self.precision == "week":
            year, week, _ = self.start.isocalendar()
            return f"{year}-W{week:02d}"
        if self.precision == "month":
            return f"{self.start.year}-{self.start.month:02d}"
        if self.precision == "year":
            return str(self.start.year)
        if self.precision == "season":
            season = next(n for n, (first, _) in _SEASONS.items() if first == self.start.month and n != "fall")
            return f"{self.start.year}-{season}"
        return f"{self.start.isoformat()}/{self.end.isoformat()}"

    @property
    def label(self) -> str:
        """How a reader sees it: '7 May 2023', 'the week of 1-7 May 2023', 'May 2023', 'summer 2023', '2023',
        '6-7 May 2023'."""
        if self.precision == "day":
            return format_day(self.start)
        if self.precision == "month":
            return f"{month_name(self.start)} {self.start.year}"
        if self.precision == "year":
            return str(self.start.year)
        if self.precision == "season":
            season = next(n for n, (first, _) in _SEASONS.items() if first == self.start.month and n != "fall")
            return f"{season} {self.start.year}"
        span = format_range(self.start, self.end)
        return f"the week of {span}" if self.precision == "week" else span


def period(day: str | None, end: str | None, precision: str | None) -> When | None:
    """The period a stored date names (an item's ``date``, ``date_end``, ``date_precision``): ``2025-01-01``,
    ``2025-12-31``, ``year`` is the year 2025, not its first day. None without a date or with one that is not ISO."""
    if not day:
        return None
    try:
        start = date.fromisoformat(day)
        last = date.fromisoformat(end) if end else start
        when = When(start, last, precision or "day")
        when.form  # noqa: B018 -- raises StopIteration for a season that does not start a season's month
    except (ValueError, StopIteration):
        return None
    return when


def format_range(start: date, end: date) -> str:
    """'1-7 May 2023', '29 April - 5 May 2023', '30 December 2022 - 2 January 2023'."""
    if start.year != end.year:
        return f"{format_day(start)} - {format_day(end)}"
    if start.month != end.month:
        return f"{start.day} {month_name(start)} - {format_day(end)}"
    return f"{start.day}-{format_day(end)}"


def parse_when(value: str) -> When:
    """Parse one of :data:`WHEN_FORMS`; raises ValueError saying which forms are accepted."""
    text = value.strip()
    try:
        if _DAY.match(text):
            day = date.fromisoformat(text)
            return When(day, day, "day")
        if m := _WEEK.match(text):
            monday = date.fromisocalendar(int(m[1]), int(m[2]), 1)
            return When(monday, monday + timedelta(days=6), "week")
        if m := _MONTH.match(text):
            first = date(int(m[1]), int(m[2]), 1)
            return When(first, _month_end(first), "month")
        if m := _YEAR.match(text):
            return When(date(int(m[1]), 1, 1), date(int(m[1]), 12, 31), "year")
        if m := _SEASON.match(text):
            year, (first_month, last_month) = int(m[1]), _SEASONS[m[2]]
            end_year = year + 1 if last_month < first_month else year
            return When(date(year, first_month, 1), _month_end(date(end_year, last_month, 1)), "season")
        if "/" in text:
            left, right = (part.strip() for part in text.split("/", 1))
            if _DAY.match(left) and _DAY.match(right):
                start, end = date.fromisoformat(left), date.fromisoformat(right)
                if end < start:
                    raise ValueError(f"the range {text!r} ends before it starts")
                return When(start, end, "day" if start == end else "range")
    except ValueError as exc:
        if "ends before" in str(exc):
            raise
        raise ValueError(f"{text!r} is not a calendar date ({exc})") from exc
    raise ValueError(f"{text!r} is not a date in one of the forms {WHEN_FORMS}")


def _month_end(first: date) -> date:
    following = date(first.year + first.month // 12, first.month % 12 + 1, 1)
    return following - timedelta(days=1)


# The one convention for relative dates, shared by the item-extraction prompt (which shows it to the model) and the
# extractive resolver (tmem.construct.extractive.dates implements it). "The turn's day" is the date of the turn that
# says the expression, from the conversation; weeks are ISO weeks.
DATE_CONVENTION = """\
- Resolve every relative time against the date of the turn that says it, never against today.
- Weeks run Monday to Sunday. "this week" is the week of the turn's day, "last week" the Monday-Sunday week before
  it, "next week" the one after; write a week as YYYY-Www.
- "last <weekday>" is the most recent such day strictly before the turn's day (said on a Friday, "last Friday" is a
  week earlier); "next <weekday>" is the first such day strictly after it (said on a Friday, "next Saturday" is the
  following day); "this <weekday>" is that day in the turn's week.
- "this weekend" is the Saturday and Sunday of the turn's week (said on a Sunday: the weekend under way); "last
  weekend" is the one a week earlier (said on a Sunday: not the one ending that day); "next weekend" the one a week
  later; "this coming weekend" the first weekend starting after the turn's day. Write a weekend as the range
  YYYY-MM-DD/YYYY-MM-DD.
- "N days/weeks/months/years ago" and "in N ..." move by calendar amounts; "a couple of" is 2, "a few" is about 3.
  After a past negation ("haven't talked in a few days") "in N ..." is a duration, not a date.
- "last/this/next month" and "... year" name the whole calendar month (YYYY-MM) or year (YYYY).
- Seasons are meteorological (northern hemisphere): spring March-May, summer June-August, autumn September-November,
  winter December-February, named by the year they start in (YYYY-winter runs from December YYYY); "next spring"
  said in May 2023 is 2024-spring, "this summer" said in May 2023 is 2023-summer.
- Give a date only as precise as the conversation is: a day only when a day is said or follows from these rules.
"""
