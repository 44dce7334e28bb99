"""Builds the MCP server starts in the background, by the server's build policy (``remember`` returns at once).

After a ``remember`` (``build="auto"``) the space is built in a task of the server's event loop when the policy says
so: at once when it has ``TMEM_BUILD_AFTER_TURNS`` unbuilt turns, else once no message has arrived for
``TMEM_BUILD_IDLE_SECONDS`` (a timer per space, restarted by every arrival). The ``status`` tool lists a space's
recent builds (:class:`BuildJob`). Builds of one space never overlap: the store's build lease refuses a second one
(``BuildBusy``), reported as state ``busy``.

With ``open_builder`` (what ``tmem mcp`` passes) builds run in a worker thread on a :class:`tmem.Memory` of their own
(opened on first use, one build at a time), as the HTTP service's build workers do, so the server keeps answering
while a space builds; readers see the new memory through the store (the index follows its state keys). Without it
they run on the server's own memory in its event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field

from tmem.errors import BuildBusy, TmemError
from tmem.memory import AsyncMemory, Memory
from tmem.scope import Scope
from tmem.util.aio import blocking

log = logging.getLogger("tmem.mcp")

KEEP_JOBS = 5  # per space
JobState = Literal["running", "succeeded", "failed", "busy"]


class BuildJob(BaseModel):
    """One background build of a space."""

    state: JobState
    reason: str = Field(description="'turns' (enough unbuilt turns) or 'idle' (quiet since the last message).")
    started_at: str = Field(description="Wall-clock start (UTC, bookkeeping only).")
    finished_at: str | None = None
    error: str | None = Field(default=None, description="Why it failed.")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Builds:
    """The server's background builds and idle timers, per scope."""

    def __init__(
        self,
        memory: AsyncMemory,
        shown: Callable[[TmemError, Scope], str],
        open_builder: Callable[[], Memory] | None = None,
    ) -> None:
        self.memory = memory
        self.shown = shown  # (error, scope) -> its text as the space's tenant reads it
        self._open_builder = open_builder
        self._builder: Memory | None = None
        self._one_at_a_time = threading.Lock()
        self.jobs: dict[Scope, list[BuildJob]] = {}
        self._tasks: dict[Scope, asyncio.Task[None]] = {}
        self._timers: dict[Scope, asyncio.Task[None]] = {}
        self._arrived: dict[Scope, float] = {}

    def running(self, key: Scope) -> bool:
        task = self._tasks.get(key)
        return task is not None and not task.done()

    def of(self, key: Scope) -> list[BuildJob]:
        return list(self.jobs.get(key, []))

    async def arrived(self, key: Scope) -> str:
        """Messages arrived in ``key``: start a build when due, else (re)start its idle timer. Returns what happened:
        'started', 'running' (a build of it runs already), 'scheduled' (the idle timer) or 'up to date'."""
        self._arrived[key] = time.monotonic()
        policy = self.memory.core.build_policy()
        stale = (await self.memory.staleness(key)).stale_turns
        if stale == 0:
            return "up to date"
        if self.running(key):
            return "running"
        if policy.due(stale, 0.0):
            self._start(key, "turns")
            return "started"
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()
        self._timers[key] = asyncio.create_task(self._idle(key, policy.idle_seconds))
        return "scheduled"

    async def _idle(self, key: Scope, seconds: float) -> None:
        await asyncio.sleep(seconds)
        quiet = time.monotonic() - self._arrived.get(key, 0.0)
        try:
            stale = (await self.memory.staleness(key)).stale_turns
        except TmemError as exc:  # e.g. the space was deleted meanwhile: nothing to build
            log.info("No idle build of a space: %s", exc)
            return
        if not self.running(key) and self.memory.core.build_policy().due(stale, quiet):
            self._start(key, "idle")

    def _start(self, key: Scope, reason: str) -> None:
        job = BuildJob(state="running", reason=reason, started_at=_now())
        self.jobs[key] = [*self.jobs.get(key, [])[-(KEEP_JOBS - 1) :], job]
        self._tasks[key] = asyncio.create_task(self._build(key, job))

    def _build_in_thread(self, key: Scope, opener: Callable[[], Memory]) -> None:
        with self._one_at_a_time:
            if self._builder is None:
                self._builder = opener()
            self._builder.build(key)

    async def _build(self, key: Scope, job: BuildJob) -> None:
        try:
            opener = self._open_builder
            if opener is not None:
                await blocking(self._build_in_thread, key, opener)
            else:
                await self.memory.build(key)
            job.state = "succeeded"
        except BuildBusy:
            job.state = "busy"
        except TmemError as exc:
            job.state, job.error = "failed", self.shown(exc, key)
            log.warning("Background build failed: %s", exc)
        finally:
            job.finished_at = _now()
            if job.state == "running":  # an unexpected exception propagates (the task logs it); record it
                job.state, job.error = "failed", "unexpected error (see the server's log)"

    async def aclose(self) -> None:
        """Cancel idle timers and wait for running builds (a build is never cut off halfway)."""
        for timer in self._timers.values():
            timer.cancel()
        running = [t for t in self._tasks.values() if not t.done()]
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        if self._builder is not None:
            await blocking(self._builder.close)
            self._builder = None
