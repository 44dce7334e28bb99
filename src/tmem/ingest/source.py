"""Reading JSON and JSONL files with errors that point at the exact place: file, line and JSON path.

Every reader validates by hand through these helpers so that a message says *where* (``data.json: line 3:
$[2].conversation.session_4[7].speaker``), *what* (missing, wrong type, bad date) and *how to fix it*.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tmem.errors import InputError, NotFoundError
from tmem.ingest.limits import (
    MAX_DEPTH,
    MAX_NAME_CHARS,
    MAX_YEAR,
    MIN_YEAR,
    check_date,
    check_name,
    check_text,
    object_pairs,
    parse_constant,
    parse_int,
    scan,
)
from tmem.ingest.timestamps import EXPECTED_FORMATS, try_parse_timestamp
from tmem.ingest.types import SpaceInput

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


@dataclass(frozen=True)
class Loc:
    """A place in an input file: the file, the line (JSONL only) and the JSON path inside the value."""

    file: str
    path: str = "$"
    line: int | None = None

    def key(self, name: str) -> Loc:
        step = f".{name}" if _IDENT.match(name) else f"[{json.dumps(name)}]"
        return Loc(self.file, self.path + step, self.line)

    def index(self, i: int) -> Loc:
        return Loc(self.file, f"{self.path}[{i}]", self.line)

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{self.file}: {where}{self.path}"

    def error(self, problem: str) -> InputError:
        return InputError(f"{self}: {problem}")


def describe(value: Any) -> str:
    """A JSON-flavoured name of a value's type, with a short preview."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({json.dumps(value)})"
    if isinstance(value, (int, float)):
        return f"a number ({value})"
    if isinstance(value, str):
        preview = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({json.dumps(preview)})"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def expect_object(value: Any, loc: Loc, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise loc.error(f"expected an object ({what}), got {describe(value)}.")
    return value


def expect_list(value: Any, loc: Loc, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise loc.error(f"expected a list ({what}), got {describe(value)}.")
    return value


def expect_str(value: Any, loc: Loc, what: str, *, nonempty: bool = False) -> str:
    if not isinstance(value, str):
        raise loc.error(f"expected a string ({what}), got {describe(value)}.")
    if nonempty and not value.strip():
        raise loc.error(f"is empty; write {what}.")
    return value


def required(obj: dict[str, Any], name: str, loc: Loc, what: str) -> Any:
    if name not in obj:
        raise loc.key(name).error(f"missing; add {json.dumps(name)} ({what}).")
    return obj[name]


def required_str(obj: dict[str, Any], name: str, loc: Loc, what: str, *, nonempty: bool = True) -> str:
    return expect_str(required(obj, name, loc, what), loc.key(name), what, nonempty=nonempty)


def optional_str(obj: dict[str, Any], name: str, loc: Loc, what: str) -> str | None:
    value = obj.get(name)
    if value is None:
        return None
    return expect_str(value, loc.key(name), what)


def expect_name(value: Any, loc: Loc, what: str, *, limit: int = MAX_NAME_CHARS) -> str:
    """A name or id: a printable, non-blank string of limited length (see :mod:`tmem.ingest.limits`)."""
    text = expect_str(value, loc, what)
    problem = check_name(text, what, limit)
    if problem:
        raise loc.error(problem)
    return text


def expect_text(value: Any, loc: Loc, what: str, limit: int) -> str:
    """A free text (may be empty) of at most ``limit`` characters."""
    text = expect_str(value, loc, what)
    problem = check_text(text, what, limit)
    if problem:
        raise loc.error(problem)
    return text


def expect_timestamp(value: Any, loc: Loc, what: str) -> datetime:
    text = expect_str(value, loc, what)
    if len(text) > 100:
        raise loc.error(f"is not a date ({len(text)} characters); write {what} as {EXPECTED_FORMATS}.")
    parsed = try_parse_timestamp(text)
    if parsed is None:
        raise loc.error(
            f"cannot read the date {json.dumps(text)} ({what}); write it as {EXPECTED_FORMATS}, in years "
            f"{MIN_YEAR} to {MAX_YEAR}."
        )
    problem = check_date(parsed)
    if problem:
        raise loc.error(f"the date {json.dumps(text)} ({what}) {problem}")
    return parsed


def reject_unknown(obj: dict[str, Any], allowed: set[str], loc: Loc) -> None:
    """Native records are strict: a misspelt field is an error, not silently ignored data."""
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise loc.key(unknown[0]).error(
            f"unknown field; the allowed fields here are {', '.join(sorted(allowed))} (see docs/ingest.md)."
        )


def read_text(path: Path) -> str:
    if not path.exists():
        raise NotFoundError(f"{path}: no such file; check the path.")
    if not path.is_file():
        raise InputError(f"{path}: not a file; pass a JSON or JSONL file.")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start}); save the file as UTF-8 JSON.") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror}); check its permissions.") from exc


def parse_json(text: str, file: str, *, line_offset: int = 0, jsonl: bool = False) -> Any:
    """One JSON document; broken JSON, and JSON beyond the limits of :mod:`tmem.ingest.limits` (nesting depth,
    huge integers, NaN, duplicate keys, lone surrogates), become an InputError with the line and the JSON path."""
    try:
        data = json.loads(text, object_pairs_hook=object_pairs, parse_int=parse_int, parse_constant=parse_constant)
    except json.JSONDecodeError as exc:
        line = exc.lineno + line_offset
        raise InputError(
            f"{file}: broken JSON at line {line}, column {exc.colno}: {exc.msg}. "
            "Fix the syntax there (`python -m json.tool FILE` shows the first error)."
        ) from exc
    except RecursionError as exc:
        where = f"line {line_offset + 1}" if jsonl else "the document"
        raise InputError(
            f"{file}: {where} is nested too deeply to read (tmem accepts at most {MAX_DEPTH} levels); flatten the data."
        ) from exc
    at_line = line_offset + 1 if jsonl else None
    scan(data, lambda path: str(Loc(file, path, at_line)))
    return data


def parse_jsonl(text: str, file: str) -> list[tuple[int, Any]]:
    """One JSON value per non-blank line, with its 1-based line number."""
    records: list[tuple[int, Any]] = []
    # split on "\n" only: str.splitlines() would also split inside strings holding U+2028 and friends
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            records.append((number, parse_json(line, file, line_offset=number - 1, jsonl=True)))
    return records


def read_spaces(
    data: Any, file: str, *, what: str, empty: str, id_key: str, read: Callable[[Any, Loc], SpaceInput]
) -> list[SpaceInput]:
    """A document of one record or a list of records (``what``), each read into a space by ``read``; the space names
    (the records' ``id_key``) must be unique. ``empty`` is the message for an empty list."""
    root = Loc(file)
    records = [data] if isinstance(data, dict) else expect_list(data, root, what)
    if not records:
        raise root.error(empty)
    spaces: list[SpaceInput] = []
    seen: dict[str, Loc] = {}
    for i, raw in enumerate(records):
        loc = root if isinstance(data, dict) else root.index(i)
        space = read(raw, loc)
        if space.name in seen:
            raise loc.key(id_key).error(
                f"{id_key} {space.name!r} already used at {seen[space.name].path}; {id_key}s name spaces and "
                "must be unique."
            )
        seen[space.name] = loc
        spaces.append(space)
    return spaces
