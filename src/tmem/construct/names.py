"""Proper names of a text (people, places, titles), found without a model: capitalised words that do not start a
sentence (months and weekdays excepted), plus the speakers' names wherever they stand. Used to keep the item's names in its Bridge view: measured on
the LLM-built dev memories, Bridge views with the item's names added were hit more often by the cue probes and LoCoMo
questions than the views as the model wrote them, and views stripped of names less (bench/bridge_names.py)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from tmem.util.dates import MONTHS

_NAME = re.compile(r"(?<![.!?:]\s)(?<!^)\b[A-Z][a-zA-Z'-]+")
# Capitalised but not names: dates are not what a Bridge is about.
_NOT_NAMES = frozenset([*MONTHS, "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"])


def proper_names(text: str, speakers: Sequence[str] = ()) -> list[str]:
    """Names in order of appearance, each once, without a possessive 's."""
    stripped = text.strip()
    found = [m.group(0) for m in _NAME.finditer(stripped)]
    found += [s for s in speakers if s and re.search(rf"\b{re.escape(s)}\b", stripped)]
    return list(dict.fromkeys(n.removesuffix("'s") for n in found if n.removesuffix("'s") not in _NOT_NAMES))


def with_names(view: str, source: str, speakers: Sequence[str] = ()) -> str:
    """``view`` followed by the names of ``source`` it lacks, in parentheses (``view`` itself when it has them)."""
    missing = [n for n in proper_names(source, speakers) if not re.search(rf"\b{re.escape(n)}\b", view)]
    return f"{view} ({', '.join(missing)})" if missing else view


def without_names(text: str, speakers: Sequence[str] = ()) -> str:
    out = text
    for name in proper_names(text, speakers):
        out = re.sub(rf"\b{re.escape(name)}('s)?\b", "", out)
    return " ".join(out.split())
