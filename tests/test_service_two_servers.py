"""Two `tmem serve` processes on one PostgreSQL (issue 23, part 2), each with its own home and saved-index folder, as
two machines behind a load balancer would run them:

- a key created once (`tmem keys create`) works on both;
- a build job posted to one runs once, and its result is in the other's search at the first search after it ends;
- a `forget` through A is never returned again by B, and once B's erasure check has run (B serves no request
  meanwhile) no file under B's folder holds the forgotten canary;
- `kill -9` of A while it runs a build job: B, started afterwards, re-queues and finishes the job;
- 16 clients of two tenants spread over both servers for a bounded time: no error and no answer naming the other
  tenant's text.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.canary import files_holding
from tests.support.live_server import wait_healthy
from tests.test_service import auth, dev_messages, wait_job
from tests.test_service_postgres import TMEM, pg_env

CANARY = "QWOPCANARY9921"
pytestmark = pytest.mark.postgres


def _env(pg_url: str, home: Path) -> dict[str, str]:
    return pg_env(pg_url, home, TMEM_LEXICAL_DIR=str(home / "lexical"), TMEM_UPKEEP_SECONDS="0.5")


@contextmanager
def _serve(env: dict[str, str]) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [*TMEM, "serve", "--port", str(port), "--log-level", "warning"], env=env, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, server)
        yield url, server
    finally:
        if server.poll() is None:
            server.terminate()
        server.wait(30)


def _key(env: dict[str, str], tenant: str) -> str:
    created = subprocess.run([*TMEM, "keys", "create", tenant], env=env, capture_output=True, text=True)
    assert created.returncode == 0, created.stderr
    return created.stdout.strip().splitlines()[-1]


def _post_all(client: httpx.Client, space: str, sessions: list[list[dict[str, Any]]]) -> None:
    for messages in sessions:
        r = client.post(f"/v1/spaces/{space}/messages", json={"messages": messages})
        assert r.status_code == 200, r.text


def _storm(urls: list[str], keys: dict[str, str], seconds: float) -> tuple[int, list[str]]:
    """16 clients (8 per tenant, alternating servers) searching and fetching contexts for ``seconds``."""
    errors: list[str] = []
    done = [0]
    lock = threading.Lock()
    stop = time.monotonic() + seconds
    other = {"acme": "beta", "beta": "acme"}

    def client(n: int) -> None:
        tenant = "acme" if n % 2 == 0 else "beta"
        with httpx.Client(base_url=urls[(n // 2) % 2], headers=auth(keys[tenant]), timeout=60) as c:
            for round_ in range(10_000):  # bounded: the clock ends it far earlier
                if time.monotonic() > stop:
                    return
                if round_ % 2:
                    r = c.get("/v1/spaces/talk/context", params={"q": "what did they do", "max_tokens": 300})
                else:
                    r = c.post("/v1/spaces/talk/search", json={"q": "support group painting"})
                with lock:
                    done[0] += 1
                    if r.status_code != 200:
                        errors.append(f"{tenant} {r.status_code} {r.text[:200]}")
                    elif f"MARK-{other[tenant]}" in r.text:
                        errors.append(f"{tenant} got {other[tenant]}'s text")

    threads = [threading.Thread(target=client, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 120)
    return done[0], errors


def test_two_servers_on_one_postgres(pg_url: str, tmp_path: Path) -> None:
    env_a, env_b = _env(pg_url, tmp_path / "a"), _env(pg_url, tmp_path / "b")
    keys = {"acme": _key(env_a, "acme"), "beta": _key(env_b, "beta")}
    secret = [
        [{"speaker": "Ana", "text": f"My locker code is {CANARY}.", "id": "canary-1", "time": "2024-01-01T10:00"}]
    ]
    with _serve(env_a) as (url_a, _), _serve(env_b) as (url_b, _):
        with (
            httpx.Client(base_url=url_a, headers=auth(keys["acme"]), timeout=60) as a,
            httpx.Client(base_url=url_b, headers=auth(keys["acme"]), timeout=60) as b,
        ):
            # A key created once works on both servers.
            assert a.get("/v1/spaces").status_code == 200 and b.get("/v1/spaces").status_code == 200
            _post_all(a, "talk", [*secret, *dev_messages(2)])
            job = a.post("/v1/spaces/talk/build").json()["job"]
            finished = wait_job(b, job)
            assert finished["state"] == "succeeded" and finished["attempts"] == 1, finished  # claimed once
            assert [j["id"] for j in b.get("/v1/spaces/talk/jobs").json()] == [job]
            found = b.post("/v1/spaces/talk/search", json={"q": "locker code"})
            assert found.status_code == 200 and CANARY in found.text  # A's build, in B's first search after it
            assert files_holding(tmp_path / "b", CANARY)  # B saved BM25 indices holding the canary's word

            forgot = a.post("/v1/spaces/talk/forget", json={"turn_ids": ["canary-1"]}).json()
            assert forgot["erased"] is True, forgot
            deadline = time.monotonic() + 30
            while files_holding(tmp_path / "b", CANARY) and time.monotonic() < deadline:
                time.sleep(0.2)  # no request to B: its upkeep sees the erasure ledger
            assert files_holding(tmp_path / "b", CANARY) == []
            for query in ("locker code", CANARY):
                again = b.post("/v1/spaces/talk/search", json={"q": query})
                answer = {k: v for k, v in again.json().items() if k != "query"}  # the query echoes what was asked
                assert again.status_code == 200 and CANARY not in json.dumps(answer)
            assert files_holding(tmp_path / "a", CANARY) == [] and files_holding(tmp_path / "b", CANARY) == []

        # 16 clients of two tenants over both servers.
        with httpx.Client(base_url=url_b, headers=auth(keys["beta"]), timeout=60) as beta:
            marked = [
                [{**m, "text": f"{m['text']} MARK-beta", "id": f"b-{m['id']}"} for m in s] for s in dev_messages(2, 1)
            ]
            _post_all(beta, "talk", marked)
            assert wait_job(beta, beta.post("/v1/spaces/talk/build").json()["job"])["state"] == "succeeded"
        with httpx.Client(base_url=url_a, headers=auth(keys["acme"]), timeout=60) as a:
            _post_all(a, "talk", [[{"speaker": "Ana", "text": "MARK-acme noted", "id": "m-acme"}]])
            assert wait_job(a, a.post("/v1/spaces/talk/build").json()["job"])["state"] == "succeeded"
        requests, errors = _storm([url_a, url_b], keys, seconds=8)
        assert errors == [] and requests >= 16

    # kill -9 of A during a build job: B (started afterwards, on the same database) finishes it.
    with _serve(env_a) as (url_a, server_a), httpx.Client(base_url=url_a, headers=auth(keys["acme"])) as a:
        _post_all(a, "long", dev_messages(19))
        job = a.post("/v1/spaces/long/build").json()["job"]
        deadline = time.monotonic() + 60
        while a.get(f"/v1/jobs/{job}").json()["state"] == "queued" and time.monotonic() < deadline:
            time.sleep(0.02)
        state = a.get(f"/v1/jobs/{job}").json()["state"]
        os.kill(server_a.pid, signal.SIGKILL)
        assert state == "running"
    with _serve(env_b) as (url_b, _), httpx.Client(base_url=url_b, headers=auth(keys["acme"])) as b:
        finished = wait_job(b, job, timeout=180)
        assert finished["state"] == "succeeded" and finished["attempts"] == 2, finished
        assert b.post("/v1/spaces/long/search", json={"q": "support group"}).status_code == 200
