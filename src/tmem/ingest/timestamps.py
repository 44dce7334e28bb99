"""Timestamp parsing for conversation data.

Two spellings are accepted:

* LoCoMo's ``"1:56 pm on 8 May, 2023"`` (12-hour clock, full or abbreviated month name, the comma optional);
* ISO 8601 as Python reads it (``2023-05-08``, ``2023-05-08T13:56``, ``2023-05-08 13:56:00``, ``...Z``,
  ``...+02:00``). A time with a zone is converted to UTC and returned without a zone; a time without one is kept as
  the conversation's own wall-clock time (see the docstring of :mod:`tmem.models`).

Dates always come from the data, never from the machine's clock.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from tmem.errors import InputError

_LOCOMO = re.compile(
    r"^\s*(?P<hour>\d{1,2}):(?P<minute>\d{2})\s*(?P<ampm>am|pm)\s+on\s+"
    r"(?P<day>\d{1,2})\s+(?P<month>[A-Za-z]+)\.?,?\s+(?P<year>\d{4})\s*$",
    re.IGNORECASE,
)

_MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}

_MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
EXPECTED_FORMATS = "'1:56 pm on 8 May, 2023' or ISO 8601 such as '2023-05-08T13:56:00' or '2023-05-08T13:56:00+02:00'"


def _parse_locomo(text: str) -> datetime | None:
    match = _LOCOMO.match(text)
    if match is None:
        return None
    month = _MONTHS.get(match["month"].lower())
    hour, minute = int(match["hour"]), int(match["minute"])
    if month is None or not 1 <= hour <= 12 or minute > 59:
        return None
    hour = hour % 12 + (12 if match["ampm"].lower() == "pm" else 0)
    try:
        return datetime(int(match["year"]), month, int(match["day"]), hour, minute)
    except ValueError:  # e.g. 31 June: the pattern matched but the calendar says no
        return None


def _parse_iso(text: str) -> datetime | None:
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:  # not ISO 8601; the caller reports the accepted spellings
        return None
    if value.tzinfo is not None:
        try:
            value = value.astimezone(UTC).replace(tzinfo=None)
        except OverflowError:  # e.g. 0001-01-01T00:00+01:00 lies before year 1 in UTC
            return None
    return value


def try_parse_timestamp(text: str) -> datetime | None:
    """The naive datetime ``text`` spells, or None when it is in neither accepted format."""
    return _parse_locomo(text) or _parse_iso(text)


def parse_timestamp(text: str) -> datetime:
    """Parse a LoCoMo or ISO 8601 timestamp; raises InputError saying which spellings are accepted."""
    value = try_parse_timestamp(text)
    if value is None:
        raise InputError(f"Cannot read the date {text!r}: write it as {EXPECTED_FORMATS}.")
    return value


def format_locomo(value: datetime) -> str:
    """Spell a datetime the way LoCoMo does (``1:56 pm on 8 May, 2023``)."""
    hour = value.hour % 12 or 12
    ampm = "pm" if value.hour >= 12 else "am"
    month = _MONTH_NAMES[value.month - 1]
    return f"{hour}:{value.minute:02d} {ampm} on {value.day} {month}, {value.year}"
