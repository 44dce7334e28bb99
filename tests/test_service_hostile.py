"""Issue 20 (hostile run, round two) over HTTP: each finding's hole, tried as an attacker or a careless client would."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from tests.support.live_server import LiveServer
from tests.test_service import NO_AUTO_BUILD, auth, make_keys, wait_job
from tmem.errors import StoreError
from tmem.memory import Memory
from tmem.service import create_app
from tmem.service.worker import BuildWorkers
from tmem.settings import Settings
from tmem.store import open_store
from tmem.store.control import ControlStore, Job, open_control

PROBLEM = "application/problem+json"
MSG = {"speaker": "Ann", "text": "I adopted a cat named Miso.", "time": "2024-05-02T10:00:00"}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "mem", llm="none", embed_backend="hash", **NO_AUTO_BUILD)  # type: ignore[arg-type]


@pytest.fixture
def client(settings: Settings) -> Iterator[httpx.Client]:
    keys = make_keys(settings, "acme")
    with (
        LiveServer(create_app(settings)) as server,
        httpx.Client(base_url=server.url, headers=auth(keys["acme"]), timeout=60) as c,
    ):
        yield c


def _built(client: httpx.Client) -> None:
    assert client.post("/v1/spaces/s/messages", json={"messages": [MSG]}).status_code == 200
    assert wait_job(client, client.post("/v1/spaces/s/build").json()["job"])["state"] == "succeeded"


def test_a_request_cannot_choose_a_model_path(client: httpx.Client, tmp_path: Path) -> None:
    """High 2: {"reranker": PATH} is refused whatever PATH is, with the same answer for a folder, a file and nothing,
    and before anything is loaded."""
    _built(client)
    (tmp_path / "a-file").write_text("x")
    answers = []
    for path in ("/root", str(tmp_path), str(tmp_path / "a-file"), str(tmp_path / "missing"), "some/hub-model"):
        for route, body in (("search", {"q": "cat"}), ("ask", {"question": "cat?"})):
            r = client.post(f"/v1/spaces/s/{route}", json={**body, "config": {"reranker": path}})
            assert r.status_code == 422 and r.headers["content-type"] == PROBLEM, r.text
            assert "operator" in r.json()["detail"] and path not in r.text
            answers.append(r.json()["detail"])
    assert len(set(answers)) == 1


@pytest.mark.parametrize(
    "config",
    [
        '{"kS": 1000000000000}',
        '{"depth": 1000000000}',
        '{"kT": 5000}',
        '{"rerank_depth": 100000}',
        '{"gate": NaN}',
        '{"gate": Infinity}',
        '{"scene_trigger_gate": -Infinity}',
        '{"gate": 7.5}',
    ],
)
def test_request_retrieval_settings_are_bounded(client: httpx.Client, config: str) -> None:
    """High 2: absurd counts and non-finite thresholds are 422s naming the field; sane ones still work."""
    _built(client)
    r = client.post(
        "/v1/spaces/s/search",
        content=f'{{"q": "cat", "config": {config}}}',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 422 and r.headers["content-type"] == PROBLEM, r.text
    field = config.split('"')[1]
    assert field in r.json()["detail"]
    ok = client.post("/v1/spaces/s/search", json={"q": "cat", "config": {"kS": 3, "depth": 100, "gate": 0.5}})
    assert ok.status_code == 200, ok.text


class _LockedAtFirst:
    """The real control store, except that its first ``n`` claims meet a locked database (as SQLite's 30 s busy
    timeout ends): the fault the hostile run produced with a second connection holding a write lock."""

    def __init__(self, control: ControlStore, n: int) -> None:
        self._control = control
        self.left = n

    def __getattr__(self, name: str) -> Any:
        return getattr(self._control, name)

    def claim_job(self, owner: str, at: float) -> Job | None:
        if self.left > 0:
            self.left -= 1
            raise StoreError("The service tables in tmem.db are busy: database is locked. Retry the request.")
        return self._control.claim_job(owner, at)


def test_build_worker_survives_a_locked_database(settings: Settings) -> None:
    """High 3: a store error in claim_job no longer ends the worker: it backs off, retries and runs the job."""
    with Memory.open(settings=settings) as memory:
        memory.add_messages("acme/s", [MSG])
    store = open_store(settings.store_url)
    control = open_control(store)
    locked = _LockedAtFirst(control, 3)
    pool = BuildWorkers(cast(ControlStore, locked), lambda: Memory.open(settings=settings), poll_seconds=0.02)
    job = control.create_job("acme", "s", {"rebuild": False})
    pool.start()
    try:
        deadline = time.monotonic() + 60
        while control.get_job(job.id).state != "succeeded":
            assert time.monotonic() < deadline, f"the job never ran: {control.get_job(job.id)}"
            time.sleep(0.05)
        health = pool.health()
        assert locked.left == 0 and health.alive == health.workers == 1
        assert health.last_error == "StoreError" and health.retrying == 0
    finally:
        pool.stop()
        control.close()
        store.close()


def test_healthz_reports_workers_and_the_oldest_queued_job(settings: Settings) -> None:
    """High 3 and Low: /healthz shows worker liveness and the queue's age; 13 build requests queue one job."""
    keys = make_keys(settings, "acme")
    with (
        LiveServer(create_app(settings, workers=0)) as server,  # no worker: jobs stay queued
        httpx.Client(base_url=server.url, headers=auth(keys["acme"]), timeout=60) as c,
    ):
        idle = httpx.get(f"{server.url}/healthz").json()
        assert idle["status"] == "ok" and idle["oldest_queued_seconds"] is None and idle["workers"] == 0
        assert c.post("/v1/spaces/s/messages", json={"messages": [MSG]}).status_code == 200
        jobs = {c.post("/v1/spaces/s/build").json()["job"] for _ in range(12)}
        jobs.add(c.post("/v1/spaces/s/build", json={"rebuild": True}).json()["job"])
        assert len(jobs) == 1
        (queued,) = c.get("/v1/spaces/s/jobs").json()
        assert queued["state"] == "queued" and queued["params"] == {"rebuild": True}
        time.sleep(1.1)
        health = httpx.get(f"{server.url}/healthz")
        assert health.status_code == 200 and health.json()["oldest_queued_seconds"] >= 1.0


