"""Locale-free date formatting shared by construction, the index and answering (it sits below all of them)."""

from __future__ import annotations

from datetime import date

__all__ = ["format_day", "month_name"]

_MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip


def month_name(day: date) -> str:
    """The English month name (``strftime('%B')`` would follow the process's LC_TIME locale)."""
    return _MONTHS[day.month - 1]


def format_day(day: date) -> str:
    """'7 May 2023' (no leading zero, English month name, never locale dependent)."""
    return f"{day.day} {month_name(day)} {day.year}"
