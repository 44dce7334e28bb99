"""Resolve relative date expressions ("yesterday", "last Friday", "two weeks ago") against a session date.

The anchor is always the date the utterance was made (the session or turn time from the conversation), never the
machine's clock. The resolver is deliberately small and rule-based; every rule is listed in docs/extractive.md.

Conventions (English usage is ambiguous; these are the documented choices, the same that the item-extraction prompt
gives the model: :data:`tmem.util.dates.DATE_CONVENTION`; seasons are in that convention but this resolver does not
resolve them):

- Weeks run Monday to Sunday. "last week" is the Monday-Sunday week before the anchor's week; "this week" the
  anchor's week; "next week" the one after.
- "last <weekday>" is the most recent such day strictly before the anchor; "next <weekday>" the first strictly after;
  "this <weekday>" the one inside the anchor's week.
- "this weekend" is the Saturday and Sunday of the anchor's week; "last weekend" (or "this past weekend") the one a
  week earlier; "next weekend" a week later; "this coming weekend" the first one starting after the anchor.
- "N days/weeks/months/years ago" moves the anchor back by that calendar amount (months and years by calendar
  arithmetic, clamped to the month's last day); "in N ..." moves it forward. "a few" counts as 3 and marks the
  result approximate; "a couple of" counts as 2.
- "in N ..." after a past negation in the same clause ("haven't talked in a few days", "wasn't built in a day",
  "had not / never / the first time ... in two years") says how long, not when, and is not resolved.
- "last/this/next month|year" name a whole calendar month or year.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from enum import StrEnum

from dateutil.relativedelta import relativedelta
from pydantic import BaseModel, ConfigDict

from tmem.util.dates import format_day, month_name

__all__ = ["Granularity", "ResolvedDate", "format_day", "month_name", "resolve_relative_dates"]


class Granularity(StrEnum):
    DAY = "day"
    WEEKEND = "weekend"
    WEEK = "week"
    MONTH = "month"
    YEAR = "year"


class ResolvedDate(BaseModel):
    """One relative expression found in a text, with the absolute date range it names."""

    model_config = ConfigDict(frozen=True)

    expression: str  # the surface text as written, e.g. "last Friday"
    start_char: int
    end_char: int
    start: date
    end: date  # inclusive
    granularity: Granularity
    approximate: bool = False

    @property
    def label(self) -> str:
        """A human-readable absolute rendering, e.g. '7 May 2023', 'the week of 1-7 May 2023', 'April 2023'."""
        prefix = "about " if self.approximate else ""
        if self.granularity is Granularity.DAY:
            return prefix + format_day(self.start)
        if self.granularity is Granularity.MONTH:
            return f"{prefix}{month_name(self.start)} {self.start.year}"
        if self.granularity is Granularity.YEAR:
            return prefix + str(self.start.year)
        kind = "the weekend of" if self.granularity is Granularity.WEEKEND else "the week of"
        return f"{prefix}{kind} {_format_range(self.start, self.end)}"


def _format_range(start: date, end: date) -> str:
    if start.year != end.year:
        return f"{format_day(start)} - {format_day(end)}"
    if start.month != end.month:
        return f"{start.day} {month_name(start)} - {format_day(end)}"
    return f"{start.day}-{format_day(end)}"


_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "a couple": 2,
    "couple of": 2,
    "a few": 3,
    "few": 3,
}
_APPROXIMATE_COUNTS = {"a few", "few"}
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_UNITS = {"day": "day", "days": "day", "week": "week", "weeks": "week", "month": "month", "months": "month",
          "year": "year", "years": "year"}  # fmt: skip

_COUNT = r"(?P<count>\d{1,3}|a couple of|a couple|couple of|a few|few|an|a|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_UNIT = r"(?P<unit>days?|weeks?|months?|years?)"
_WEEKDAY = r"(?P<weekday>monday|tuesday|wednesday|thursday|friday|saturday|sunday)"

# Ordered: longer expressions first so that "the day before yesterday" wins over "yesterday".
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("before_yesterday", re.compile(r"\bthe day before yesterday\b", re.I)),
    ("after_tomorrow", re.compile(r"\bthe day after tomorrow\b", re.I)),
    ("ago", re.compile(rf"\b{_COUNT}\s+{_UNIT}\s+ago\b", re.I)),
    ("in_future", re.compile(rf"\bin\s+{_COUNT}\s+{_UNIT}\b", re.I)),
    ("rel_weekday", re.compile(rf"\b(?P<which>last|this|next|this past|this coming)\s+{_WEEKDAY}\b", re.I)),
    ("rel_weekend", re.compile(r"\b(?P<which>last|this|next|this past|this coming)\s+weekend\b", re.I)),
    ("rel_period", re.compile(r"\b(?P<which>last|this|next)\s+(?P<unit>week|month|year)\b", re.I)),
    ("yesterday", re.compile(r"\byesterday\b", re.I)),
    ("last_night", re.compile(r"\blast night\b", re.I)),
    ("tomorrow", re.compile(r"\btomorrow\b", re.I)),
    ("today", re.compile(r"\b(?:today|tonight|this morning|this afternoon|this evening)\b", re.I)),
]


# A past negation before "in N <unit>" in the same clause makes it a duration ("haven't talked in a few days").
_DURATION_CUE = re.compile(
    r"\b(?:(?:haven|hasn|hadn|wasn|weren|didn)['\u2019]t|(?:have|has|had|was|were|did)\s+not|never|first\s+time)\b",
    re.I,
)
_CLAUSE_END = re.compile(r"[.!?;,]")


def _is_duration(text: str, start: int) -> bool:
    clause = _CLAUSE_END.split(text[:start])[-1]
    return _DURATION_CUE.search(clause) is not None


def _week_start(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _count(text: str) -> tuple[int, bool]:
    key = " ".join(text.lower().split())
    if key.isdigit():
        return int(key), False
    return _NUMBERS[key], key in _APPROXIMATE_COUNTS


def _shift(anchor: date, amount: int, unit: str) -> tuple[date, date, Granularity]:
    """Move the anchor by a signed calendar amount; the result names a day (weeks/months/years ago are days)."""
    if unit == "day":
        day = anchor + timedelta(days=amount)
    elif unit == "week":
        day = anchor + timedelta(weeks=amount)
    elif unit == "month":
        day = anchor + relativedelta(months=amount)
    else:
        day = anchor + relativedelta(years=amount)
    return day, day, Granularity.DAY


def _resolve(kind: str, match: re.Match[str], anchor: date) -> tuple[date, date, Granularity, bool]:
    day = Granularity.DAY
    if kind == "before_yesterday":
        d = anchor - timedelta(days=2)
        return d, d, day, False
    if kind == "after_tomorrow":
        d = anchor + timedelta(days=2)
        return d, d, day, False
    if kind in ("yesterday", "last_night"):
        d = anchor - timedelta(days=1)
        return d, d, day, False
    if kind == "tomorrow":
        d = anchor + timedelta(days=1)
        return d, d, day, False
    if kind == "today":
        return anchor, anchor, day, False
    if kind in ("ago", "in_future"):
        count, approx = _count(match.group("count"))
        unit = _UNITS[match.group("unit").lower()]
        sign = -1 if kind == "ago" else 1
        start, end, gran = _shift(anchor, sign * count, unit)
        return start, end, gran, approx
    which = " ".join(match.group("which").lower().split())
    if kind == "rel_weekday":
        target = _WEEKDAYS.index(match.group("weekday").lower())
        if which in ("last", "this past"):
            back = (anchor.weekday() - target) % 7 or 7
            d = anchor - timedelta(days=back)
        elif which in ("next", "this coming"):
            ahead = (target - anchor.weekday()) % 7 or 7
            d = anchor + timedelta(days=ahead)
        else:  # "this": inside the anchor's week
            d = _week_start(anchor) + timedelta(days=target)
        return d, d, day, False
    if kind == "rel_weekend":
        saturday = _week_start(anchor) + timedelta(days=5)
        # "this coming" is the next weekend strictly after the anchor (as for a weekday): said on a Saturday or
        # Sunday it is the following one, not the weekend under way.
        coming = 7 if anchor.weekday() >= 5 else 0
        offset = {"last": -7, "this past": -7, "this": 0, "next": 7, "this coming": coming}[which]
        start = saturday + timedelta(days=offset)
        return start, start + timedelta(days=1), Granularity.WEEKEND, False
    # rel_period: last/this/next week|month|year
    unit = match.group("unit").lower()
    step = {"last": -1, "this": 0, "next": 1}[which]
    if unit == "week":
        start = _week_start(anchor) + timedelta(weeks=step)
        return start, start + timedelta(days=6), Granularity.WEEK, False
    if unit == "month":
        first = anchor.replace(day=1) + relativedelta(months=step)
        last = first + relativedelta(months=1) - timedelta(days=1)
        return first, last, Granularity.MONTH, False
    year = anchor.year + step
    return date(year, 1, 1), date(year, 12, 31), Granularity.YEAR, False


def resolve_relative_dates(text: str, anchor: date) -> list[ResolvedDate]:
    """Every relative date expression in ``text``, resolved against ``anchor``, in order of appearance.

    Overlapping matches are resolved in favour of the longer, earlier-listed pattern ("the day before yesterday" is
    one expression, not "yesterday").
    """
    taken: list[tuple[int, int]] = []
    found: list[ResolvedDate] = []
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            span = match.span()
            if any(span[0] < end and start < span[1] for start, end in taken):
                continue
            if kind == "in_future" and _is_duration(text, span[0]):
                continue
            start, end, gran, approx = _resolve(kind, match, anchor)
            taken.append(span)
            found.append(
                ResolvedDate(
                    expression=match.group(0),
                    start_char=span[0],
                    end_char=span[1],
                    start=start,
                    end=end,
                    granularity=gran,
                    approximate=approx,
                )
            )
    found.sort(key=lambda r: r.start_char)
    return found