@pytest.fixture
def any_backend(store_url: str, tmp_path: Path) -> Settings:
    database = None if store_url.startswith("sqlite") else store_url
    return Settings(home=tmp_path, database_url=database, llm="none", embed_backend="hash", **NO_AUTO_BUILD)  # type: ignore[arg-type]


def test_a_nul_character_is_the_same_422_on_every_backend(any_backend: Settings) -> None:
    """Medium 6: a NUL in any text field is refused with a 422 naming the field on SQLite and PostgreSQL alike
    (PostgreSQL answered 503 store-unavailable with Retry-After, SQLite stored it); nothing is written."""
    keys = make_keys(any_backend, "acme")
    with (
        LiveServer(create_app(any_backend)) as server,
        httpx.Client(base_url=server.url, headers=auth(keys["acme"]), timeout=60) as c,
    ):
        _built(c)
        before = c.get("/v1/spaces/s/export").json()["turns"]
        item = c.get("/v1/spaces/s/export").json()["items"]
        cases = [
            (c.post("/v1/spaces/s/messages", json={"messages": [{**MSG, "text": "a\x00b"}]}), "messages.0.text"),
            (c.post("/v1/spaces/s/messages", json={"messages": [{**MSG, "caption": "c\x00"}]}), "messages.0.caption"),
            (c.post("/v1/spaces/s/messages", json={"messages": [{**MSG, "speaker": "A\x00"}]}), "messages.0.speaker"),
            (c.post("/v1/spaces/s/search", json={"q": "cat\x00"}), "q"),
            (c.get("/v1/spaces/s/context", params={"q": "cat\x00"}), "q"),
            (c.post("/v1/spaces/s/ask", json={"question": "cat\x00?"}), "question"),
            (c.post("/v1/spaces/s/forget", json={"turn_ids": ["t\x00"]}), "turn_ids.0"),
        ]
        if item:
            cases.append((c.patch(f"/v1/spaces/s/items/{item[0]['id']}", json={"text": "x\x00y"}), "text"))
        for r, field in cases:
            assert r.status_code == 422 and r.headers["content-type"] == PROBLEM, r.text
            assert "Retry-After" not in r.headers and field in r.text and "NUL" in r.text, r.text
        assert c.get("/v1/spaces/s/export").json()["turns"] == before


