""":class:`Client` and :class:`AsyncClient`: the operations of :mod:`tmem.client.plans` sent with httpx."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from types import TracebackType
from typing import Any, TypeVar

import httpx

from tmem.answer import Answer, QuestionTime, Variant
from tmem.answer.budget import DEFAULT_CONTEXT_TOKENS, Context
from tmem.client import plans
from tmem.client.plans import Messages, Plan, Request
from tmem.construct.options import BuildOptions
from tmem.construct.report import BuildReport
from tmem.edit import ForgetReport, ItemHistory
from tmem.edit.erasure import ErasureState
from tmem.edit.listing import ItemPage
from tmem.errors import StoreError
from tmem.ingest.messages import MessagesReport
from tmem.memory import SpaceExport, Where
from tmem.models import Item, ItemKind, SpaceSummary
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.types import SearchResult

R = TypeVar("R")
DEFAULT_TIMEOUT = 120.0  # seconds per request: a search on a cold server loads its embedding model first


def _decoded(response: httpx.Response, request: Request, url: str) -> Any:
    """The JSON body of a success, or the tmem exception of an error response."""
    try:
        body = response.json() if response.content else None
    except ValueError:
        body = None
    if response.status_code >= 400:
        raise plans.error_of(response.status_code, body, request.method, f"{url}{request.path}")
    if body is None and response.content:
        raise StoreError(f"{url}{request.path} answered something that is not JSON; is {url} a tmem server?")
    return body


def _unreachable(url: str, exc: httpx.TransportError) -> StoreError:
    if isinstance(exc, httpx.TimeoutException) and not isinstance(exc, httpx.ConnectTimeout):
        # The request may have been applied: a resent add_messages is safe only with message ids (docs/agents.md).
        return StoreError(
            f"The tmem server at {url} did not answer in time ({type(exc).__name__}); the request may have been "
            "applied. Retry with a longer timeout (a resent write is exactly-once only with message ids)."
        )
    return StoreError(
        f"Cannot reach the tmem server at {url} ({type(exc).__name__}: {exc}); start it with `tmem serve` or check "
        "the URL."
    )


def _headers(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


class Client:
    """A tmem server at ``url`` seen through the API key ``key``, with :class:`tmem.Memory`'s methods."""

    def __init__(self, url: str, key: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, headers=_headers(key), timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _send(self, request: Request) -> Any:
        try:
            response = self._http.request(request.method, request.path, params=request.params, json=request.json)
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from None
        return _decoded(response, request, self.url)

    def _drive(self, plan: Plan[R]) -> R:
        try:
            step = next(plan)
            while True:
                if isinstance(step, Request):
                    step = plan.send(self._send(step))
                else:
                    time.sleep(step)
                    step = plan.send(None)
        except StopIteration as done:
            result: R = done.value
            return result
        finally:
            plan.close()

    def spaces(self) -> list[SpaceSummary]:
        return self._drive(plans.spaces())

    def add_messages(self, space: str, messages: Messages, *, received_at: datetime | None = None) -> MessagesReport:
        return self._drive(plans.add_messages(space, messages, received_at))

    def delete_space(self, space: str) -> ErasureState:
        return self._drive(plans.delete_space(space))

    def build(
        self, space: str, options: BuildOptions | None = None, *, rebuild: bool = False, progress: bool = False
    ) -> BuildReport:
        """Start a build job on the server and wait for it to end (``progress`` is the server's to show)."""
        return self._drive(plans.build(space, options, rebuild))

    def search(
        self, space: str, query: str, config: RetrievalConfig | str | None = None, *, where: Where = None
    ) -> SearchResult:
        return self._drive(plans.search(space, query, config, where))

    def context(
        self,
        space: str,
        query: str,
        max_tokens: int | None = DEFAULT_CONTEXT_TOKENS,
        config: RetrievalConfig | str | None = None,
        *,
        where: Where = None,
    ) -> Context:
        return self._drive(plans.context(space, query, max_tokens, config, where))

    def ask(
        self,
        space: str,
        question: str,
        when: QuestionTime | datetime | None = None,
        *,
        variant: Variant = "short",
        config: RetrievalConfig | str | None = None,
        max_tokens: int | None = DEFAULT_CONTEXT_TOKENS,
    ) -> Answer:
        return self._drive(plans.ask(space, question, when, variant, config, max_tokens))

    def list_items(
        self,
        space: str,
        *,
        kind: ItemKind | str | None = None,
        speaker: str | None = None,
        since: date | str | None = None,
        until: date | str | None = None,
        text: str | None = None,
        live: bool = False,
        metadata: Mapping[str, object] | None = None,
        offset: int = 0,
        limit: int = 50,
    ) -> ItemPage:
        plan = plans.list_items(space, kind, speaker, since, until, text, live, offset, limit, metadata)
        return self._drive(plan)

    def get_item(self, space: str, item_id: str) -> Item:
        return self._drive(plans.get_item(space, item_id))

    def update_item(self, space: str, item_id: str, text: str) -> Item:
        return self._drive(plans.update_item(space, item_id, text))

    def delete_item(self, space: str, item_id: str) -> ForgetReport:
        return self._drive(plans.delete_item(space, item_id))

    def forget(self, space: str, *, turn_ids: Sequence[str] = (), item_ids: Sequence[str] = ()) -> ForgetReport:
        return self._drive(plans.forget(space, turn_ids, item_ids))

    def history(self, space: str, item_id: str) -> ItemHistory:
        return self._drive(plans.history(space, item_id))

    def export(self, space: str) -> SpaceExport:
        return self._drive(plans.export(space))


class AsyncClient:
    """The async twin of :class:`Client` (and of :class:`tmem.AsyncMemory`): every method is a coroutine."""

    def __init__(self, url: str, key: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.AsyncClient(base_url=self.url, headers=_headers(key), timeout=timeout)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _send(self, request: Request) -> Any:
        try:
            response = await self._http.request(request.method, request.path, params=request.params, json=request.json)
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from None
        return _decoded(response, request, self.url)

    async def _drive(self, plan: Plan[R]) -> R:
        try:
            step = next(plan)
            while True:
                if isinstance(step, Request):
                    step = plan.send(await self._send(step))
                else:
                    await asyncio.sleep(step)
                    step = plan.send(None)
        except StopIteration as done:
            result: R = done.value
            return result
        finally:
            plan.close()

    async def spaces(self) -> list[SpaceSummary]:
        return await self._drive(plans.spaces())

    async def add_messages(
        self, space: str, messages: Messages, *, received_at: datetime | None = None
    ) -> MessagesReport:
        return await self._drive(plans.add_messages(space, messages, received_at))

    async def delete_space(self, space: str) -> ErasureState:
        return await self._drive(plans.delete_space(space))

    async def build(self, space: str, options: BuildOptions | None = None, *, rebuild: bool = False) -> BuildReport:
        return await self._drive(plans.build(space, options, rebuild))

    async def search(
        self, space: str, query: str, config: RetrievalConfig | str | None = None, *, where: Where = None
    ) -> SearchResult:
        return await self._drive(plans.search(space, query, config, where))

    async def context(
        self,
        space: str,
        query: str,
        max_tokens: int | None = DEFAULT_CONTEXT_TOKENS,
        config: RetrievalConfig | str | None = None,
        *,
        where: Where = None,
    ) -> Context:
        return await self._drive(plans.context(space, query, max_tokens, config, where))

    async def ask(
        self,
        space: str,
        question: str,
        when: QuestionTime | datetime | None = None,
        *,
        variant: Variant = "short",
        config: RetrievalConfig | str | None = None,
        max_tokens: int | None = DEFAULT_CONTEXT_TOKENS,
    ) -> Answer:
        return await self._drive(plans.ask(space, question, when, variant, config, max_tokens))

    async def list_items(
        self,
        space: str,
        *,
        kind: ItemKind | str | None = None,
        speaker: str | None = None,
        since: date | str | None = None,
        until: date | str | None = None,
        text: str | None = None,
        live: bool = False,
        metadata: Mapping[str, object] | None = None,
        offset: int = 0,
        limit: int = 50,
    ) -> ItemPage:
        plan = plans.list_items(space, kind, speaker, since, until, text, live, offset, limit, metadata)
        return await self._drive(plan)

    async def get_item(self, space: str, item_id: str) -> Item:
        return await self._drive(plans.get_item(space, item_id))

    async def update_item(self, space: str, item_id: str, text: str) -> Item:
        return await self._drive(plans.update_item(space, item_id, text))

    async def delete_item(self, space: str, item_id: str) -> ForgetReport:
        return await self._drive(plans.delete_item(space, item_id))

    async def forget(self, space: str, *, turn_ids: Sequence[str] = (), item_ids: Sequence[str] = ()) -> ForgetReport:
        return await self._drive(plans.forget(space, turn_ids, item_ids))

    async def history(self, space: str, item_id: str) -> ItemHistory:
        return await self._drive(plans.history(space, item_id))

    async def export(self, space: str) -> SpaceExport:
        return await self._drive(plans.export(space))
