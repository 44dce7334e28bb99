"""Build jobs run by background worker threads inside the server.

A job is a row of the control store (persisted). Workers claim queued jobs atomically in the database, so the service
never starts two builds of one space at once, even with several workers or server processes on one database; the
build itself also holds the space's lease (:mod:`tmem.construct.policy`), which excludes builds started elsewhere (the
CLI): a job that meets a held lease goes back to the queue and is retried. A build that fails on a transient store
error (a locked or unreachable database, not an integrity error) is re-queued too, and the worker that ran it waits
with backoff before it claims again; after MAX_STORE_RETRIES re-queues the job is failed with the error. /healthz
reports it meanwhile (``build_error``, ``requeued_builds``, ``heartbeat_error``; status "retrying"). Each worker owns its own sync
:class:`Memory` (its own store connection and event loop), so a build's writes never hold up the API's reads.

Builds are incremental and checkpointed: a job left ``running`` by a server that stopped is re-queued and resumes;
after MAX_ATTEMPTS interrupted starts it is failed with the reason (docs/service.md). Several servers may share one
database, so a job records its owner (this server process, named like a build-lease holder) and a heartbeat that a
thread of the owner stamps every HEARTBEAT_SECONDS. A running job is orphaned when its owner is a process of this host
that no longer exists, or when its heartbeat is older than STALE_SECONDS (a server on another host that stopped).
Recovery runs when a server starts and then every RECOVER_SECONDS, so a live server takes over a stopped one's jobs.

The build policy (``TMEM_BUILD_AFTER_TURNS`` / ``TMEM_BUILD_IDLE_SECONDS``): after messages arrive, a space whose
unbuilt turns reach the threshold, or that has been quiet long enough, gets a job (``params.auto``) unless one is
queued or running. Arrival times are kept in memory: after a restart, the next message re-arms the policy.

Worker threads are daemons: stopping the server waits a few seconds for a build, then leaves it (re-queued at the
next start).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tmem.construct.policy import BuildPolicy, holder_is_dead, lease_holder
from tmem.errors import BuildBusy, IntegrityError, StoreError, TmemError, public_message
from tmem.memory import Memory
from tmem.store.control import ControlStore, Job, tenant_scope

log = logging.getLogger("tmem.service")

HEARTBEAT_SECONDS = 10.0
STALE_SECONDS = 120.0  # twelve missed heartbeats: the owner stopped (or is partitioned from the database)
RECOVER_SECONDS = 60.0
MAX_BACKOFF_SECONDS = 30.0  # the longest wait of a worker between tries while the database is locked or down
MAX_STORE_RETRIES = 5  # a build that fails on a transient store error is re-queued this many times, then failed


def orphaned(owner: str | None, heartbeat_at: float | None, *, at: float | None = None) -> bool:
    """True when a running job's server has stopped: no owner recorded (claimed before owners existed), an owner
    that is a dead process of this host, or a heartbeat older than STALE_SECONDS."""
    if owner is None or heartbeat_at is None or holder_is_dead(owner):
        return True
    return (time.time() if at is None else at) - heartbeat_at > STALE_SECONDS


HEARTBEAT_THREAD = "tmem-build-heartbeat"


@dataclass(frozen=True)
class WorkerHealth:
    workers: int  # worker threads started
    alive: int  # of them, still running (a worker survives store errors; fewer means a bug stopped one)
    retrying: int  # of them, waiting out store errors in a row
    last_error: str | None  # the kind of the last store or unexpected error a worker met (its text is logged)
    build_error: str | None = None  # the kind of store error the last build met (re-queued); None once one succeeds
    requeued_builds: int = 0  # builds re-queued after a transient store error, since the server started
    heartbeat_error: str | None = None  # the kind of error the last heartbeat met; None while heartbeats succeed


class BuildWorkers:
    def __init__(
        self,
        control: ControlStore,
        open_memory: Callable[[], Memory],
        *,
        workers: int = 1,
        poll_seconds: float = 1.0,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
        recover_seconds: float = RECOVER_SECONDS,
    ) -> None:
        self.owner = lease_holder()  # this server process, as recorded on the jobs it claims
        self._control = control
        self._open_memory = open_memory
        self._count = workers
        self._poll = poll_seconds
        self._beat = heartbeat_seconds
        self._recover_every = recover_seconds
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._arrivals: dict[tuple[str, str], float] = {}  # (tenant, space) -> monotonic time of the last message
        self._arrivals_lock = threading.Lock()
        self._failures: dict[int, int] = {}  # worker number -> store errors in a row (0: working)
        self.last_error: str | None = None
        self._build_error: str | None = None
        self._heartbeat_error: str | None = None
        self._requeued = 0
        self._store_retries: dict[str, int] = {}  # job id -> re-queues after a transient store error, by this server

    def recover(self) -> tuple[int, int]:
        """Re-queue (or fail, after MAX_ATTEMPTS) the running jobs of servers that stopped; returns the counts."""
        requeued, failed = self._control.recover(orphaned)
        if requeued or failed:
            log.warning("Jobs left running by a stopped server: %d re-queued, %d failed", requeued, failed)
            self._wake.set()
        return requeued, failed

    def start(self) -> None:
        if self._count <= 0:
            return
        for n in range(self._count):
            thread = threading.Thread(target=self._loop, args=(n,), name=f"tmem-build-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)
        beat = threading.Thread(target=self._heartbeat_loop, name=HEARTBEAT_THREAD, daemon=True)
        beat.start()
        self._threads.append(beat)

    def _heartbeat_loop(self) -> None:
        last_recovery = time.monotonic()
        while not self._stop.wait(self._beat):
            try:
                self._control.heartbeat(self.owner, time.time())
                self._heartbeat_error = None
                if time.monotonic() - last_recovery >= self._recover_every:
                    last_recovery = time.monotonic()
                    self.recover()
            except TmemError as exc:  # the database is unreachable for a while: say so, keep beating
                self._heartbeat_error = self.last_error = type(exc).__name__
                log.warning("Build heartbeat failed: %s", exc)

    def wake(self) -> None:
        self._wake.set()

    def note_arrival(self, tenant: str, space: str) -> None:
        """Messages were stored in the space: arm the build policy for it."""
        with self._arrivals_lock:
            self._arrivals[(tenant, space)] = time.monotonic()
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the workers to stop after their current build; wait at most ``timeout`` seconds for them."""
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout)

    def _loop(self, n: int) -> None:
        """Claim and run jobs until stopped. A store error (a locked or unreachable database) never ends the loop:
        the worker records it, waits (doubling from the poll interval up to MAX_BACKOFF_SECONDS) and tries again."""
        memory: Memory | None = None
        try:
            while not self._stop.is_set():
                try:
                    if memory is None:
                        memory = self._open_memory()
                    if n == 0:
                        self._apply_policy(memory)
                    job = self._control.claim_job(self.owner, time.time())
                    self._failures[n] = 0  # the database answered
                    ran = job is not None and self.run(memory, job)
                except TmemError as exc:
                    self._backoff(n, exc)
                    continue
                except Exception as exc:  # a bug: log it with its traceback, and keep the worker alive
                    log.exception("Build worker %d failed unexpectedly", n)
                    self._backoff(n, exc)
                    continue
                if not ran:
                    self._wake.wait(self._poll)
                    self._wake.clear()
                    continue
                self._wake.set()  # another worker may now take a job of this space
        finally:
            if memory is not None:
                memory.close()

    def _backoff(self, n: int, exc: Exception) -> None:
        self._failures[n] = self._failures.get(n, 0) + 1
        self.last_error = type(exc).__name__  # the kind only: /healthz is public, the log has the message
        delay = min(self._poll * 2 ** min(self._failures[n], 10), MAX_BACKOFF_SECONDS)
        log.warning("Build worker %d: %s: %s; retrying in %.1f s", n, type(exc).__name__, exc, delay)
        self._stop.wait(delay)

    def _persist(self, action: Callable[[], object]) -> None:
        """Record a job's end in the control store, retrying store errors with backoff until it is written (or the
        server stops: the job is then still running under this owner and is recovered at the next start)."""
        failures = 0
        while True:
            try:
                action()
                return
            except TmemError as exc:
                failures += 1
                self.last_error = type(exc).__name__
                log.warning("Recording a build job's end failed (%s); retrying", exc)
                if self._stop.wait(min(self._poll * 2**failures, MAX_BACKOFF_SECONDS)):
                    raise

    def health(self) -> WorkerHealth:
        """Worker liveness for /healthz: threads expected and alive, workers retrying store errors, the last error."""
        workers = [t for t in self._threads if t.name != HEARTBEAT_THREAD]
        return WorkerHealth(
            workers=len(workers),
            alive=sum(t.is_alive() for t in workers),
            retrying=sum(1 for count in self._failures.values() if count),
            last_error=self.last_error,
            build_error=self._build_error,
            requeued_builds=self._requeued,
            heartbeat_error=self._heartbeat_error,
        )

    def _apply_policy(self, memory: Memory) -> None:
        with self._arrivals_lock:
            pending = dict(self._arrivals)
        if not pending:
            return
        settings = memory.settings
        policy = BuildPolicy(after_turns=settings.build_after_turns, idle_seconds=settings.build_idle_seconds)
        now = time.monotonic()
        for (tenant, space), arrived in pending.items():
            try:
                stale = memory.staleness(tenant_scope(tenant, space)).stale_turns
            except TmemError:  # the space was deleted meanwhile
                stale = 0
            if stale and not policy.due(stale, now - arrived):
                continue
            with self._arrivals_lock:
                if self._arrivals.get((tenant, space)) == arrived:
                    del self._arrivals[(tenant, space)]
            if stale and not any(j.state in ("queued", "running") for j in self._control.jobs(tenant, space)):
                self._control.create_job(tenant, space, {"rebuild": False, "auto": True})

    def run(self, memory: Memory, job: Job) -> bool:
        """Run one claimed job to its end state; False when it went back to the queue (the space's lease is held)."""
        try:
            report = memory.build(tenant_scope(job.tenant, job.space), rebuild=bool(job.params.get("rebuild")))
        except BuildBusy:
            self._persist(lambda: self._control.requeue(job.id, "waiting: another build of this space holds its lease"))
            return False
        except TmemError as exc:
            if isinstance(exc, StoreError) and not isinstance(exc, IntegrityError) and self._retry_later(job, exc):
                return False
            if isinstance(exc, StoreError):
                log.error("Build job %s: %s", job.id, exc)
            # The job's tenant reads it: rendered from the error's fields for that tenant, no connection parameters.
            error = f"{type(exc).__name__}: {public_message(exc, job.tenant)}"
            self._persist(lambda: self._control.finish_job(job.id, "failed", error=error))
            return True
        except Exception as exc:  # a worker must survive any build failure and record it
            log.exception("Build job %s failed unexpectedly", job.id)
            error = f"Unexpected {type(exc).__name__}. This is a bug; the server's log has its cause."
            self._persist(lambda: self._control.finish_job(job.id, "failed", error=error))
            return True
        self._build_error = None
        self._store_retries.pop(job.id, None)
        result = report.model_dump(mode="json")
        result["space"] = job.space
        self._persist(lambda: self._control.finish_job(job.id, "succeeded", result=result))
        return True

    def _retry_later(self, job: Job, exc: StoreError) -> bool:
        """A build that failed on a transient store error (a locked or unreachable database) goes back to the queue,
        and this worker waits (doubling up to MAX_BACKOFF_SECONDS) before it claims again; after MAX_STORE_RETRIES
        re-queues of one job the next such error fails it. False: fail it now. /healthz says what failed meanwhile
        (``build_error``: the kind only; the log has the text)."""
        tries = self._store_retries.get(job.id, 0) + 1
        self._build_error = self.last_error = type(exc).__name__
        if tries > MAX_STORE_RETRIES:
            self._store_retries.pop(job.id, None)
            return False
        self._store_retries[job.id] = tries
        self._requeued += 1
        delay = min(self._poll * 2**tries, MAX_BACKOFF_SECONDS)
        log.warning("Build job %s met %s (%s); re-queued, retry %d of %d", job.id, self._build_error, exc, tries,
                    MAX_STORE_RETRIES)  # fmt: skip
        note = f"re-queued: the store failed ({self._build_error}); retry {tries} of {MAX_STORE_RETRIES}"
        self._persist(lambda: self._control.requeue(job.id, note))
        self._stop.wait(delay)
        return True