def test_store_errors_never_show_connection_parameters() -> None:
    """Medium 6: a store error's text (here a real one: an unreachable PostgreSQL with a user, password, database
    and socket in its URL) reaches the server's log, never a client's problem detail."""
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from tmem.errors import public_message
    from tmem.service import problems

    url = "postgresql://secretuser:hunter2@/secretdb?host=/tmp/secret-socket-dir&port=1&connect_timeout=2"
    with pytest.raises(StoreError) as caught:
        open_store(url)
    assert "secretuser" in str(caught.value) or "secret-socket-dir" in str(caught.value)  # the operator's text
    app = FastAPI()
    problems.install(app)

    @app.get("/boom")
    def boom() -> None:
        raise caught.value

    with TestClient(app) as client:
        r = client.get("/boom")
    assert r.status_code == 503 and r.headers["content-type"] == PROBLEM
    for secret in ("secretuser", "hunter2", "secretdb", "secret-socket-dir", "/tmp"):
        assert secret not in r.text
    assert public_message(caught.value) in r.text and "log" in r.json()["detail"]


def test_repeated_messages_are_kept_and_idempotency_keys_dedupe(client: httpx.Client) -> None:
    """Medium 8: three separate "ok" calls are three turns; a request resent under one Idempotency-Key is stored
    once; a message id still decides alone."""
    ok = {"messages": [{"speaker": "user", "text": "ok"}]}
    for _ in range(3):
        r = client.post("/v1/spaces/s/messages", json=ok)
        assert r.status_code == 200 and len(r.json()["added"]) == 1 and r.json()["skipped"] == [], r.text
    keyed = {"Idempotency-Key": "req-7"}
    first = client.post("/v1/spaces/s/messages", json=ok, headers=keyed).json()
    again = client.post("/v1/spaces/s/messages", json=ok, headers=keyed).json()
    assert first["added"] == ["req-7:0"] and again["added"] == [] and again["skipped"] == ["req-7:0"]
    bad = client.post("/v1/spaces/s/messages", json=ok, headers={"Idempotency-Key": "a/b"})
    assert bad.status_code == 422 and "idempotency" in bad.text.lower()
    early = {"messages": [{"speaker": "user", "text": "ok", "time": "0001-01-01T00:00:00+01:00"}]}
    r = client.post("/v1/spaces/s/messages", json=early, headers={"Idempotency-Key": "req-8"})
    assert r.status_code == 422 and "messages[0]" in r.json()["detail"], r.text  # bad input, with a key too
    turns = client.get("/v1/spaces/s/export").json()["turns"]
    assert [t["text"] for t in turns] == ["ok"] * 4


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (
            '{"messages": [{"speaker": "Ann", "text": "a", "text": "b", "time": "2024-05-02T10:00:00"}]}',
            "messages[0].text",
        ),
        ('{"q": "cat", "q": "dog"}', "q"),
        ('{"q": "cat", "config": {"kS": 3, "kS": 4}}', "config.kS"),
        ('{"q": "cat", "config": {"kS": 1' + "0" * 120 + "}}", "config.kS"),
    ],
)
def test_duplicate_keys_in_a_body_are_refused(client: httpx.Client, body: str, where: str) -> None:
    """Low: a key twice in one JSON object was accepted with the last one winning; the importer refuses it, and so
    does the service (422 naming where), before anything is stored."""
    _built(client)
    path = "/v1/spaces/s/messages" if "messages" in body else "/v1/spaces/s/search"
    r = client.post(path, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.headers["content-type"] == PROBLEM, r.text
    assert f"body.{where}" in r.json()["detail"]
    assert len(client.get("/v1/spaces/s/export").json()["turns"]) == 1
