"""Limits on conversation input, and the checks every reader (and :func:`tmem.ingest.import_sessions`) applies.

Hostile or broken input must end in an :class:`~tmem.errors.InputError` naming where it is, never in a traceback,
a multi-gigabyte build or a space that breaks later. The limits (docs/ingest.md, "Limits"):

* JSON nesting at most ``MAX_DEPTH`` levels; integers at most ``MAX_INT_DIGITS`` digits (Python refuses to convert
  more than 4,300); no NaN or Infinity; no duplicate key in one object (JSON allows it, but a silently dropped value
  is lost data) - anywhere in the file, even in fields tmem ignores;
* no lone surrogate (``"\\ud800"``) in any string or key: it cannot be written as UTF-8, so it would break every
  later command that prints or stores the text;
* names (space, speaker, declared speakers) and ids (session, turn): non-blank, printable (no control, format or
  line-break characters, so no terminal escape sequence), at most ``MAX_NAME_CHARS`` (names) or ``MAX_ID_CHARS``
  (ids) characters;
* no NUL character (``\\x00``) in a turn's text or caption (names refuse every control character): SQLite would
  store it and PostgreSQL cannot, so both backends refuse it alike;
* a turn's text at most ``MAX_TURN_CHARS`` characters, a caption at most ``MAX_CAPTION_CHARS``, a session at most
  ``MAX_TURNS_PER_SESSION`` turns;
* dates in years ``MIN_YEAR`` .. ``MAX_YEAR`` (after conversion to UTC), leaving room for relative-date arithmetic.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from tmem.errors import InputError

MAX_DEPTH = 64
MAX_INT_DIGITS = 100
MAX_NAME_CHARS = 200
MAX_ID_CHARS = 256  # a generated turn id is "<session id>:<n>"
MAX_TURN_CHARS = 100_000
MAX_CAPTION_CHARS = 10_000
MAX_TURNS_PER_SESSION = 10_000
MIN_YEAR = 1000
MAX_YEAR = 8999

_SURROGATE = re.compile("[\ud800-\udfff]")


class HugeNumber:
    """Stands in for an integer literal too long to convert; reported with its path after parsing."""

    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits


class NotANumber:
    """Stands in for NaN / Infinity / -Infinity (not JSON); reported with its path after parsing."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class DupDict(dict[str, Any]):
    """A JSON object in which a key appeared more than once (the first repeated key is kept for the message)."""

    duplicate: str = ""


def parse_int(text: str) -> int | HugeNumber:
    digits = len(text.lstrip("-"))
    return int(text) if digits <= MAX_INT_DIGITS else HugeNumber(digits)


def parse_constant(text: str) -> NotANumber:
    return NotANumber(text)


def object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            dup = DupDict(out)
            dup.duplicate = key
            dup.update(pairs)
            return dup
        out[key] = value
    return out


def read_json(text: str | bytes) -> Any:
    """JSON text parsed with the hooks above: a repeated key, NaN or an over-long integer becomes a marker that
    :func:`scan` reports with its path. The one parser of files, request bodies and JSON query parameters (a
    ``ValueError`` for text that is not JSON at all, a ``RecursionError`` for absurd nesting)."""
    return json.loads(text, object_pairs_hook=object_pairs, parse_int=parse_int, parse_constant=parse_constant)


def _step(path: str, key: str) -> str:
    return path + (f".{key}" if re.match(r"^[A-Za-z_][A-Za-z0-9_-]*$", key) else f"[{json.dumps(key)}]")


def scan(value: Any, where: Callable[[str], str]) -> None:
    """Walk a parsed JSON value (iteratively) and raise InputError at the first violation of the JSON limits.

    ``where(path)`` turns a JSON path into the place shown in the message (file, line, path).
    """
    stack: list[tuple[Any, str, int]] = [(value, "$", 0)]
    while stack:
        node, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InputError(f"{where(path)}: nested more than {MAX_DEPTH} levels deep; flatten the data.")
        if isinstance(node, dict):
            if isinstance(node, DupDict):
                raise InputError(
                    f"{where(_step(path, node.duplicate))}: the key {json.dumps(node.duplicate)} appears twice in "
                    "one object; keep one (JSON readers disagree on which value wins, so tmem refuses to guess)."
                )
            for key, child in reversed(list(node.items())):
                if _SURROGATE.search(key):
                    raise InputError(f"{where(path)}: a key holds a lone surrogate ({ascii(key)[:60]}); {_FIX_UTF}")
                stack.append((child, _step(path, key), depth + 1))
        elif isinstance(node, list):
            stack.extend((child, f"{path}[{i}]", depth + 1) for i, child in reversed(list(enumerate(node))))
        elif isinstance(node, str):
            if _SURROGATE.search(node):
                raise InputError(f"{where(path)}: the string holds a lone surrogate ({_preview(node)}); {_FIX_UTF}")
        elif isinstance(node, HugeNumber):
            raise InputError(
                f"{where(path)}: an integer of {node.digits} digits (at most {MAX_INT_DIGITS}); write it as a string."
            )
        elif isinstance(node, NotANumber):
            raise InputError(f"{where(path)}: {node.text} is not valid JSON; write a number or null.")


_FIX_UTF = "write the character as a valid pair or remove it (such text cannot be stored as UTF-8)."


def _preview(text: str) -> str:
    m = _SURROGATE.search(text)
    start = max(0, (m.start() if m else 0) - 20)
    return ascii(text[start : start + 40])


def check_name(value: str, what: str, limit: int = MAX_NAME_CHARS) -> str | None:
    """The problem with a name or id (space, speaker, session or turn id), or None when it is fine."""
    if not value.strip():
        return f"is empty; write {what}."
    if len(value) > limit:
        return f"is {len(value)} characters long; {what} may have at most {limit}."
    if _SURROGATE.search(value):
        return f"holds a lone surrogate ({_preview(value)}); {_FIX_UTF}"
    if not value.isprintable():
        bad = next(ch for ch in value if not ch.isprintable())
        return (
            f"holds the non-printable character {bad!a}; {what} must be printable text on one line "
            "(no control, format or line-break characters)."
        )
    return None


def check_text(value: str, what: str, limit: int) -> str | None:
    """The problem with a free text (turn text, caption), or None."""
    if len(value) > limit:
        return (
            f"is {len(value):,} characters long; {what} may have at most {limit:,}. Split it into several turns or "
            "shorten it."
        )
    if _SURROGATE.search(value):
        return f"holds a lone surrogate ({_preview(value)}); {_FIX_UTF}"
    if "\x00" in value:
        return nul_problem(value)
    return None


def nul_problem(value: str) -> str:
    """Why a text with a NUL character is refused (one rule for every backend: PostgreSQL cannot store one)."""
    at = value.index("\x00")
    return (
        f"holds a NUL character (\\x00) at position {at}; no text may hold one (PostgreSQL cannot store it). "
        "Remove it and send the text again."
    )


def check_date(value: datetime) -> str | None:
    if not MIN_YEAR <= value.year <= MAX_YEAR:
        return f"lies in year {value.year}; dates must lie in years {MIN_YEAR} to {MAX_YEAR}."
    return None
