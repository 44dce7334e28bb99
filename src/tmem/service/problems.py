"""Errors as RFC 9457 problem details: tmem's exception tree, request validation and HTTP errors all answer
``application/problem+json`` with a ``detail`` that says what to fix. Nothing reaches the client as a bare 500."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from tmem.errors import (
    TmemError,
    public_message,
)
from tmem.service.schemas import Problem
from tmem.util.invalid import field_errors, summary

log = logging.getLogger("tmem.service")

PROBLEM_JSON = "application/problem+json"
_TYPE = "urn:tmem:problem:"

_TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Content",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


class ServiceProblem(Exception):
    """An error the service raises itself (auth, conflicts), answered as a problem with this status."""

    def __init__(self, status: int, kind: str, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.kind = kind
        self.detail = detail
        self.headers = headers


def problem(
    request: Request,
    status: int,
    kind: str,
    detail: str,
    *,
    errors: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = Problem(
        type=f"{_TYPE}{kind}" if kind != "about:blank" else kind,
        title=_TITLES.get(status, "Error"),
        status=status,
        detail=detail,
        instance=request.url.path,
        errors=errors,
    )
    return JSONResponse(
        body.model_dump(exclude_none=True), status_code=status, media_type=PROBLEM_JSON, headers=headers
    )


def install(app: FastAPI) -> None:
    """Register the handlers on ``app``."""

    @app.exception_handler(TmemError)
    async def _tmem_error(request: Request, exc: TmemError) -> JSONResponse:
        message = public_message(exc, getattr(request.state, "tenant", None))  # rendered from its fields
        status = exc.status  # the error class says how it is answered (tmem.errors.TmemError.status / problem)
        if status >= 500:
            log.error("%s on %s: %s", type(exc).__name__, request.url.path, exc)
        headers = {"Retry-After": "5"} if status == 503 else None
        return problem(request, status, exc.problem, message, headers=headers)

    @app.exception_handler(ServiceProblem)
    async def _service_problem(request: Request, exc: ServiceProblem) -> JSONResponse:
        return problem(request, exc.status, exc.kind, exc.detail, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        body = exc.body if isinstance(exc.body, str | bytes) else None  # a body that is not JSON: the text as sent
        errors = field_errors(exc.errors(), body)  # which places the fault by line and column
        return problem(
            request, 422, "invalid-request", f"Fix these fields of the request: {summary(errors)}.", errors=errors
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = str(exc.detail)
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"No endpoint {request.url.path}; GET /openapi.json lists the endpoints."
        elif exc.status_code == 413:
            detail = "The request body is too large for this server; send fewer or shorter messages per request."
        elif exc.status_code == 405:
            detail = f"{request.method} is not allowed on {request.url.path}; GET /openapi.json lists the methods."
        return problem(request, exc.status_code, "about:blank", detail, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("Unexpected error on %s", request.url.path)
        return problem(
            request,
            500,
            "internal",
            f"The server failed unexpectedly ({type(exc).__name__}); this is a bug in tmem: please report it with "
            "the server's log.",
        )
