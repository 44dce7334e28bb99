"""The HTTP service: FastAPI over one :class:`AsyncMemory` (the composition root) plus the control store (keys, jobs).

Every request carries ``Authorization: Bearer KEY``; the key's tenant T sees its space S as the store space ``T/S``,
so another tenant's space is unreachable and answers 404 exactly as a missing one. Builds run as persisted jobs in
:mod:`tmem.service.worker`. Recall and item routes live in :mod:`tmem.service.routes`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import FastAPI, Header, Path
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from tmem.errors import NotFoundError, TmemError
from tmem.ingest.messages import MAX_REQUEST_KEY, MessageInput, MessagesReport, with_request_ids
from tmem.memory import AsyncMemory, Memory, SpaceExport
from tmem.models import Erasure
from tmem.scope import Scope
from tmem.service import openapi, problems
from tmem.service.deps import ServiceState, SpaceName, State, Tenant, require_space
from tmem.service.limits import BodyLimit, StrictJSONRoute
from tmem.service.problems import ServiceProblem
from tmem.service.routes import register as register_routes
from tmem.service.schemas import (
    ID_PATTERN,
    BuildIn,
    Deleted,
    ErasureOut,
    JobOut,
    JobRef,
    MessagesIn,
    Problem,
    SpacesOut,
)
from tmem.service.worker import BuildWorkers
from tmem.settings import Settings
from tmem.store.control import Job, tenant_scope
from tmem.util.aio import blocking
from tmem.viewer import PREFIX as VIEWER_PREFIX
from tmem.viewer import JobView, ViewerScope
from tmem.viewer import create_router as viewer_router

log = logging.getLogger("tmem.service")

DEFAULT_MAX_BODY = 1 << 20  # 1 MiB

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": Problem, "content": {problems.PROBLEM_JSON: {}}, "description": desc}
    for code, desc in [
        (400, "Invalid configuration in the request"),
        (401, "Missing or invalid API key"),
        (404, "No such space, item or job for this key"),
        (409, "Conflicts with the space's state"),
        (413, "Request body too large"),
        (422, "Invalid request"),
    ]
}


def _age(stamp: str) -> float:
    """Seconds since an ISO 8601 bookkeeping time of the control store."""
    return max(0.0, (datetime.now(UTC) - datetime.fromisoformat(stamp)).total_seconds())


def _job_view(job: Job) -> dict[str, Any]:
    return job.model_dump(
        mode="json"
    )  # a job's error was rendered for its tenant when it was recorded (BuildWorkers.run)


def _erasure_out(entry: Erasure, tenant: str) -> ErasureOut:
    return ErasureOut(
        erasure=entry.seq,
        space=Scope.local(entry.space).space,  # the ledger records the store key of the tenant's space
        kind=entry.kind,
        erased=entry.erased,
        status="erased" if entry.erased else "erasure pending",
    )


def _viewer_scope(app: FastAPI, key: str | None) -> ViewerScope | None:
    """The memory viewer's scope for an API key (bearer header or the viewer's cookie): the key's tenant's spaces."""
    state: ServiceState | None = getattr(app.state, "tmem", None)
    if state is None or not key:
        return None
    tenant = state.control.authenticate(key)
    if tenant is None:
        return None

    def jobs(scope: Scope) -> list[JobView]:
        out = []
        for job in reversed(state.control.jobs(tenant, scope.space)):  # newest first
            data = _job_view(job)
            progress = data.get("progress") or {}
            fraction = progress.get("fraction")
            out.append(
                JobView(
                    id=job.id,
                    state=job.state,
                    stage=progress.get("stage"),
                    fraction=float(fraction) if isinstance(fraction, int | float) else None,
                    note=progress.get("note"),
                    created_at=job.created_at,
                    finished_at=job.finished_at,
                    error=data.get("error"),
                )
            )
        return out

    memory: Memory = app.state.viewer_memory
    return ViewerScope(memory, tenant=tenant, jobs=jobs)


def _operation_id(route: APIRoute) -> str:
    """Operation ids are the route functions' names (``add_messages``, ``search``, ``get_context``, ...): stable and
    readable for generated clients."""
    return route.name


def create_app(settings: Settings, *, workers: int = 1, max_body: int = DEFAULT_MAX_BODY) -> FastAPI:
    """The ASGI app serving the memory directory (or database) of ``settings``."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        memory = AsyncMemory.open(settings=settings)
        control = memory.core.control()
        pool = BuildWorkers(control, lambda: Memory.open(settings=settings), workers=workers)
        pool.recover()
        memory.core.start_upkeep(settings.upkeep_seconds)  # pending erasures finish without another request
        app.state.tmem = ServiceState(settings, memory, control, pool)
        app.state.viewer_memory = Memory.over(memory.core)  # the viewer at /ui reads the same core
        pool.start()
        try:
            yield
        finally:
            await blocking(pool.stop)
            control.close()
            await memory.aclose()

    app = FastAPI(
        title="tmem",
        version="1",
        summary="Long-term conversational memory for LLM agents (T-Mem), per tenant and space.",
        lifespan=lifespan,
        responses=_ERRORS,
        generate_unique_id_function=_operation_id,
        docs_url=None,  # Swagger UI and ReDoc load their assets from a CDN: blank offline, so they are off
        redoc_url=None,  # (docs/service.md); /openapi.json is the contract
    )
    app.router.route_class = StrictJSONRoute  # every /v1 route below reads JSON bodies by the importer's rules
    app.add_middleware(BodyLimit, max_bytes=max_body)
    problems.install(app)
    openapi.install(app)

    @app.get("/v1/spaces", response_model=SpacesOut, tags=["spaces"])
    async def list_spaces(tenant: Tenant, state: State) -> SpacesOut:
        return SpacesOut(spaces=await blocking(state.memory.core.tenant_spaces, tenant))

    @app.post("/v1/spaces/{space}/messages", response_model=MessagesReport, tags=["conversation"])
    async def add_messages(
        space: SpaceName,
        body: MessagesIn,
        tenant: Tenant,
        state: State,
        idempotency_key: Annotated[
            str | None,
            Header(
                max_length=MAX_REQUEST_KEY,
                pattern=ID_PATTERN,
                description="Resending a request under the same key stores its messages once: a message without "
                "an id gets the id KEY:N (N: its position in the request).",
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Append messages (the space is created by its first message). A message without ``time`` is dated when
        the server receives it. Idempotent by ``id`` (or by the ``Idempotency-Key`` header); a message without
        either is stored on every call, so that a client saying "ok" twice keeps both. The memory is built by a
        job: POST .../build, or automatically by the build policy (TMEM_BUILD_AFTER_TURNS /
        TMEM_BUILD_IDLE_SECONDS)."""
        scope = tenant_scope(tenant, space)
        received = datetime.now(UTC).replace(tzinfo=None)
        messages: list[MessageInput | dict[str, object]] = [m.model_dump(exclude_none=True) for m in body.messages]
        if idempotency_key is not None:
            messages = with_request_ids(messages, idempotency_key)
        report = await state.memory.add_messages(scope, messages, received_at=received)
        if report.added:
            state.workers.note_arrival(tenant, space)
        return report.model_dump(mode="json")

    @app.post("/v1/spaces/{space}/build", response_model=JobRef, status_code=202, tags=["jobs"])
    async def build_space(space: SpaceName, tenant: Tenant, state: State, body: BuildIn | None = None) -> JobRef:
        await require_space(state, tenant, space)
        job = await blocking(state.control.create_job, tenant, space, {"rebuild": bool(body and body.rebuild)})
        state.workers.wake()
        return JobRef(job=job.id)

    @app.get("/v1/spaces/{space}/jobs", response_model=list[JobOut], response_model_exclude_unset=True, tags=["jobs"])
    async def list_jobs(space: SpaceName, tenant: Tenant, state: State) -> list[dict[str, Any]]:
        """The space's build jobs, oldest first (those the build policy started too)."""
        await require_space(state, tenant, space)
        return [_job_view(j) for j in await blocking(state.control.jobs, tenant, space)]

    @app.get("/v1/jobs/{job_id}", response_model=JobOut, response_model_exclude_unset=True, tags=["jobs"])
    async def get_job(
        job_id: Annotated[str, Path(max_length=64, pattern=r"^[A-Za-z0-9_]+$")], tenant: Tenant, state: State
    ) -> dict[str, Any]:
        """A job's state (queued, running, succeeded, failed), progress, error or build report."""
        try:
            job: Job | None = await blocking(state.control.get_job, job_id)
        except NotFoundError:
            job = None
        if job is None or job.tenant != tenant:
            raise ServiceProblem(404, "not-found", f"No job {job_id!r} for this key.")
        return _job_view(job)

    @app.get("/v1/spaces/{space}/export", response_model=SpaceExport, tags=["spaces"])
    async def export_space(space: SpaceName, tenant: Tenant, state: State) -> dict[str, Any]:
        """Every record of the space (format tmem-space-export/1), a complete backup."""
        scope = await require_space(state, tenant, space)
        data = await state.memory.export(scope)
        return data.model_dump(mode="json")

    @app.delete("/v1/spaces/{space}", response_model=Deleted, tags=["spaces"])
    async def delete_space(space: SpaceName, tenant: Tenant, state: State) -> Deleted:
        """Delete the space and every trace of it. ``erased`` says whether the freed bytes are erased yet (see
        ``scope``); a pending erasure finishes by itself (GET /v1/erasures/{erasure} shows when)."""
        scope = await require_space(state, tenant, space)
        if await blocking(state.control.has_running, tenant, space):
            raise ServiceProblem(
                409, "build-running", f"A build of {space!r} is running; wait for its job to end, then delete."
            )
        failed = await blocking(
            state.control.fail_queued, tenant, space, "The space was deleted before this build started."
        )
        done = await state.memory.delete_space(scope)
        return Deleted(
            deleted=space,
            failed_jobs=failed,
            erasure=done.erasure,
            erased=done.erased,
            status="deleted" if done.erased else "deleted, erasure pending",
            scope=done.scope,
        )

    @app.get("/v1/erasures", response_model=list[ErasureOut], tags=["spaces"])
    async def list_erasures(tenant: Tenant, state: State, pending: bool = False) -> list[ErasureOut]:
        """This key's erasures (forgets and space deletions), oldest first; ``pending=true``: only unfinished ones."""
        return [_erasure_out(e, tenant) for e in await state.memory.erasures(tenant=tenant, pending=pending)]

    @app.get("/v1/erasures/{erasure}", response_model=ErasureOut, tags=["spaces"])
    async def get_erasure(erasure: Annotated[int, Path(ge=1)], tenant: Tenant, state: State) -> ErasureOut:
        """One erasure's state: erased, or pending (finished by the server once no open read holds its bytes)."""
        found = [e for e in await state.memory.erasures(tenant=tenant) if e.seq == erasure]
        if not found:
            raise ServiceProblem(404, "not-found", f"No erasure {erasure} for this key.")
        return _erasure_out(found[0], tenant)

    register_routes(app)
    app.include_router(viewer_router(lambda key: _viewer_scope(app, key), key_login=True), prefix=VIEWER_PREFIX)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> JSONResponse:
        """200 while every build worker thread runs (``status`` "ok", or "retrying" while workers wait out store
        errors), 503 when one has stopped; with the age in seconds of the oldest queued build job."""
        state: ServiceState = app.state.tmem
        health = state.workers.health()
        oldest_age: float | None = None
        database_error: str | None = None
        try:
            oldest = await blocking(state.control.oldest_queued)
            oldest_age = None if oldest is None else round(_age(oldest), 1)
        except TmemError as exc:  # the database is unreachable: say so (the workers retry meanwhile)
            database_error = type(exc).__name__  # the kind only: this route is public; the log has the text
            log.warning("Health check cannot read the job queue: %s", exc)
        down = health.alive < health.workers
        status = "down" if down else ("retrying" if health.retrying or database_error else "ok")
        body = {**dataclasses.asdict(health), "status": status, "oldest_queued_seconds": oldest_age}
        body["database_error"] = database_error
        return JSONResponse(body, status_code=503 if down else 200)

    return app
