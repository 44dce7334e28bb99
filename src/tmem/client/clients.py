""":class:`Client` and :class:`AsyncClient`: the operations of :mod:`tmem.client.plans` sent with httpx."""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx

from tmem.client import plans
from tmem.client.plans import Plan, Request
from tmem.core import MemoryCore
from tmem.errors import StoreError

P = ParamSpec("P")
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


def _binder(
    like: Callable[..., object], plan: Callable[..., object], ignored: tuple[str, ...]
) -> Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]:
    """Maps a call with the signature of the core method ``like`` to the keyword arguments of ``plan`` (whose
    parameters are the method's, by name, except the ``ignored`` ones; checked when the client class is made)."""
    signature = inspect.signature(like)
    wanted = list(inspect.signature(plan).parameters)
    given = [name for name in signature.parameters if name != "self"]
    if set(wanted) - set(given) or set(given) - set(wanted) - set(ignored):
        raise TypeError(f"plans.{plan.__name__}{wanted} does not take the arguments of MemoryCore.{like.__name__}")

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        bound = signature.bind(None, *args, **kwargs)
        bound.apply_defaults()
        return {name: bound.arguments[name] for name in wanted}

    return bind


def _remote(
    like: Callable[Concatenate[MemoryCore, P], R], plan: Callable[..., Plan[R]], *, ignored: tuple[str, ...] = ()
) -> Callable[Concatenate[Client, P], R]:
    """``Client.NAME``: the signature and docstring of ``MemoryCore.NAME``, sent as the HTTP requests of ``plan``."""
    bind = _binder(like, plan, ignored)

    @functools.wraps(like)
    def call(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._drive(plan(**bind(args, kwargs)))

    return call


def _aremote(
    like: Callable[Concatenate[MemoryCore, P], R], plan: Callable[..., Plan[R]], *, ignored: tuple[str, ...] = ()
) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, R]]:
    """``AsyncClient.NAME``: as :func:`_remote`, awaited."""
    bind = _binder(like, plan, ignored)

    @functools.wraps(like)
    async def call(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._drive(plan(**bind(args, kwargs)))

    return call


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

    # ------------------------------------------------------------------ operations (the MemoryCore signatures)
    spaces = _remote(MemoryCore.spaces, plans.spaces)
    add_messages = _remote(MemoryCore.add_messages, plans.add_messages)
    delete_space = _remote(MemoryCore.delete_space, plans.delete_space)
    build = _remote(MemoryCore.build, plans.build, ignored=("progress",))  # progress: the server's to show
    search = _remote(MemoryCore.search, plans.search)
    context = _remote(MemoryCore.context, plans.context)
    ask = _remote(MemoryCore.ask, plans.ask)
    list_items = _remote(MemoryCore.list_items, plans.list_items)
    get_item = _remote(MemoryCore.get_item, plans.get_item)
    update_item = _remote(MemoryCore.update_item, plans.update_item)
    delete_item = _remote(MemoryCore.delete_item, plans.delete_item)
    forget = _remote(MemoryCore.forget, plans.forget)
    history = _remote(MemoryCore.history, plans.history)
    export = _remote(MemoryCore.export, plans.export)


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

    # ------------------------------------------------------------------ operations (the MemoryCore signatures)
    spaces = _aremote(MemoryCore.spaces, plans.spaces)
    add_messages = _aremote(MemoryCore.add_messages, plans.add_messages)
    delete_space = _aremote(MemoryCore.delete_space, plans.delete_space)
    build = _aremote(MemoryCore.build, plans.build, ignored=("progress",))  # progress: the server's to show
    search = _aremote(MemoryCore.search, plans.search)
    context = _aremote(MemoryCore.context, plans.context)
    ask = _aremote(MemoryCore.ask, plans.ask)
    list_items = _aremote(MemoryCore.list_items, plans.list_items)
    get_item = _aremote(MemoryCore.get_item, plans.get_item)
    update_item = _aremote(MemoryCore.update_item, plans.update_item)
    delete_item = _aremote(MemoryCore.delete_item, plans.delete_item)
    forget = _aremote(MemoryCore.forget, plans.forget)
    history = _aremote(MemoryCore.history, plans.history)
    export = _aremote(MemoryCore.export, plans.export)
