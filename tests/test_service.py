"""The HTTP service through a real transport: uvicorn on 127.0.0.1 (ephemeral port) and httpx, on real dev data."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from tests.support.live_server import LiveServer
from tmem.cli.main import cli
from tmem.ingest import read_file
from tmem.service import create_app
from tmem.settings import Settings
from tmem.store import open_store
from tmem.store.control import MAX_ATTEMPTS, open_control

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo10.dev.json"
PROBLEM = "application/problem+json"


def dev_messages(sessions: int = 2, conversation: int = 0) -> list[list[dict[str, Any]]]:
    """The first sessions of a dev LoCoMo conversation, one list of messages per session."""
    space = read_file(DATA)[conversation]
    return [
        [
            {"speaker": t.speaker, "text": t.text, "time": (t.time or s.started_at).isoformat(), "id": t.id}
            for t in s.turns
        ]
        for s in space.sessions[:sessions]
    ]


def make_keys(settings: Settings, *tenants: str) -> dict[str, str]:
    store = open_store(settings.store_url)
    control = open_control(store)
    try:
        return {t: control.create_key(t)[1] for t in tenants}
    finally:
        control.close()
        store.close()


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


class Clients:
    """httpx clients of one test, closed together."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._open: list[httpx.Client] = []

    def __call__(self, key: str | None = None) -> httpx.Client:
        client = httpx.Client(base_url=self.url, headers=auth(key) if key else {}, timeout=60)
        self._open.append(client)
        return client

    def close(self) -> None:
        for client in self._open:
            client.close()


def wait_job(client: httpx.Client, job: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        body: dict[str, Any] = client.get(f"/v1/jobs/{job}").json()
        if body["state"] in ("succeeded", "failed") or time.monotonic() > deadline:
            return body
        time.sleep(0.1)


NO_AUTO_BUILD = {"build_after_turns": 1_000_000, "build_idle_seconds": 1e9}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "mem", llm="none", embed_backend="hash", **NO_AUTO_BUILD)  # type: ignore[arg-type]


@pytest.fixture
def served(settings: Settings) -> Iterator[tuple[Clients, dict[str, str]]]:
    keys = make_keys(settings, "acme", "beta")
    with LiveServer(create_app(settings)) as server:
        clients = Clients(server.url)
        yield clients, keys
        clients.close()


def test_keys_cli_create_list_revoke(tmp_path: Path) -> None:
    runner = CliRunner()
    home = str(tmp_path / "mem")
    created = runner.invoke(cli, ["keys", "create", "acme", "--dir", home])
    assert created.exit_code == 0, created.output
    key = created.output.strip().splitlines()[-1]
    assert key.startswith("tmem_")
    listed = runner.invoke(cli, ["--dir", home, "keys", "list"])
    key_id = key.split("_")[1]
    assert key_id in listed.output and "acme" in listed.output and key not in listed.output
    raw = (tmp_path / "mem" / "tmem.db").read_bytes()
    assert key.encode() not in raw  # stored hashed
    settings = Settings(home=tmp_path / "mem", llm="none", embed_backend="hash")
    with LiveServer(create_app(settings)) as server, httpx.Client(base_url=server.url, headers=auth(key)) as client:
        assert client.get("/v1/spaces").status_code == 200
        revoked = runner.invoke(cli, ["keys", "revoke", key_id, "--dir", home])
        assert revoked.exit_code == 0 and "Revoked" in revoked.output
        after = client.get("/v1/spaces")
        assert after.status_code == 401 and after.headers["content-type"] == PROBLEM
    bad = runner.invoke(cli, ["keys", "create", "a/b", "--dir", home])
    assert bad.exit_code != 0 and "no '/'" in str(bad.exception) + bad.output


