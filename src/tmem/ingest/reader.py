"""``read_file``: any supported conversation file -> validated spaces. Pure: it touches no store."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from tmem.errors import InputError
from tmem.ingest.locomo import looks_like_locomo, read_locomo
from tmem.ingest.longmemeval import looks_like_longmemeval, read_longmemeval
from tmem.ingest.native import looks_like_native, read_native, read_native_lines
from tmem.ingest.source import parse_json, parse_jsonl, read_text
from tmem.ingest.types import SpaceInput

Format = Literal["auto", "locomo", "native", "longmemeval"]
FORMATS: tuple[Format, ...] = ("auto", "locomo", "native", "longmemeval")
JSONL_SUFFIXES = (".jsonl", ".ndjson")


def read_file(path: str | Path, fmt: Format = "auto", *, space: str | None = None) -> list[SpaceInput]:
    """Read and validate a LoCoMo, LongMemEval or native file.

    ``fmt="auto"`` reads ``.jsonl``/``.ndjson`` files as native JSONL and otherwise parses JSON and recognises
    LoCoMo (samples with a ``conversation``), LongMemEval (instances with ``haystack_sessions``; one space per
    ``question_id``) or native (objects with ``sessions``). ``space`` selects one space of the
    file (a LoCoMo ``sample_id``) and names the space of native records that name none.

    Raises InputError (file, line, JSON path, what is wrong and how to fix it) or NotFoundError (no such file).
    """
    file = Path(path)
    if fmt not in FORMATS:
        raise InputError(f"Unknown format {fmt!r}: use one of {', '.join(FORMATS)}.")
    text = read_text(file)
    name = str(file)
    if file.suffix.lower() in JSONL_SUFFIXES:
        if fmt in ("locomo", "longmemeval"):
            raise InputError(f"{name}: {fmt} files are one JSON document, not JSONL; pass the .json file.")
        spaces = read_native_lines(parse_jsonl(text, name), name, default_space=space)
    else:
        data = parse_json(text, name)
        if fmt == "auto":
            if looks_like_locomo(data):
                fmt = "locomo"
            elif looks_like_longmemeval(data):
                fmt = "longmemeval"
            elif looks_like_native(data):
                fmt = "native"
            else:
                raise InputError(
                    f"{name}: cannot tell the format: expected LoCoMo (a list of samples with 'conversation'), "
                    "LongMemEval (a list of instances with 'haystack_sessions') or native (a space object with 'sessions', or a list of them); see docs/ingest.md or pass --format."
                )
        if fmt == "native" and looks_like_locomo(data):
            raise InputError(f"{name}: looks like LoCoMo (samples with 'conversation'); pass --format locomo or auto.")
        if fmt == "locomo" and looks_like_native(data):
            raise InputError(
                f"{name}: looks like tmem's native format (with 'sessions'); pass --format native or auto."
            )
        if fmt == "longmemeval" and not looks_like_longmemeval(data):
            raise InputError(
                f"{name}: not LongMemEval (a list of instances with 'haystack_sessions'); pass --format auto."
            )
        if fmt == "locomo":
            spaces = read_locomo(data, name)
        elif fmt == "longmemeval":
            spaces = read_longmemeval(data, name)
        else:
            spaces = read_native(data, name, default_space=space)
    if space is None:
        return spaces
    chosen = [s for s in spaces if s.name == space]
    if not chosen:
        known = ", ".join(s.name for s in spaces)
        raise InputError(f"{name}: has no space {space!r}; it has: {known}. Pass one of these to --space.")
    return chosen
