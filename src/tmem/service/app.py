"""The HTTP service: FastAPI over one :class:`Memory` (the composition root) plus the control store (keys, jobs).

Every request carries ``Authorization: Bearer KEY``; the key's tenant T sees its space S as the store space ``T/S``,
so another tenant's space is unreachable and answers 404 exactly as a missing one. Handlers that do blocking work are
plain ``def`` (FastAPI runs them in its thread pool); builds run in :mod:`tmem.service.worker`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Path, Request, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from tmem.answer import QuestionTime
from tmem.errors import NotFoundError
from tmem.memory import Memory, SpaceExport
from tmem.retrieve.config import RetrievalConfig
from tmem.service import problems
from tmem.service.limits import BodyLimit
from tmem.service.problems import ServiceProblem
from tmem.service.schemas import (
    AskIn,
    BuildIn,
    Deleted,
    JobRef,
    MessagesIn,
    MessagesOut,
    Problem,
    SearchIn,
    SpacesOut,
)
from tmem.service.worker import BuildWorkers
from tmem.settings import Settings
from tmem.store.control import NAME_PATTERN, ControlStore, Job, open_control, store_space

log = logging.getLogger("tmem.service")

API_TITLE = "tmem"
DEFAULT_MAX_BODY = 1 << 20  # 1 MiB


@dataclass
class ServiceState:
    settings: Settings
    memory: Memory
    control: ControlStore
    workers: BuildWorkers


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

SpaceName = Annotated[
    str, Path(pattern=NAME_PATTERN, max_length=64, description="The space (letters, digits, '.', '_', '-').")
]
_bearer = HTTPBearer(auto_error=False, description="An API key from `tmem keys create TENANT`.")


def _state(request: Request) -> ServiceState:
    state: ServiceState = request.app.state.tmem
    return state


def _tenant(request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> str:
    challenge = {"WWW-Authenticate": "Bearer"}
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise ServiceProblem(
            401,
            "unauthorized",
            "Send 'Authorization: Bearer KEY' (create a key with `tmem keys create TENANT`).",
            challenge,
        )
    tenant = _state(request).control.authenticate(credentials.credentials)
    if tenant is None:
        raise ServiceProblem(401, "unauthorized", "The API key is unknown or revoked; ask for a new one.", challenge)
    request.state.tenant = tenant
    return tenant


Tenant = Annotated[str, Depends(_tenant)]
State = Annotated[ServiceState, Depends(_state)]


def require_space(state: ServiceState, tenant: str, space: str) -> str:
    """The store key of the tenant's existing space, else a 404 that looks the same for any missing space."""
    key = store_space(tenant, space)
    if not state.memory.store.has_space(key):
        raise ServiceProblem(404, "not-found", f"No space {space!r} for this key; GET /v1/spaces lists yours.")
    return key


def retrieval_config(value: str | dict[str, Any] | None) -> RetrievalConfig | str | None:
    if isinstance(value, dict):
        from pydantic import ValidationError

        from tmem.errors import ConfigError

        try:
            return RetrievalConfig.model_validate(value)
        except ValidationError as exc:
            raise ConfigError(
                f"Invalid retrieval config: {exc.errors()[0]['msg']} at {exc.errors()[0]['loc']}; see "
                "docs/retrieval.md for the fields."
            ) from exc
    return value


def _job_view(job: Job) -> dict[str, Any]:
    data = job.model_dump(mode="json")
    if data.get("error"):
        data["error"] = str(data["error"]).replace(f"{job.tenant}/", "")
    return data


