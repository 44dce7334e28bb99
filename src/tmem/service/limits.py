"""Request limits: a body over ``max_bytes`` answers 413 (problem+json) before any handler reads it, and a JSON body
is read by the importer's rules (:mod:`tmem.ingest.limits`): a key twice in one object, NaN or Infinity, an integer
of more than 100 digits, nesting deeper than 64 levels or a lone surrogate is a 422 naming where it is, never a
silently chosen value."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tmem.errors import InputError
from tmem.ingest.limits import read_json, scan


class _BodyTooLarge(HTTPException):
    """Raised while a handler reads a streamed body; FastAPI passes HTTPExceptions through to the 413 handler."""

    def __init__(self) -> None:
        super().__init__(status_code=413)


class BodyLimit:
    """ASGI middleware: a declared Content-Length over the limit is refused at once; a streamed body is counted."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _reject(self, scope: Scope, send: Send) -> None:
        body = json.dumps(
            {
                "type": "urn:tmem:problem:too-large",
                "title": "Content Too Large",
                "status": 413,
                "detail": f"The request body is over {self.max_bytes} bytes; send fewer messages per request.",
                "instance": scope.get("path", ""),
            }
        ).encode()
        headers = [(b"content-type", b"application/problem+json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._reject(scope, send)
                return
        seen = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _BodyTooLarge:
            if started:
                raise
            await self._reject(scope, send)


class StrictJSONRequest(Request):
    """A request whose JSON body is parsed by the importer's rules (duplicate keys refused, not last-one-wins)."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            try:
                value = read_json(await self.body())
                scan(value, lambda path: "The request body at " + path.replace("$", "body", 1))
            except InputError as exc:
                raise HTTPException(status_code=422, detail=str(exc)) from exc
            self._json = value
        return self._json


class StrictJSONRoute(APIRoute):
    """The service's routes: request bodies read as :class:`StrictJSONRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(StrictJSONRequest(request.scope, request.receive))

        return strict
