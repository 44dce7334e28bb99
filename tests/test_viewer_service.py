"""The viewer at /ui of `tmem serve`: the key entered once (cookie) or sent as a bearer header, the tenant's spaces
only, build jobs from the service's job records, and an edit made in the viewer seen by the HTTP API (one core)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.live_server import LiveServer
from tests.test_service import NO_AUTO_BUILD, auth, dev_messages, make_keys, wait_job
from tmem.service.app import create_app
from tmem.settings import Settings


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    home = tmp_path / "mem"
    settings = Settings(home=home, llm="none", embed_backend="hash", **NO_AUTO_BUILD)  # type: ignore[arg-type]
    keys = make_keys(settings, "acme", "beta")
    with LiveServer(create_app(settings)) as server:
        with httpx.Client(base_url=server.url, headers=auth(keys["acme"]), timeout=60) as api:
            for session in dev_messages(sessions=1):
                assert api.post("/v1/spaces/alice/messages", json={"messages": session}).status_code == 200
            job = api.post("/v1/spaces/alice/build").json()["job"]
            assert wait_job(api, job)["state"] == "succeeded"
        yield server.url, keys


def test_viewer_in_the_service_with_a_key_login(served: tuple[str, dict[str, str]]) -> None:
    url, keys = served
    with httpx.Client(base_url=url, timeout=60) as browser:
        first = browser.get("/ui/s/alice")
        assert first.status_code == 303 and first.headers["location"].endswith("/ui/login?next=%2Fui%2Fs%2Falice")
        form = browser.get("/ui/login").text
        token = re.search(r'name="csrf" value="([0-9a-f]+)"', form)
        assert token is not None
        wrong = browser.post("/ui/login", data={"key": "nope", "csrf": token.group(1), "next": "/ui/s/alice"})
        assert wrong.status_code == 401
        ok = browser.post("/ui/login", data={"key": keys["acme"], "csrf": token.group(1), "next": "/ui/s/alice"})
        assert ok.status_code == 303 and "httponly" in ok.headers["set-cookie"].lower()
        overview = browser.get("/ui/s/alice")
        assert overview.status_code == 200 and "tenant acme" in overview.text
        assert "succeeded" in overview.text and '<progress max="100" value="100"' in overview.text  # the build job
        assert "descriptive only" in overview.text
        items = browser.get("/ui/s/alice/items").text
        item_id = re.search(r'/ui/s/alice/items/([^"?/]+)"', items)
        assert item_id is not None
        page = f"/ui/s/alice/items/{item_id.group(1)}"
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', browser.get(page).text)
        assert csrf is not None
        edited = browser.post(
            f"{page}/correct", data={"csrf": csrf.group(1), "text": "Edited in the viewer."}, follow_redirects=True
        )
        assert edited.status_code == 200 and "Corrected" in edited.text
        search = browser.get("/ui/s/alice/search", params={"q": "support group", "max_tokens": "500"})
        assert search.status_code == 200 and 'id="context-tokens"' in search.text and "support group" in search.text
    with httpx.Client(base_url=url, headers=auth(keys["acme"]), timeout=60) as api:  # the API sees the edit
        assert api.get(f"/v1/spaces/alice/items/{item_id.group(1)}").json()["text"] == "Edited in the viewer."
    with httpx.Client(base_url=url, headers=auth(keys["beta"]), timeout=60) as beta:  # bearer key, other tenant
        assert beta.get("/ui/").status_code == 200 and "alice" not in beta.get("/ui/").text
        missing = beta.get("/ui/s/alice")
        assert missing.status_code == 404 and "acme" not in missing.text