def create_app(
    settings: Settings,
    *,
    workers: int = 1,
    max_body: int = DEFAULT_MAX_BODY,
    open_memory: Callable[[], Memory] | None = None,
) -> FastAPI:
    """The ASGI app serving the memory directory of ``settings``. ``open_memory`` opens one Memory (the API's, and one
    per build worker); by default ``Memory.open(settings=settings)``."""
    opener = open_memory or (lambda: Memory.open(settings=settings))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        memory = opener()
        control = open_control(memory.store)
        requeued, failed = control.recover()
        if requeued or failed:
            log.warning("Jobs left running by a stopped server: %d re-queued, %d failed", requeued, failed)
        pool = BuildWorkers(control, opener, workers=workers)
        app.state.tmem = ServiceState(settings, memory, control, pool)
        pool.start()
        try:
            yield
        finally:
            pool.stop()
            control.close()
            memory.close()

    app = FastAPI(
        title=API_TITLE,
        version="1",
        summary="Long-term conversational memory for LLM agents (T-Mem), per tenant and space.",
        lifespan=lifespan,
        responses=_ERRORS,
    )
    app.add_middleware(BodyLimit, max_bytes=max_body)
    problems.install(app)

    @app.get("/v1/spaces", response_model=SpacesOut, tags=["spaces"])
    def list_spaces(tenant: Tenant, state: State) -> SpacesOut:
        prefix = f"{tenant}/"
        mine = [s for s in state.memory.spaces() if s.name.startswith(prefix)]
        return SpacesOut(spaces=[s.model_copy(update={"name": s.name[len(prefix) :]}) for s in mine])

    @app.post("/v1/spaces/{space}/messages", response_model=MessagesOut, tags=["conversation"])
    def add_messages(space: SpaceName, body: MessagesIn, tenant: Tenant, state: State) -> MessagesOut:
        from tmem.service.messages import add_messages as add

        return add(state.memory, store_space(tenant, space), space, body)

    @app.post("/v1/spaces/{space}/build", response_model=JobRef, status_code=202, tags=["jobs"])
    def build(space: SpaceName, tenant: Tenant, state: State, body: BuildIn | None = None) -> JobRef:
        require_space(state, tenant, space)
        job = state.control.create_job(tenant, space, {"rebuild": bool(body and body.rebuild)})
        state.workers.wake()
        return JobRef(job=job.id)

    @app.get("/v1/jobs/{job_id}", tags=["jobs"])
    def get_job(
        job_id: Annotated[str, Path(max_length=64, pattern=r"^[A-Za-z0-9_]+$")], tenant: Tenant, state: State
    ) -> dict[str, Any]:
        try:
            job = state.control.get_job(job_id)
        except NotFoundError:
            job = None
        if job is None or job.tenant != tenant:
            raise ServiceProblem(404, "not-found", f"No job {job_id!r} for this key.")
        return _job_view(job)

    @app.post("/v1/spaces/{space}/search", tags=["recall"])
    def search(space: SpaceName, body: SearchIn, tenant: Tenant, state: State) -> dict[str, Any]:
        key = require_space(state, tenant, space)
        cfg = retrieval_config(body.config)
        try:
            result = state.memory.search(key, body.q, cfg)
        except NotFoundError as exc:  # the space exists (checked above): what is missing is its memory
            raise ServiceProblem(409, "not-built", f"{exc} Over HTTP: POST /v1/spaces/{space}/build.") from exc
        data = result.model_dump(mode="json")
        data["space"] = space
        if not body.explain:
            for hit in data["scenes"] + data["items"]:
                hit["routes"] = []
        return data

    @app.post("/v1/spaces/{space}/ask", tags=["recall"])
    def ask(space: SpaceName, body: AskIn, tenant: Tenant, state: State) -> dict[str, Any]:
        key = require_space(state, tenant, space)
        if state.settings.llm == "none":
            raise ServiceProblem(
                409,
                "llm-not-configured",
                "This server runs without an LLM (extractive mode), and answering needs one: start it with "
                "TMEM_LLM=openai, TMEM_LLM_MODEL and OPENAI_BASE_URL, or use /search instead.",
            )
        cfg = retrieval_config(body.config)
        when = QuestionTime(at=body.at, relation="at") if body.at is not None else None
        answer = state.memory.ask(
            key,
            body.question,
            when,
            variant=body.variant,
            config=RetrievalConfig.preset(cfg) if isinstance(cfg, str) else cfg,
        )
        data = answer.model_dump(mode="json")
        data["space"] = space
        data["search"]["space"] = space
        return data

    @app.get("/v1/spaces/{space}/export", response_model=SpaceExport, tags=["spaces"])
    def export(space: SpaceName, tenant: Tenant, state: State) -> SpaceExport:
        key = require_space(state, tenant, space)
        data = state.memory.export(key)
        return data.model_copy(update={"space": data.space.model_copy(update={"name": space})})

    @app.delete("/v1/spaces/{space}", response_model=Deleted, tags=["spaces"])
    def delete_space(space: SpaceName, tenant: Tenant, state: State) -> Deleted:
        key = require_space(state, tenant, space)
        if state.control.has_running(tenant, space):
            raise ServiceProblem(
                409, "build-running", f"A build of {space!r} is running; wait for its job to end, then delete."
            )
        failed = state.control.fail_queued(tenant, space, "The space was deleted before this build started.")
        state.memory.delete_space(key)
        return Deleted(deleted=space, failed_jobs=failed)

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> Response:
        return Response("ok", media_type="text/plain")

    return app
