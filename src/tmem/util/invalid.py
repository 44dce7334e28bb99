"""Validation errors as their reader reads them, written once for the HTTP service and the MCP tools: one short line
per field (``field: what is wrong``), no pydantic dump, no documentation link, and for a body that is not JSON the
line and column of the fault, not a byte offset."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

SHOWN = 5  # fields named in the one-line summary; the rest are counted


def _where(body: bytes | str | None, pos: object) -> str:
    """' at line L, column C' of character offset ``pos`` in ``body`` ('' when either is unknown)."""
    if body is None or not isinstance(pos, int) or pos < 0:
        return ""
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    pos = min(pos, len(text))
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f" at line {line}, column {column}"


def field_errors(errors: Sequence[Mapping[str, Any]], body: bytes | str | None = None) -> list[dict[str, str]]:
    """``[{"field": ..., "message": ...}]`` of pydantic/FastAPI errors; the request ``body`` places a JSON fault."""
    out: list[dict[str, str]] = []
    for err in errors:
        loc = tuple(err.get("loc", ()))
        if err.get("type") == "json_invalid":
            ctx = err.get("ctx")
            cause = ctx.get("error") if isinstance(ctx, Mapping) else None
            where = _where(body, loc[-1] if loc else None)
            message = f"the body is not valid JSON{where}" + (f" ({cause})" if cause else "")
            out.append({"field": "body", "message": message})
            continue
        field = ".".join(str(part) for part in loc if part != "body") or "body"
        out.append({"field": field, "message": str(err.get("msg", ""))})
    return out


def summary(errors: Sequence[Mapping[str, str]]) -> str:
    """The errors of :func:`field_errors` in one line: ``a: ...; b: ...`` (and N more)."""
    shown = "; ".join(f"{e['field']}: {e['message']}" for e in errors[:SHOWN])
    more = f" (and {len(errors) - SHOWN} more)" if len(errors) > SHOWN else ""
    return shown + more
