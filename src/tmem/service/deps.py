"""What every route shares: the service state, the bearer-key tenant, the space check and the 4xx helpers."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import ValidationError

from tmem.errors import InputError
from tmem.memory import AsyncMemory
from tmem.retrieve.config import RetrievalConfig
from tmem.scope import Scope
from tmem.service.problems import ServiceProblem
from tmem.service.schemas import ID_PATTERN
from tmem.service.worker import BuildWorkers
from tmem.settings import Settings
from tmem.store.control import NAME_PATTERN, ControlStore, tenant_scope
from tmem.util.aio import blocking


@dataclass
class ServiceState:
    settings: Settings
    memory: AsyncMemory
    control: ControlStore
    workers: BuildWorkers


SpaceName = Annotated[
    str, Path(pattern=NAME_PATTERN, max_length=64, description="The space (letters, digits, '.', '_', '-').")
]
ItemId = Annotated[str, Path(pattern=ID_PATTERN, max_length=200, description="An item id (from search or export).")]
_bearer = HTTPBearer(auto_error=False, description="An API key from `tmem keys create TENANT`.")


def _state(request: Request) -> ServiceState:
    state: ServiceState = request.app.state.tmem
    return state


def _tenant(request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> str:
    challenge = {"WWW-Authenticate": "Bearer"}
    if credentials is None:
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


async def require_space(state: ServiceState, tenant: str, space: str) -> Scope:
    """The scope of the tenant's existing space, else a 404 that looks the same for any missing space."""
    scope = tenant_scope(tenant, space)
    if not await blocking(state.memory.core.store.has_space, scope):
        raise ServiceProblem(404, "not-found", f"No space {space!r} for this key; GET /v1/spaces lists yours.")
    return scope


MAX_REQUEST_COUNT = 1_000  # the largest count (kT, kS, kI, R, depth, k0, ...) a request may ask for
OPERATOR_ONLY = frozenset({"reranker"})  # which model a server loads is the operator's setting, never a request's


def retrieval_config(value: str | dict[str, Any] | None) -> RetrievalConfig | str | None:
    """A preset name passes through; a dict of RetrievalConfig fields is validated here (422 naming the field).

    Request-side settings are bounded: no field naming a model or path (the operator's TMEM_RERANKER_MODEL applies),
    every count at most MAX_REQUEST_COUNT, every score threshold a finite number in [-1, 1]."""
    if not isinstance(value, dict):
        return value
    chosen = sorted(OPERATOR_ONLY & set(value))
    if chosen:
        raise InputError(
            f"Invalid retrieval config field {chosen[0]}: which model the server loads is the operator's setting "
            "(TMEM_RERANKER_MODEL), not a request's; leave it out."
        )
    try:
        cfg = RetrievalConfig.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "config"
        raise InputError(f"Invalid retrieval config field {where}: {first['msg']} (see docs/retrieval.md).") from exc
    for name, field in type(cfg).model_fields.items():
        got = getattr(cfg, name)
        shown_name = field.alias or name
        if isinstance(got, int) and not isinstance(got, bool) and got > MAX_REQUEST_COUNT:
            raise InputError(
                f"Invalid retrieval config field {shown_name}: {got} is over this server's limit of "
                f"{MAX_REQUEST_COUNT}; ask for fewer."
            )
        if isinstance(got, float) and not (math.isfinite(got) and -1.0 <= got <= 1.0):
            raise InputError(
                f"Invalid retrieval config field {shown_name}: {got!r} is not a finite number between -1 and 1."
            )
    return cfg  # the operator's reranker is added by MemoryCore.resolve_config, as for every config
