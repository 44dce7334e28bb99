"""Issue 20 (hostile run, round two) over HTTP: each finding's hole, tried as an attacker or a careless client would."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.live_server import LiveServer
from tests.test_service import NO_AUTO_BUILD, auth, make_keys, wait_job
from tmem.service import create_app
from tmem.settings import Settings

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
