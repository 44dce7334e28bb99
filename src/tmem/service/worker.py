"""Build jobs run by background worker threads inside the server.

A job is a row of the control store (persisted). Workers claim queued jobs atomically in the database, so two builds
of one space never run at once, even with several workers or several server processes on one database. Each worker
owns its own :class:`Memory` (its own store connection), so a build's writes never wait behind, or hold up, the API's
reads. Builds are incremental and checkpointed: a job left ``running`` by a server that stopped is re-queued at the
next start and resumes; after MAX_ATTEMPTS interrupted starts it is failed with the reason (docs/service.md).

Worker threads are daemons: stopping the server does not wait for a build to finish (the job is re-queued instead).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from tmem.errors import TmemError
from tmem.memory import Memory
from tmem.store.control import ControlStore, Job, store_space

log = logging.getLogger("tmem.service")


class BuildWorkers:
    def __init__(
        self,
        control: ControlStore,
        open_memory: Callable[[], Memory],
        *,
        workers: int = 1,
        poll_seconds: float = 2.0,
    ) -> None:
        self._control = control
        self._open_memory = open_memory
        self._count = workers
        self._poll = poll_seconds
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for n in range(self._count):
            thread = threading.Thread(target=self._loop, name=f"tmem-build-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the workers to stop after their current build; wait at most ``timeout`` seconds for them."""
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout)

    def _loop(self) -> None:
        memory = self._open_memory()
        try:
            while not self._stop.is_set():
                job = self._control.claim_job()
                if job is None:
                    self._wake.wait(self._poll)
                    self._wake.clear()
                    continue
                self.run(memory, job)
                self._wake.set()  # another worker may now take a job of this space
        finally:
            memory.close()

    def run(self, memory: Memory, job: Job) -> None:
        """Run one claimed job to its end state."""
        try:
            report = memory.build(store_space(job.tenant, job.space), rebuild=bool(job.params.get("rebuild")))
        except TmemError as exc:
            self._control.finish_job(job.id, "failed", error=f"{type(exc).__name__}: {exc}")
            return
        except Exception as exc:  # a worker must survive any build failure and record it
            log.exception("Build job %s failed unexpectedly", job.id)
            self._control.finish_job(
                job.id, "failed", error=f"Unexpected {type(exc).__name__}: {exc}. This is a bug; see the server log."
            )
            return
        result = report.model_dump(mode="json")
        result["space"] = job.space
        self._control.finish_job(job.id, "succeeded", result=result)
