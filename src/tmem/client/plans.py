"""What each client operation sends and what it returns, written once for :class:`Client` and :class:`AsyncClient`.

An operation is a *plan*: a generator that yields :class:`Request` values (or a float: seconds to wait before the next
request), receives each response's decoded JSON body, and returns the operation's result as the library's own type.
The sync and the async client only differ in how they send a request and how they wait.

Problem details (``application/problem+json``) become tmem's exceptions (:func:`error_of`), by the problem's type.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, TypeAlias, TypeVar
from urllib.parse import quote

from pydantic import TypeAdapter

from tmem.answer import Answer, QuestionTime, Variant
from tmem.answer.budget import Context
from tmem.construct.options import BuildOptions
from tmem.construct.report import BuildReport
from tmem.edit import ForgetReport, ItemHistory
from tmem.edit.erasure import ErasureState
from tmem.edit.listing import ItemPage
from tmem.errors import (
    BuildBusy,
    BuildError,
    ConfigError,
    EmbeddingError,
    InputError,
    IntegrityError,
    LLMError,
    LLMTransientError,
    NotFoundError,
    StoreError,
    TmemError,
)
from tmem.ingest.messages import MessageInput, MessagesReport
from tmem.memory import SpaceExport, Where
from tmem.models import Item, ItemKind, SpaceSummary
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.filters import MemoryFilter
from tmem.retrieve.layout import Layout, as_layout
from tmem.retrieve.types import SearchResult

Messages = Sequence[MessageInput | dict[str, object]]
POLL_FIRST, POLL_MAX = 0.1, 2.0  # seconds between polls of a build job: first, then doubling up to the max

_PROBLEMS: dict[str, type[TmemError]] = {
    "not-found": NotFoundError,
    "not-built": NotFoundError,
    "invalid-input": InputError,
    "invalid-request": InputError,
    "invalid-config": ConfigError,
    "llm-not-configured": ConfigError,
    "unauthorized": ConfigError,
    "build-conflict": BuildError,
    "build-running": BuildBusy,
    "llm-unavailable": LLMTransientError,
    "llm-failed": LLMError,
    "embedder-unavailable": EmbeddingError,
    "integrity": IntegrityError,
    "store-unavailable": StoreError,
}
_SPACES = TypeAdapter(list[SpaceSummary])
_BY_STATUS: dict[int, type[TmemError]] = {404: NotFoundError, 413: InputError, 422: InputError, 401: ConfigError}


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    params: dict[str, Any] = field(default_factory=dict)
    json: Any = None


R = TypeVar("R")
Plan: TypeAlias = Generator[Request | float, Any, R]


def error_of(status: int, body: Any, method: str, path: str) -> TmemError:
    """The exception for an error response: the problem's type decides the class, its detail is the message."""
    if isinstance(body, dict) and isinstance(body.get("detail"), str):
        kind = str(body.get("type", "")).rsplit(":", 1)[-1]
        cls = _PROBLEMS.get(kind) or _BY_STATUS.get(status) or (StoreError if status >= 500 else TmemError)
        return cls(str(body["detail"]))
    return StoreError(
        f"The server answered {method} {path} with HTTP {status} and no problem detail; is the URL a tmem server "
        "(`tmem serve`)?"
    )


def _seg(value: str) -> str:
    """One path segment, percent-encoded (item ids may hold ':', '#', '?', spaces)."""
    return quote(value, safe="")


def _config(config: RetrievalConfig | str | None) -> str | dict[str, Any] | None:
    """A preset name as is; a RetrievalConfig as JSON (by the paper's names), its ``explicit`` fields included, so
    that the server's ``auto`` keeps what the caller set as the library's does."""
    if isinstance(config, RetrievalConfig):
        # The reranker is the server operator's setting (a request naming one is refused): it is not sent.
        sent = config.model_dump(mode="json", by_alias=True, exclude={"reranker"})
        sent["explicit"] = [name for name in sent["explicit"] if name != "reranker"]
        return sent
    return config


def _layout(layout: Layout) -> dict[str, Any] | None:
    """A context layout as JSON (validated here: a bad field is refused before any request)."""
    return None if layout is None else as_layout(layout).model_dump(mode="json")


def _message(m: MessageInput | dict[str, object]) -> dict[str, Any]:
    """A message as JSON; the server validates it (and names the bad field)."""
    if isinstance(m, MessageInput):
        return m.model_dump(mode="json", exclude_none=True)
    return {k: v.isoformat() if isinstance(v, date | datetime) else v for k, v in m.items()}


def spaces() -> Plan[list[SpaceSummary]]:
    body = yield Request("GET", "/v1/spaces")
    return _SPACES.validate_python(body["spaces"])


def add_messages(space: str, messages: Messages, received_at: datetime | None) -> Plan[MessagesReport]:
    if received_at is not None:
        raise InputError(
            "Over HTTP the server dates messages without a time when it receives them: leave received_at out and give "
            "each message its own time instead."
        )
    sent = [_message(m) for m in messages]
    body = yield Request("POST", f"/v1/spaces/{_seg(space)}/messages", json={"messages": sent})
    return MessagesReport.model_validate(body)


