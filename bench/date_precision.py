"""How often an item's date in the LLM-built dev memories is a stand-in day for a coarser period.

The v1 schema let an item's ``date`` be only a full ISO day, so the model wrote a day even when the conversation named
a week, a month, a season or a year; read later, such a day looks exact. This script compares each dated item's day
with the date expressions of its own text and sorts it into:

- day: the text names that very day (e.g. "On 7 May 2023 ...", "(stated 8 May 2023)");
- stand-in for a week / month / season / year / range: the text names no such day, but names a coarser period that
  contains it ("in the week before 16 March 2023", "in June 2023", "summer 2022", "around 2019", "last weekend");
- day not in the text: neither; mostly the day the fact was said, which the text does not state (and which is not
  always the day of the fact: "Jon's blood pressure spiked in January 2022" is dated 2022-08-25).

The migration carries these stores forward as day precision (that is what was recorded); since migration 002 an item
records its precision, and a model following the date forms writes the period instead of a stand-in day. No model can
rebuild the memories here, so this measures the problem on the shipped memories, not a rebuilt "after". The shipped
files are copied first, never opened in place.

Run (from the repository root):
    python bench/date_precision.py --data /work/shared/data/llm-built --out bench/results/date_precision.md
"""

from __future__ import annotations

import argparse
import re
import shutil
import tempfile
from collections import Counter
from datetime import date
from pathlib import Path

from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore
from tmem.util.dates import parse_when

_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_MONTH_NO = {m: n for n, m in enumerate(_MONTHS.split("|"), start=1)}
_DAY = re.compile(rf"\b(\d{{1,2}}) ({_MONTHS}) (\d{{4}})\b")
_MONTH = re.compile(rf"(?<!\d )\b({_MONTHS}) (\d{{4}})\b")
_SEASON = re.compile(r"\b(spring|summer|autumn|fall|winter)(?: of)? (\d{4})\b", re.IGNORECASE)
_YEAR = re.compile(r"\b(?:in|around|since|by|about|of|during|early|late|mid-?)\s+(\d{4})\b", re.IGNORECASE)
_WEEK = re.compile(r"\bweek\b", re.IGNORECASE)
_WEEKEND = re.compile(r"\bweekend\b", re.IGNORECASE)


def classify(text: str, day: date) -> str:
    days = {date(int(y), _MONTH_NO[m], int(d)) for d, m, y in _DAY.findall(text)}
    if day in days:
        return "day"
    if _WEEKEND.search(text):
        return "stand-in for a range (weekend)"
    if _WEEK.search(text):
        return "stand-in for a week"
    for season, year in _SEASON.findall(text):
        when = parse_when(f"{year}-{season.lower()}")
        if when.start <= day <= when.end:
            return "stand-in for a season"
    if any((int(y), _MONTH_NO[m]) == (day.year, day.month) for m, y in _MONTH.findall(text)):
        return "stand-in for a month"
    if any(int(y) == day.year for y in _YEAR.findall(text)):
        return "stand-in for a year"
    return "day not in the text"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/llm-built"))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    kinds = [
        "day",
        "stand-in for a week",
        "stand-in for a range (weekend)",
        "stand-in for a month",
        "stand-in for a season",
        "stand-in for a year",
        "day not in the text",
    ]
    rows = ["| memory | dated items | " + " | ".join(kinds) + " |", "| --- | ---: |" + " ---: |" * len(kinds)]
    examples: list[str] = []
    for db in sorted(args.data.glob("*.db")):
        space = db.name.removesuffix(".db")
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "tmem.db"
            shutil.copyfile(db, copy)
            store = SQLiteStore.open(copy)
            items = [it for it in store.items(Scope.local(space)) if it.date]
            store.close()
        counts: Counter[str] = Counter()
        for it in items:
            kind = classify(it.text, date.fromisoformat(it.date or ""))
            counts[kind] += 1
            if kind.startswith("stand-in") and sum(1 for e in examples if e.startswith(f"- {space}")) < 6:
                examples.append(f"- {space} ({kind}): date {it.date} for: {it.text}")
        rows.append(f"| {space} | {len(items)} | " + " | ".join(str(counts[k]) for k in kinds) + " |")
    text = "\n".join(
        [
            "# Stand-in days in the LLM-built dev memories (v1 schema: every date a full day)",
            "",
            "Command: `python bench/date_precision.py --data /work/shared/data/llm-built "
            "--out bench/results/date_precision.md`",
            "",
            *rows,
            "",
            "Examples:",
            "",
            *examples,
            "",
        ]
    )
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