def test_messages_build_search_export_delete(served: tuple[Clients, dict[str, str]]) -> None:
    clients, keys = served
    client = clients(keys["acme"])
    sessions = dev_messages(2)
    for messages in sessions:
        r = client.post("/v1/spaces/caroline/messages", json={"messages": messages})
        assert r.status_code == 200, r.text
        assert r.json()["added"] == [m["id"] for m in messages] and r.json()["space"] == "caroline"
    again = client.post("/v1/spaces/caroline/messages", json={"messages": sessions[0]}).json()
    assert again["added"] == [] and len(again["skipped"]) == len(sessions[0])

    unbuilt = client.post("/v1/spaces/caroline/search", json={"q": "support group"})
    assert unbuilt.status_code == 409 and "build" in unbuilt.json()["detail"]
    unbuilt_ctx = client.get("/v1/spaces/caroline/context", params={"q": "support group"})
    assert unbuilt_ctx.status_code == 409

    r = client.post("/v1/spaces/caroline/build")
    assert r.status_code == 202
    job = wait_job(client, r.json()["job"])
    assert job["state"] == "succeeded", job
    assert job["result"]["counts"]["scenes"] > 0 and job["progress"]["fraction"] == 1.0

    hits = client.post("/v1/spaces/caroline/search", json={"q": "LGBTQ support group", "explain": True}).json()
    assert hits["space"] == "caroline"
    assert hits["scenes"] and all(h["routes"] for h in hits["scenes"])
    texts = " ".join(t["text"] for h in hits["scenes"] for t in h["turns"])
    assert "support group" in texts
    plain = client.post("/v1/spaces/caroline/search", json={"q": "LGBTQ support group"}).json()
    assert all(h["routes"] == [] for h in plain["scenes"])

    ctx = client.get("/v1/spaces/caroline/context", params={"q": "LGBTQ support group", "max_tokens": 150})
    assert ctx.status_code == 200, ctx.text
    body = ctx.json()
    assert body["space"] == "caroline" and 0 < body["tokens"] <= 150 and body["max_tokens"] == 150
    assert body["hits"] and all(h["routes"] for h in body["hits"]) and "support group" in body["text"]
    assert client.get("/v1/spaces/caroline/context", params={"q": "x", "max_tokens": -1}).status_code == 422
    assert client.get("/v1/spaces/caroline/context").status_code == 422

    spaces = client.get("/v1/spaces").json()["spaces"]
    assert [s["name"] for s in spaces] == ["caroline"] and spaces[0]["build_state"] == "built"
    export = client.get("/v1/spaces/caroline/export").json()
    assert export["space"]["name"] == "caroline"
    assert len(export["turns"]) == sum(len(m) for m in sessions)

    gone = client.delete("/v1/spaces/caroline")
    assert gone.status_code == 200 and gone.json()["deleted"] == "caroline"
    assert client.get("/v1/spaces/caroline/export").status_code == 404
    assert client.get("/v1/spaces").json()["spaces"] == []


def test_another_tenants_space_answers_exactly_as_a_missing_one(served: tuple[Clients, dict[str, str]]) -> None:
    clients, keys = served
    acme = clients(keys["acme"])
    beta = clients(keys["beta"])
    probes: list[tuple[str, str, dict[str, Any] | None]] = [
        ("GET", "/v1/spaces/notes/export", None),
        ("POST", "/v1/spaces/notes/search", {"q": "cat"}),
        ("POST", "/v1/spaces/notes/build", None),
        ("DELETE", "/v1/spaces/notes", None),
    ]

    def answers() -> list[tuple[int, str, bytes]]:
        out = []
        for method, path, body in probes:
            r = beta.request(method, path, json=body)
            out.append((r.status_code, r.headers["content-type"], r.content))
        return out

    before = answers()
    assert all(status == 404 and ctype == PROBLEM for status, ctype, _ in before)
    msg = {"speaker": "Ann", "text": "I adopted a cat named Miso.", "time": "2024-05-02T10:00:00"}
    assert acme.post("/v1/spaces/notes/messages", json={"messages": [msg]}).status_code == 200
    job = acme.post("/v1/spaces/notes/build").json()["job"]
    assert wait_job(acme, job)["state"] == "succeeded"
    assert answers() == before
    assert beta.get(f"/v1/jobs/{job}").status_code == 404
    assert beta.get("/v1/spaces").json()["spaces"] == []
    assert b"acme" not in acme.post("/v1/spaces/nothere/search", json={"q": "x"}).content


def test_errors_are_problem_details_that_say_what_to_fix(served: tuple[Clients, dict[str, str]]) -> None:
    clients, keys = served
    client = clients(keys["acme"])
    no_key = clients().get("/v1/spaces")
    assert no_key.status_code == 401 and no_key.headers["www-authenticate"] == "Bearer"
    assert clients("tmem_000000000000_nope").get("/v1/spaces").status_code == 401

    cases: list[tuple[httpx.Response, int, str]] = [
        (client.post("/v1/spaces/bad%20name/messages", json={"messages": []}), 422, "space"),
        (client.post("/v1/spaces/s/messages", json={"messages": []}), 422, "messages"),
        (client.post("/v1/spaces/s/messages", json={"messages": [{"speaker": "A"}]}), 422, "messages.0.text"),
        (
            client.post("/v1/spaces/s/messages", content=b"{not json", headers={"content-type": "application/json"}),
            422,
            "JSON",
        ),
        (client.post("/v1/spaces/s/messages", content=b"x" * (2 << 20)), 413, "bytes"),
        (client.get("/v1/nowhere"), 404, "openapi.json"),
        (client.get("/v1/jobs/job_unknown"), 404, "job"),
    ]
    for response, status, words in cases:
        assert response.status_code == status, response.text
        assert response.headers["content-type"] == PROBLEM
        body = response.json()
        assert body["status"] == status and words in body["detail"] + str(body.get("errors", "")), body

    msg = {"speaker": "Ann", "text": "hello", "time": "2024-05-02T10:00:00"}
    client.post("/v1/spaces/s/messages", json={"messages": [msg]})
    assert wait_job(client, client.post("/v1/spaces/s/build").json()["job"])["state"] == "succeeded"
    bad_preset = client.post("/v1/spaces/s/search", json={"q": "x", "config": "no-such-preset"})
    assert bad_preset.status_code == 400 and bad_preset.headers["content-type"] == PROBLEM
    bad_field = client.post("/v1/spaces/s/search", json={"q": "x", "config": {"kS": -1}})
    assert bad_field.status_code == 422 and "kS" in bad_field.json()["detail"]
    ask = client.post("/v1/spaces/s/ask", json={"question": "hi?"})
    assert ask.status_code == 409 and "LLM" in ask.json()["detail"]


