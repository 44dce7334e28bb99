"""Issue 34, finding 6: the viewer's search placeholder comes from the space's own data, a long why-recalled page
folds the hits past the first few of each stage, "Log out" appears only once a key was given, and the token budget
is called ``max_tokens`` as everywhere else."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tmem import Memory, Settings
from tmem.embed import HashEmbedder
from tmem.models import SessionInput, TurnInput
from tmem.viewer import ViewerScope, create_local_app, create_router

TOPICS = ["kayak", "violin", "garden", "bakery", "chess", "marathon", "pottery", "sailing", "tango", "poetry"]


def _sessions(speakers: tuple[str, str]) -> list[SessionInput]:
    turns = [
        TurnInput(id=f"t{n}", speaker=speakers[n % 2], text=f"We talked about {topic} and the weekend plans again.")
        for n, topic in enumerate(TOPICS)
    ]
    return [SessionInput(id="s1", started_at=datetime(2024, 3, 1, 9, 0), turns=turns)]


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    mem = Memory.open(tmp_path, Settings(llm="none", embed_backend="hash"), embedder=HashEmbedder())
    mem.add_sessions("ana", _sessions(("Ana", "Bo")))
    mem.add_sessions("kim", _sessions(("Kim", "Lee")))
    yield mem
    mem.close()


def test_placeholder_comes_from_the_space_and_the_budget_is_max_tokens(memory: Memory) -> None:
    with TestClient(create_local_app(memory), base_url="http://127.0.0.1") as client:
        for space, own, other in (("ana", "Ana", "Kim"), ("kim", "Kim", "Ana")):
            page = client.get(f"/ui/s/{space}/search").text
            placeholder = re.search(r'id="s-q"[^>]*placeholder="([^"]*)"', page)
            assert placeholder is not None and own in placeholder.group(1) and other not in placeholder.group(1)
            assert "Gina" not in page  # no question of a LoCoMo conversation the space does not hold
        page = client.get("/ui/s/ana/search", params={"q": "weekend plans", "max_tokens": "120"})
        assert page.status_code == 200 and 'name="max_tokens"' in page.text and 'value="120"' in page.text
        assert 'name="budget"' not in page.text
        bad = client.get("/ui/s/ana/search", params={"q": "x", "max_tokens": "lots"})
        assert bad.status_code == 400 and "max_tokens" in bad.text


def test_a_long_why_recalled_page_folds_the_hits_past_the_first_five(memory: Memory) -> None:
    with TestClient(create_local_app(memory), base_url="http://127.0.0.1") as client:
        page = client.get("/ui/s/ana/search", params={"q": "We talked about the weekend plans", "max_tokens": "2000"})
    assert page.status_code == 200
    ranks = [int(r) for r in re.findall(r'<h4 id="ht-(\d+)">', page.text)]
    assert len(ranks) > 5 and ranks == list(range(1, len(ranks) + 1)), ranks  # every hit, ranks continue
    folded = re.search(
        r'<details class="more"><summary>(\d+) more raw turn hits \(ranks 6-(\d+)\)</summary>', page.text
    )
    assert folded is not None and int(folded.group(1)) == len(ranks) - 5 and int(folded.group(2)) == len(ranks)
    assert page.text.index('<h4 id="ht-5">') < folded.start() < page.text.index('<h4 id="ht-6">')


def test_log_out_shows_only_after_login(memory: Memory) -> None:
    def resolve(key: str | None) -> ViewerScope | None:
        return ViewerScope(memory, tenant="ana") if key == "key-ana" else None

    host = FastAPI()
    host.include_router(create_router(resolve, key_login=True), prefix="/ui")
    with TestClient(host, base_url="https://testserver") as client:
        login = client.get("/ui/login")
        assert login.status_code == 200 and "Log out" not in login.text
        token = re.search(r'name="csrf" value="([0-9a-f]+)"', login.text)
        assert token is not None
        done = client.post("/ui/login", data={"key": "key-ana", "csrf": token.group(1), "next": "/ui/"})
        assert done.status_code == 200 and "Log out" in done.text
