"""No build wall over HTTP (issue 21): a message posted to a space is in the context of the next read, before and
after a build, and once only after it."""

from __future__ import annotations

from pathlib import Path

from tests.support.live_server import LiveServer
from tests.test_service import NO_AUTO_BUILD, auth, make_keys, wait_job
from tmem.service import create_app
from tmem.settings import Settings

FACT = "I adopted a grey cat called Pixel from the shelter"


def test_a_posted_message_is_in_the_next_context_with_or_without_a_build(tmp_path: Path) -> None:
    import httpx

    settings = Settings(home=tmp_path / "mem", llm="none", embed_backend="hash", **NO_AUTO_BUILD)  # type: ignore[arg-type]
    keys = make_keys(settings, "acme")
    chatter = [
        {"speaker": "bot", "text": f"hello again, how is the weather today {n}", "time": f"2024-05-02T10:0{n}:00"}
        for n in range(4)
    ]
    with (
        LiveServer(create_app(settings)) as server,
        httpx.Client(base_url=server.url, headers=auth(keys["acme"]), timeout=60) as client,
    ):

        def context() -> dict[str, object]:
            r = client.get("/v1/spaces/notes/context", params={"q": "cat Pixel shelter", "max_tokens": 300})
            assert r.status_code == 200, r.text
            body: dict[str, object] = r.json()
            return body

        assert client.post("/v1/spaces/notes/messages", json={"messages": chatter}).status_code == 200
        assert FACT not in str(context()["text"])
        fact = {"speaker": "ann", "text": FACT, "time": "2024-05-02T10:05:00"}
        assert client.post("/v1/spaces/notes/messages", json={"messages": [fact]}).status_code == 200
        before = context()  # never built: the raw turn
        assert str(before["text"]).count(FACT) == 1 and before["unbuilt_turns"] == 5
        job = wait_job(client, client.post("/v1/spaces/notes/build").json()["job"])
        assert job["state"] == "succeeded", job
        after = context()
        assert str(after["text"]).count(FACT) == 1 and after["unbuilt_turns"] == 0
        later = {"speaker": "ann", "text": "My sister Ines is learning the cello", "time": "2024-05-02T10:06:00"}
        assert client.post("/v1/spaces/notes/messages", json={"messages": [later]}).status_code == 200
        r = client.get("/v1/spaces/notes/context", params={"q": "sister cello", "max_tokens": 300})
        assert r.status_code == 200 and "learning the cello" in r.json()["text"] and r.json()["unbuilt_turns"] == 1
        found = client.post("/v1/spaces/notes/search", json={"q": "sister cello"}).json()
        assert found["stale_turns"] == 1 and "cello" in found["turns"][0]["turn"]["text"]
        assert found["turns"][0]["routes"] == []  # routes only with explain, as for scenes and items