def test_jobs_are_persisted_and_survive_a_restart(settings: Settings) -> None:
    keys = make_keys(settings, "acme")
    msg = {"speaker": "Ann", "text": "I adopted a cat named Miso.", "time": "2024-05-02T10:00:00"}
    with (
        LiveServer(create_app(settings)) as server,
        httpx.Client(base_url=server.url, headers=auth(keys["acme"])) as client,
    ):
        client.post("/v1/spaces/a/messages", json={"messages": [msg]})
        client.post("/v1/spaces/b/messages", json={"messages": [msg]})
        done = client.post("/v1/spaces/a/build").json()["job"]
        assert wait_job(client, done)["state"] == "succeeded"

    # A server that died mid-build leaves its jobs 'running': one started once, one started MAX_ATTEMPTS times.
    store = open_store(settings.store_url)
    control = open_control(store)
    interrupted = control.create_job("acme", "b", {"rebuild": False})
    assert control.claim_job(_dead_owner(), time.time()) is not None
    hopeless = control.create_job("acme", "b", {"rebuild": False})
    control.close()
    store.close()
    _force_running(settings, hopeless.id, attempts=MAX_ATTEMPTS)

    with (
        LiveServer(create_app(settings)) as server,
        httpx.Client(base_url=server.url, headers=auth(keys["acme"])) as client,
    ):
        assert client.get(f"/v1/jobs/{done}").json()["state"] == "succeeded"  # the old server's job is still there
        requeued = wait_job(client, interrupted.id)
        assert requeued["state"] == "succeeded" and requeued["attempts"] == 2
        failed = client.get(f"/v1/jobs/{hopeless.id}").json()
        assert failed["state"] == "failed" and "stopped during this build" in failed["error"]


def _dead_owner() -> str:
    """The owner name of a server process of this host that has exited."""
    import socket
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return f"{socket.gethostname()}:{proc.pid}:0"


def _force_running(settings: Settings, job_id: str, attempts: int) -> None:
    import sqlite3

    db = sqlite3.connect(settings.db_path)
    with db:
        db.execute("UPDATE service_jobs SET state = 'running', attempts = ? WHERE id = ?", (attempts, job_id))
    db.close()


def test_build_policy_starts_a_job_after_enough_new_turns(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "mem", llm="none", embed_backend="hash", build_after_turns=5)
    keys = make_keys(settings, "acme")
    messages = dev_messages(1)[0]
    with LiveServer(create_app(settings)) as server, httpx.Client(base_url=server.url, headers=auth(keys["acme"])) as c:
        c.post("/v1/spaces/s/messages", json={"messages": messages[:3]})
        time.sleep(1.5)  # the worker looks at arrivals every second: 3 unbuilt turns are not due
        assert c.get("/v1/spaces/s/jobs").json() == []
        c.post("/v1/spaces/s/messages", json={"messages": messages[3:6]})
        deadline = time.monotonic() + 60
        while not (jobs := c.get("/v1/spaces/s/jobs").json()) and time.monotonic() < deadline:
            time.sleep(0.1)
        (job,) = jobs
        assert job["params"]["auto"] is True
        assert wait_job(c, job["id"])["state"] == "succeeded"
        hits = c.post("/v1/spaces/s/search", json={"q": messages[4]["text"]}).json()
        assert hits["stale_turns"] == 0


