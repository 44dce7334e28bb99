"""A real uvicorn server on 127.0.0.1 with an ephemeral port, in a thread (service and MCP tests)."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from types import TracebackType
from typing import Any

import httpx
import uvicorn


def wait_healthy(url: str, server: subprocess.Popen[Any], timeout: float = 60) -> None:
    """Wait until a ``tmem serve`` subprocess answers ``/healthz``; fail if it exits or takes over ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            httpx.get(url + "/healthz", timeout=5)
            return
        except httpx.TransportError:
            assert server.poll() is None and time.monotonic() < deadline, "tmem serve did not start"
            time.sleep(0.2)


class LiveServer:
    def __init__(self, app: Any) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    def __enter__(self) -> LiveServer:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("The test server did not start")
            time.sleep(0.02)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.should_exit = True
        self._thread.join(30)
        self._sock.close()
