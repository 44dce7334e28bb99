"""The batch protocol: pending requests out as OpenAI Batch API JSONL, results back into the cache.

Export (:func:`export_pending`) writes one line per pending request::

    {"custom_id": "<request hash>", "method": "POST", "url": "/v1/chat/completions", "body": {...}}

The body is exactly what the live client would send (:func:`tmem.llm.request.chat_body`). A request pending in several
spaces (same hash) is written once: the Batch API requires unique ``custom_id`` values. A request answered since it
was queued (a build run live after a ``--batch-out`` one) is dropped from its space's pending list, not paid again.

Import (:func:`import_results`) reads a Batch API *output* file, one line per result::

    {"id": "...", "custom_id": "<hash>", "response": {"status_code": 200, "body": <chat completion>}, "error": null}

Each good line is logged as an :class:`LLMCall` with outcome ``batch`` (the message content, unvalidated, and the
usage) in every space that had the request pending; the pending entry is deleted. The next build finds it through
``store.cached_response`` and validates it then (an invalid result goes through the usual repair and retry path).
Every bad line is reported with its number and reason, never dropped silently; a result for a request that was already
imported is counted as ``already_imported``, so importing the same file twice is harmless.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from tmem.errors import InputError, NotFoundError
from tmem.models import LLMCall, PendingRequest
from tmem.scope import Scope
from tmem.store.base import Store

BATCH_URL = "/v1/chat/completions"


class BadLine(BaseModel):
    line: int = Field(description="1-based line number in the results file.")
    custom_id: str | None = None
    reason: str


class BatchImportReport(BaseModel):
    path: str
    imported: int = Field(default=0, description="Results stored in the cache (one per request hash).")
    already_imported: int = Field(default=0, description="Results whose request was cached before this import.")
    bad: list[BadLine] = Field(default_factory=list)
    still_pending: int = Field(default=0, description="Pending requests left after the import.")

    @property
    def ok(self) -> bool:
        return not self.bad


def export_pending(store: Store, path: Path | str, space: Scope | None = None) -> int:
    """Write the pending requests (of one space, or all) as Batch API JSONL; returns the number of lines."""
    seen: set[str] = set()
    lines: list[str] = []
    for request in store.pending(space):
        scope = Scope.local(request.space)  # a pending request records its space's store key
        if store.cached_response(scope, request.request_hash) is not None:
            store.delete_pending([request.request_hash], scope=scope)
            continue
        if request.request_hash in seen:
            continue
        seen.add(request.request_hash)
        body = json.loads(request.body)
        line = {"custom_id": request.request_hash, "method": "POST", "url": BATCH_URL, "body": body}
        lines.append(json.dumps(line, ensure_ascii=False, separators=(",", ":")))
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return len(lines)


def import_results(store: Store, path: Path | str) -> BatchImportReport:
    """Import a Batch API output JSONL into the cache; see the module docstring for what counts as a bad line."""
    source = Path(path)
    if not source.is_file():
        raise NotFoundError(f"Batch results file {source} does not exist; download the batch's output file first.")
    try:
        text = source.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{source}: not UTF-8 text ({exc}); pass the batch's JSONL output file.") from exc

    pending: dict[str, list[PendingRequest]] = defaultdict(list)
    for request in store.pending():
        pending[request.request_hash].append(request)
    done = {c.request_hash for c in store.llm_calls() if c.outcome in ("ok", "batch") and c.response is not None}

    report = BatchImportReport(path=str(source))
    imported: list[str] = []
    with store.transaction():
        for number, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip():
                continue
            result = _parse_line(raw)
            if result.content is None:
                report.bad.append(BadLine(line=number, custom_id=result.custom_id, reason=result.reason))
                continue
            custom_id = result.custom_id or ""
            requests = pending.pop(custom_id, None)
            if requests is None:
                if custom_id in done or custom_id in imported:
                    report.already_imported += 1
                else:
                    reason = "unknown custom_id: no pending request has this hash (was it exported from this memory?)"
                    report.bad.append(BadLine(line=number, custom_id=custom_id, reason=reason))
                continue
            for request in requests:
                store.log_llm_call(
                    LLMCall(
                        space=request.space,
                        stage=request.stage,
                        # The requested model name (as live calls log it), not the snapshot name a server reports.
                        model=_body_model(request.body),
                        request_hash=custom_id,
                        tokens_in=result.tokens_in,
                        tokens_out=result.tokens_out,
                        latency_ms=0.0,
                        attempts=1,
                        outcome="batch",
                        # Bookkeeping time of the import (never a memory date).
                        created_at=datetime.now(UTC).replace(tzinfo=None),
                        response=result.content,
                    )
                )
            imported.append(custom_id)
        store.delete_pending(imported)
    report.imported = len(imported)
    report.still_pending = len(store.pending())
    return report


@dataclass(frozen=True)
class _Line:
    """One parsed results line: ``content`` is set for a good line, ``reason`` says why a bad one is bad."""

    custom_id: str | None = None
    content: str | None = None
    reason: str = ""
    tokens_in: int = 0
    tokens_out: int = 0


def _parse_line(raw: str) -> _Line:
    try:
        line = json.loads(raw)
    except json.JSONDecodeError as exc:
        return _Line(reason=f"not JSON ({exc.msg} at column {exc.colno})")
    if not isinstance(line, dict):
        return _Line(reason="not a JSON object")
    custom_id = line.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        return _Line(reason="no custom_id")
    error = line.get("error")
    if error:
        return _Line(custom_id, reason=f"error: {_error_text(error)}")
    response = line.get("response")
    if not isinstance(response, dict):
        return _Line(custom_id, reason="no response object")
    status = response.get("status_code")
    body = response.get("body")
    if status != 200:
        detail = _error_text(body["error"]) if isinstance(body, dict) and body.get("error") else ""
        return _Line(custom_id, reason=f"status_code {status}" + (f": {detail}" if detail else ""))
    if not isinstance(body, dict):
        return _Line(custom_id, reason="response.body is not a chat completion object")
    usage = body.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    content = _content(body)
    if content is None:
        return _Line(custom_id, reason="no message content in response.body.choices[0]")
    return _Line(
        custom_id,
        content,
        tokens_in=_int(usage.get("prompt_tokens")),
        tokens_out=_int(usage.get("completion_tokens")),
    )


def _content(body: dict[str, Any]) -> str | None:
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    return content if isinstance(content, str) and content.strip() else None


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error.get("code") or error)
    return str(error)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def _body_model(body: str) -> str:
    model = json.loads(body).get("model")
    return model if isinstance(model, str) else "unknown"
