"""The one async boundary of tmem (docs/architecture.md).

* :func:`blocking` is the only way async code runs blocking work (store, embedder, index, search, files): in a
  worker thread, so the event loop that awaits it keeps serving. AsyncMemory, the service, the MCP server and
  :class:`tmem.llm.service.StructuredLLM` call it; nothing else offloads work its own way.
* :class:`LoopThread` is the private event loop a :class:`tmem.core.MemoryCore` runs its LLM work on (a build's
  fan-out of calls, an answer, an item edit's triggers), in a thread of its own. The core's operations are therefore
  synchronous at their surface whoever calls them: :class:`tmem.Memory` calls them directly, :class:`tmem.AsyncMemory`
  through :func:`blocking`. The LLM clients always run on that one loop, however many threads call the core.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from tmem.errors import ConfigError

P = ParamSpec("P")
R = TypeVar("R")


BLOCKING_THREADS = 64  # threads of the blocking() pool: an ask holds one while its model answers, so not cpus + 4
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _blocking_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=BLOCKING_THREADS, thread_name_prefix="tmem-blocking")
        return _pool


async def blocking(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """``fn(*args, **kwargs)`` in a worker thread of tmem's pool (with the caller's context variables), awaited:
    blocking work never runs on the awaiting event loop. The pool is tmem's own, not the loop's default executor (at
    most cpus + 4 threads), so calls that wait for a model (ask, item edits) do not queue store and search calls."""
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_blocking_pool(), call)


class LoopThread:
    """An event loop running in a daemon thread of its own, started on first use; :meth:`run` is thread-safe."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def started(self) -> bool:
        return self._loop is not None

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self._name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def run(self, coro: Coroutine[Any, Any, R]) -> R:
        """Run ``coro`` on the loop and wait for its result (or exception) in the calling thread.

        A caller inside a running event loop would block it: a ConfigError says to use tmem.AsyncMemory there (which
        calls from a worker thread)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass  # a plain thread, as it should be (the call is outside this handler: no chained RuntimeError)
        else:
            coro.close()
            raise ConfigError("Memory was called inside a running event loop: use tmem.AsyncMemory there instead.")
        future = asyncio.run_coroutine_threadsafe(coro, self._start())
        try:
            return future.result()
        except BaseException:
            future.cancel()  # the caller stopped waiting (Ctrl-C): the work stops too (a no-op once it is done)
            raise

    def close(self, timeout: float = 10.0) -> None:
        """Stop the loop and its thread (a no-op when never started)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if not thread.is_alive():
            loop.close()
