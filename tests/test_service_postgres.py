"""The HTTP service on PostgreSQL, end to end through real transports: `tmem keys create` and `tmem serve` as a user
runs them with TMEM_DATABASE_URL (a separate process), a second API worker (uvicorn in this process) on the same
database, httpx clients. A job started through one worker is seen by the other; jobs and keys survive a restart."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.support.live_server import LiveServer, wait_healthy
from tests.test_service import NO_AUTO_BUILD, auth, dev_messages, wait_job
from tmem.service import create_app
from tmem.settings import Settings

SRC = Path(__file__).resolve().parents[1] / "src"
TMEM = [sys.executable, "-c", "from tmem.cli.main import main; main()"]
pytestmark = pytest.mark.postgres


def _tmem(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TMEM, *args], env=env, capture_output=True, text=True)


def pg_env(pg_url: str, home: Path, **extra: str) -> dict[str, str]:
    """The environment of a `tmem` command (this tree's src/) on the PostgreSQL database ``pg_url``: hash
    embeddings, no LLM, no automatic builds; ``extra`` adds or replaces variables."""
    return {
        **os.environ,
        "PYTHONPATH": str(SRC),
        "TMEM_DATABASE_URL": pg_url,
        "TMEM_EMBED_BACKEND": "hash",
        "TMEM_LLM": "none",
        "TMEM_BUILD_AFTER_TURNS": str(NO_AUTO_BUILD["build_after_turns"]),
        "TMEM_BUILD_IDLE_SECONDS": str(NO_AUTO_BUILD["build_idle_seconds"]),
        "TMEM_HOME": str(home),
        **extra,
    }


@pytest.fixture
def cli_env(pg_url: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of `tmem` commands run on the PostgreSQL database."""
    env = pg_env(pg_url, tmp_path / "unused")
    yield env
    assert not (tmp_path / "unused").exists()  # with a database URL nothing is written to the home directory


@contextmanager
def tmem_serve(env: dict[str, str]) -> Iterator[str]:
    """`tmem serve --port P` in its own process; yields its URL, stops it at the end."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [*TMEM, "serve", "--port", str(port), "--log-level", "warning"],
        env=env,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, server)
        yield url
    finally:
        server.terminate()
        assert server.wait(30) is not None
        assert server.stderr is not None
        server.stderr.close()


def test_service_on_postgres_two_workers_share_keys_and_jobs(cli_env: dict[str, str], pg_url: str) -> None:
    created = _tmem(cli_env, "keys", "create", "acme")
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip().splitlines()[-1]
    settings = Settings(database_url=pg_url, llm="none", embed_backend="hash", **NO_AUTO_BUILD)  # type: ignore[arg-type]
    sessions = dev_messages(2)
    with (
        tmem_serve(cli_env) as url,
        LiveServer(create_app(settings)) as second,
        httpx.Client(base_url=url, headers=auth(key), timeout=60) as one,
        httpx.Client(base_url=second.url, headers=auth(key), timeout=60) as two,
    ):
        for messages in sessions:
            r = one.post("/v1/spaces/caroline/messages", json={"messages": messages})
            assert r.status_code == 200, r.text
        assert [s["name"] for s in two.get("/v1/spaces").json()["spaces"]] == ["caroline"]  # the key works on both
        job = one.post("/v1/spaces/caroline/build").json()["job"]
        done = wait_job(two, job)  # the job started through one worker, watched through the other
        assert done["state"] == "succeeded", done
        assert done["result"]["counts"]["scenes"] > 0 and done["space"] == "caroline"
        for client in (one, two):
            hits = client.post("/v1/spaces/caroline/search", json={"q": "LGBTQ support group", "explain": True})
            assert hits.status_code == 200, hits.text
            body = hits.json()
            assert body["scenes"] and all(h["routes"] for h in body["scenes"])
            assert "support group" in " ".join(t["text"] for h in body["scenes"] for t in h["turns"])
        ctx = two.get("/v1/spaces/caroline/context", params={"q": "LGBTQ support group", "max_tokens": 150}).json()
        assert 0 < ctx["tokens"] <= 150 and "support group" in ctx["text"]

    # Both workers stopped; a restarted `tmem serve` still has the key, the job and the built memory.
    with tmem_serve(cli_env) as url, httpx.Client(base_url=url, headers=auth(key), timeout=60) as again:
        listed = again.get("/v1/spaces/caroline/jobs").json()
        assert [j["id"] for j in listed] == [job] and listed[0]["state"] == "succeeded"
        assert again.post("/v1/spaces/caroline/search", json={"q": "support group"}).status_code == 200
