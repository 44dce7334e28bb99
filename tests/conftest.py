"""Test-wide guards: live network calls are blocked (loopback stays open for the local stub servers)."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_real_connect = socket.socket.connect


def _is_loopback(address: Any) -> bool:
    if isinstance(address, tuple) and address:
        host = str(address[0])
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False
    return isinstance(address, (str, bytes))  # unix domain sockets are local


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if not _is_loopback(address):
        raise RuntimeError(f"Live network call blocked in tests: {address!r}. Use the scripted LLM or a local stub.")
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def _block_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setenv("TMEM_LEXICAL_DIR", str(tmp_path / "lexical"))  # saved BM25 indices: never the user's home
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "TMEM_LLM", "TMEM_LLM_MODEL", "TMEM_HOME"):
        monkeypatch.delenv(var, raising=False)
    yield


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """One PostgreSQL + pgvector server for the whole session (tests/support/pg.py); tests take fresh databases."""
    from tests.support.pg import pg_server as start

    with start() as server:
        yield server


@pytest.fixture
def pg_url(pg_server: Any) -> str:
    """The URL of an empty database on the session's PostgreSQL server."""
    url: str = pg_server.fresh_database()
    return url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    """A store URL for each backend: a SQLite file, and an empty PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'tmem.db'}"
    url: str = request.getfixturevalue("pg_url")
    return url