def test_one_memory_at_a_time_over_http(served: tuple[Clients, dict[str, str]]) -> None:
    clients, keys = served
    client, other = clients(keys["acme"]), clients(keys["beta"])
    messages = dev_messages(1)[0]
    client.post("/v1/spaces/c/messages", json={"messages": messages})
    assert wait_job(client, client.post("/v1/spaces/c/build").json()["job"])["state"] == "succeeded"
    items = client.get("/v1/spaces/c/export").json()["items"]
    item = items[0]
    path = f"/v1/spaces/c/items/{item['id']}"

    got = client.get(path)
    assert got.status_code == 200 and got.json()["text"] == item["text"]
    assert other.get(path).status_code == 404 and other.get(f"{path}/history").status_code == 404

    edited = client.patch(path, json={"text": "Caroline joined a pottery class in May 2023."})
    assert edited.status_code == 200, edited.text
    assert edited.json()["text"] == "Caroline joined a pottery class in May 2023."
    history = client.get(f"{path}/history").json()
    assert [v["text"] for v in history["versions"]] == [item["text"], "Caroline joined a pottery class in May 2023."]
    assert other.patch(path, json={"text": "x"}).status_code == 404

    deleted = client.delete(path)
    assert deleted.status_code == 200 and deleted.json()["items_forgotten"] == [item["id"]]
    assert deleted.json()["space"] == "c"
    assert client.get(path).status_code == 404

    turn = messages[5]
    assert other.post("/v1/spaces/c/forget", json={"turn_ids": [turn["id"]]}).status_code == 404
    forgot = client.post("/v1/spaces/c/forget", json={"turn_ids": [turn["id"]]})
    assert forgot.status_code == 200 and forgot.json()["turns_forgotten"] == [turn["id"]]
    assert turn["text"] not in client.get("/v1/spaces/c/export").text
    hits = client.post("/v1/spaces/c/search", json={"q": turn["text"]}).json()
    del hits["query"]
    assert turn["text"] not in json.dumps(hits)
    empty = client.post("/v1/spaces/c/forget", json={})
    assert empty.status_code == 422 and "turn_ids" in empty.json()["detail"]
    missing = client.get("/v1/spaces/c/items/no-such-item")
    assert missing.status_code == 404 and missing.headers["content-type"] == PROBLEM


def test_ask_answers_through_an_openai_compatible_endpoint(tmp_path: Path) -> None:
    from tests.support.openai_stub import OpenAIStub
    from tmem.memory import Memory

    home = tmp_path / "mem"
    built = Settings(home=home, llm="none", embed_backend="hash")
    keys = make_keys(built, "acme")
    with Memory.open(settings=built) as memory:  # an extractive memory of acme's space, built beforehand
        memory.add_messages("acme/c", dev_messages(1)[0])
        memory.build("acme/c")
    with OpenAIStub(reply=lambda request: '{"answer": "a transgender support group"}') as stub:
        served = Settings(
            home=home,
            llm="openai",
            llm_model="stub-model",
            llm_base_url=stub.base_url,
            llm_api_key="test",
            embed_backend="hash",
            **NO_AUTO_BUILD,  # type: ignore[arg-type]
        )
        with (
            LiveServer(create_app(served)) as server,
            httpx.Client(base_url=server.url, headers=auth(keys["acme"]), timeout=60) as c,
        ):
            r = c.post("/v1/spaces/c/ask", json={"question": "Which group did Caroline go to?", "variant": "short"})
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["answer"] == "a transgender support group" and body["space"] == "c"
            assert body["search"]["space"] == "c" and body["context"]["turn_ids"]
        question = json.dumps(stub.chat_requests[-1].body)
        assert "Which group did Caroline go to?" in question


def test_tmem_serve_from_the_command_line(tmp_path: Path) -> None:
    """The contract from outside: `tmem keys create` then `tmem serve --host --port --dir`, as a user runs them."""
    import os
    import socket
    import subprocess
    import sys

    home = str(tmp_path / "mem")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"), "TMEM_EMBED_BACKEND": "hash"}
    tmem = [sys.executable, "-c", "from tmem.cli.main import main; main()"]
    created = subprocess.run([*tmem, "keys", "create", "acme", "--dir", home], env=env, capture_output=True, text=True)
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip().splitlines()[-1]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [*tmem, "serve", "--host", "127.0.0.1", "--port", str(port), "--dir", home, "--log-level", "warning"],
        env=env,
        stderr=subprocess.PIPE,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=auth(key), timeout=30) as client:
            deadline = time.monotonic() + 60
            while True:
                try:
                    r = client.get("/v1/spaces")
                    break
                except httpx.TransportError:
                    assert server.poll() is None and time.monotonic() < deadline, "tmem serve did not start"
                    time.sleep(0.2)
            assert r.status_code == 200 and r.json() == {"spaces": []}
            assert client.get("/openapi.json").json()["info"]["title"] == "tmem"
    finally:
        server.terminate()
        assert server.wait(30) is not None
        assert server.stderr is not None
        server.stderr.close()