def build(space: str, options: BuildOptions | None, rebuild: bool) -> Plan[BuildReport]:
    """Start a build job and wait for it: the build report of a succeeded job, else the job's error as BuildError."""
    if options is not None:
        raise ConfigError("Over HTTP the server's operator sets the build options; call build without options.")
    ref = yield Request("POST", f"/v1/spaces/{_seg(space)}/build", json={"rebuild": rebuild})
    wait = POLL_FIRST
    while True:
        job = yield Request("GET", f"/v1/jobs/{ref['job']}")
        if job["state"] == "succeeded":
            return BuildReport.model_validate(job["result"])
        if job["state"] == "failed":
            raise BuildError(f"Build job {ref['job']} of space {space!r} failed: {job.get('error')}")
        yield wait
        wait = min(wait * 2, POLL_MAX)


def _json(value: MemoryFilter | Mapping[str, Any]) -> dict[str, Any]:
    """A filter (or metadata condition) as the JSON the server reads."""
    if isinstance(value, MemoryFilter):
        return value.model_dump(mode="json", exclude_defaults=True)
    parsed: dict[str, Any] = json.loads(json.dumps(dict(value), default=str))
    return parsed


def search(space: str, query: str, config: RetrievalConfig | str | None, where: Where = None) -> Plan[SearchResult]:
    payload: dict[str, Any] = {"q": query, "config": _config(config), "explain": True}
    if where is not None:
        payload["where"] = _json(where)
    body = yield Request("POST", f"/v1/spaces/{_seg(space)}/search", json=payload)
    return SearchResult.model_validate(body)


def context(
    space: str,
    query: str,
    max_tokens: int | None,
    config: RetrievalConfig | str | None,
    where: Where = None,
    layout: Layout = None,
) -> Plan[Context]:
    if max_tokens is None:
        raise InputError("Over HTTP a context has a token budget: pass max_tokens (at most 32000).")
    if config is not None and not isinstance(config, str):
        raise InputError("Over HTTP the context endpoint takes a preset name as config (docs/retrieval.md).")
    params: dict[str, Any] = {"q": query, "max_tokens": max_tokens}
    if config is not None:
        params["preset"] = config
    if where is not None:
        params["where"] = json.dumps(_json(where))
    if layout is not None:
        params["layout"] = json.dumps(_layout(layout))
    body = yield Request("GET", f"/v1/spaces/{_seg(space)}/context", params=params)
    return Context.model_validate(body)


def ask(
    space: str,
    question: str,
    when: QuestionTime | datetime | None,
    variant: Variant,
    config: RetrievalConfig | str | None,
    max_tokens: int | None,
    layout: Layout = None,
) -> Plan[Answer]:
    if max_tokens is None:
        raise InputError("Over HTTP an answer's context has a token budget: pass max_tokens (at most 32000).")
    if isinstance(when, QuestionTime):
        if when.relation != "at":
            raise InputError("Over HTTP a question is asked at a time: pass a datetime (or None), not 'after'.")
        when = when.at
    at = None if when is None else when.isoformat()
    payload = {"question": question, "at": at, "variant": variant, "config": _config(config), "max_tokens": max_tokens}
    if layout is not None:
        payload["layout"] = _layout(layout)
    body = yield Request("POST", f"/v1/spaces/{_seg(space)}/ask", json=payload)
    return Answer.model_validate(body)


def list_items(
    space: str,
    kind: ItemKind | str | None,
    speaker: str | None,
    since: date | str | None,
    until: date | str | None,
    text: str | None,
    live: bool,
    offset: int,
    limit: int,
    metadata: Mapping[str, object] | None = None,
) -> Plan[ItemPage]:
    given = {"kind": kind, "speaker": speaker, "since": since, "until": until, "text": text}
    params: dict[str, Any] = {k: str(v) for k, v in given.items() if v is not None}
    if metadata is not None:
        params["metadata"] = json.dumps(_json(metadata))
    params.update(live=str(live).lower(), offset=offset, limit=limit)
    body = yield Request("GET", f"/v1/spaces/{_seg(space)}/items", params=params)
    return ItemPage.model_validate(body)


def get_item(space: str, item_id: str) -> Plan[Item]:
    body = yield Request("GET", f"/v1/spaces/{_seg(space)}/items/{_seg(item_id)}")
    return Item.model_validate(body)


def update_item(space: str, item_id: str, text: str) -> Plan[Item]:
    body = yield Request("PATCH", f"/v1/spaces/{_seg(space)}/items/{_seg(item_id)}", json={"text": text})
    return Item.model_validate(body)


def delete_item(space: str, item_id: str) -> Plan[ForgetReport]:
    body = yield Request("DELETE", f"/v1/spaces/{_seg(space)}/items/{_seg(item_id)}")
    return ForgetReport.model_validate(body)


def forget(space: str, turn_ids: Sequence[str], item_ids: Sequence[str]) -> Plan[ForgetReport]:
    if not turn_ids and not item_ids:
        raise InputError("Name what to forget: turn_ids and/or item_ids.")
    payload = {"turn_ids": list(turn_ids), "item_ids": list(item_ids)}
    body = yield Request("POST", f"/v1/spaces/{_seg(space)}/forget", json=payload)
    return ForgetReport.model_validate(body)


def history(space: str, item_id: str) -> Plan[ItemHistory]:
    body = yield Request("GET", f"/v1/spaces/{_seg(space)}/items/{_seg(item_id)}/history")
    return ItemHistory.model_validate(body)


def export(space: str) -> Plan[SpaceExport]:
    body = yield Request("GET", f"/v1/spaces/{_seg(space)}/export")
    return SpaceExport.model_validate(body)


def delete_space(space: str) -> Plan[ErasureState]:
    body = yield Request("DELETE", f"/v1/spaces/{_seg(space)}")
    return ErasureState.model_validate(body)
