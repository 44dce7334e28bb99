"""Local repair of a model reply that should have been one JSON object.

Models (especially in JSON mode or behind servers without strict structured output) wrap the object in code fences or
prose, or leave trailing commas. :func:`repair_json` fixes exactly those, without guessing at content: it returns the
repaired text, or None when there is nothing it can fix. The caller validates the result with pydantic.
"""

from __future__ import annotations

import json
from collections.abc import Iterator


def repair_json(text: str) -> str | None:
    """The first balanced JSON object in ``text`` with trailing commas removed, if that parses; else None."""
    candidate = _outer_object(text)
    if candidate is None:
        return None
    for attempt in (candidate, _drop_trailing_commas(candidate)):
        try:
            json.loads(attempt)
        except json.JSONDecodeError:
            continue
        return attempt
    return None


def _outer_object(text: str) -> str | None:
    """The first ``{...}`` span whose braces balance, scanning strings correctly (fences and prose fall away)."""
    start = text.find("{")
    while start != -1:
        end = _matching_brace(text, start)
        if end is not None:
            return text[start : end + 1]
        start = text.find("{", start + 1)
    return None


def _outside_strings(text: str, start: int = 0) -> Iterator[int]:
    """Positions from ``start`` on that lie outside JSON string literals (the quotes themselves excluded)."""
    in_string = False
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        else:
            yield i


def _matching_brace(text: str, start: int) -> int | None:
    depth = 0
    for i in _outside_strings(text, start):
        ch = text[i]
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i if ch == "}" else None
    return None


def _drop_trailing_commas(text: str) -> str:
    """Remove commas that are followed (after whitespace) by ``}`` or ``]``, outside strings."""
    drop: set[int] = set()
    for i in _outside_strings(text):
        if text[i] == ",":
            j = i + 1
            while j < len(text) and text[j] in " \t\r\n":
                j += 1
            if j < len(text) and text[j] in "}]":
                drop.add(i)
    return "".join(ch for i, ch in enumerate(text) if i not in drop)
