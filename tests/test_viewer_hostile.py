"""Issue 20 (hostile run, round two) in the viewer: login CSRF, the ?done= note, forms without a token, local space
names with '/', erasing without confirmation, and `tmem ui --host 127.0.0.2`."""

from __future__ import annotations

import html
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.support.live_server import LiveServer
from tests.test_viewer import LLM_BUILT, SPACE, _chat, _text
from tmem import Memory, Settings
from tmem.cli.ui_cmds import local_viewer
from tmem.embed import HashEmbedder
from tmem.viewer import COOKIE, VISIT_COOKIE, ViewerScope, create_local_app, create_router

_TOKEN = re.compile(r'name="csrf" value="([0-9a-f]+)"')


def _token(client: TestClient, path: str) -> str:
    found = _TOKEN.search(client.get(path).text)
    assert found is not None
    return found.group(1)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[FastAPI]:
    mem = Memory.open(tmp_path, Settings(llm="none", embed_backend="hash"), embedder=HashEmbedder())
    mem.add_sessions("mallory/chat", _chat("Mallory's note"))
    mem.add_sessions("victim/chat", _chat("The victim's note"))
    keys = {"key-mallory": "mallory", "key-victim": "victim"}

    def resolve(key: str | None) -> ViewerScope | None:
        tenant = keys.get(key or "")
        return None if tenant is None else ViewerScope(mem, tenant=tenant)

    host = FastAPI()
    host.include_router(create_router(resolve, key_login=True), prefix="/ui")
    yield host
    mem.close()


def test_login_csrf_token_is_bound_to_each_visitor(served: FastAPI) -> None:
    """Medium 7: the attacker's login form token, posted cross-site by a victim's browser with the attacker's key,
    no longer logs the victim into the attacker's tenant."""
    with (
        TestClient(served, base_url="https://testserver") as attacker,
        TestClient(served, base_url="https://testserver") as victim,
    ):
        forged = _token(attacker, "/ui/login")
        assert attacker.cookies.get(VISIT_COOKIE)
        form = {"key": "key-mallory", "csrf": forged, "next": "/ui/"}
        # A cross-site POST: a SameSite=strict cookie is not sent, so the victim's browser sends none.
        r = victim.post("/ui/login", data=form, follow_redirects=False)
        assert r.status_code == 400 and COOKIE not in r.headers.get("set-cookie", "")
        # A victim who saw the login page before has a visit cookie of its own: the attacker's token still fails.
        own = _token(victim, "/ui/login")
        assert own != forged and victim.cookies.get(VISIT_COOKIE) != attacker.cookies.get(VISIT_COOKIE)
        r = victim.post("/ui/login", data=form, follow_redirects=False)
        assert r.status_code == 400 and COOKIE not in r.headers.get("set-cookie", "")
        ok = victim.post("/ui/login", data={**form, "key": "key-victim", "csrf": own}, follow_redirects=False)
        assert ok.status_code == 303 and f"{COOKIE}=key-victim" in ok.headers["set-cookie"]
        r = attacker.post("/ui/login", data=form, follow_redirects=False)  # the attacker's own form works for it
        assert r.status_code == 303


def test_a_form_without_its_token_gets_the_html_error_page(served: FastAPI) -> None:
    """Low: a missing csrf field was a JSON 422; it is the viewer's HTML error page like a wrong one."""
    with TestClient(served, base_url="https://testserver") as client:
        client.get("/ui/login")
        for path, data in (("/ui/login", {"key": "key-victim"}), ("/ui/logout", {})):
            r = client.post(path, data=data, follow_redirects=False)
            assert r.status_code == 400 and r.headers["content-type"].startswith("text/html"), r.text
            assert "another site" in html.unescape(r.text)


@pytest.fixture
def editable(tmp_path: Path) -> Iterator[tuple[TestClient, Memory]]:
    shutil.copy(LLM_BUILT, tmp_path / "tmem.db")
    mem = Memory.open(tmp_path, Settings(llm="none", embed_backend="hash"), embedder=HashEmbedder())
    mem.add_sessions("team/notes", _chat("A note of a local space named with a slash"))
    with TestClient(create_local_app(mem), base_url="http://127.0.0.1") as c:
        yield c, mem
    mem.close()


def test_done_shows_only_the_viewers_own_notes(editable: tuple[TestClient, Memory]) -> None:
    """Low: ?done= displayed any text as a status note."""
    client, mem = editable
    item = mem.export(SPACE).items[0]
    page = f"/ui/s/{SPACE}/items/{item.id}"
    spoofed = client.get(page, params={"done": "Your account is locked: call +1 555 0100"})
    assert spoofed.status_code == 200 and "555 0100" not in spoofed.text and 'role="status"' not in spoofed.text
    listing = client.get(f"/ui/s/{SPACE}/items", params={"done": "Send your key to evil.example"})
    assert "evil.example" not in listing.text
    known = client.get(page, params={"done": "corrected"})
    assert 'role="status"' in known.text and "Corrected" in known.text


def test_forget_and_delete_show_what_goes_and_ask_once(editable: tuple[TestClient, Memory]) -> None:
    """Low: one POST erased an item with its turns and other items ("3 items and 1 turns") without a word."""
    client, mem = editable
    records = mem.export(SPACE)
    item = next(i for i in records.items if i.turn_ids)
    others = [i for i in records.items if i.id != item.id and set(i.turn_ids) & set(item.turn_ids)]
    action = f"/ui/s/{SPACE}/items/{item.id}/forget"
    asked = client.post(action, data={"csrf": _token(client, f"/ui/s/{SPACE}/items/{item.id}")})
    assert asked.status_code == 200 and 'name="confirm" value="yes"' in asked.text
    shown = _text(html.unescape(asked.text))
    assert item.text in shown and all(t in shown for t in item.turn_ids)
    assert all(o.text in shown for o in others) and f"{len(others)} other item" in shown
    assert item.id in {i.id for i in mem.export(SPACE).items}  # nothing erased yet
    token = _TOKEN.search(asked.text)
    assert token is not None
    done = client.post(action, data={"csrf": token.group(1), "confirm": "yes"})
    assert done.status_code == 200 and "Forgotten" in done.text
    assert item.id not in {i.id for i in mem.export(SPACE).items}

    second = mem.export(SPACE).items[0]
    delete = f"/ui/s/{SPACE}/items/{second.id}/delete"
    asked = client.post(delete, data={"csrf": _token(client, f"/ui/s/{SPACE}/items/{second.id}")})
    assert asked.status_code == 200 and second.text in html.unescape(asked.text)
    assert second.id in {i.id for i in mem.export(SPACE).items}


def test_local_spaces_named_with_a_slash_are_listed_and_open(editable: tuple[TestClient, Memory]) -> None:
    """Low: `tmem ui` hid local spaces whose names contain '/'. Over a real server (uvicorn decodes a path once, as
    browsers expect; the test client decodes it twice)."""
    _, mem = editable
    with LiveServer(create_local_app(mem)) as server, httpx.Client(base_url=server.url) as client:
        listing = client.get("/ui/")
        assert "team/notes" in listing.text
        link = re.search(r'href="([^"]*team[^"]*notes[^"]*)"', listing.text)
        assert link is not None
        page = client.get(html.unescape(link.group(1)))
        assert page.status_code == 200 and "A note of a local space named with a slash" in page.text
        for tab in ("timeline", "items", "topics", "persona", "search"):
            linked = re.search(rf'href="([^"]*team[^"]*notes/{tab})"', page.text)
            assert linked is not None, tab
            assert client.get(html.unescape(linked.group(1))).status_code == 200, tab


def test_tmem_ui_answers_on_the_loopback_address_it_listens_on(tmp_path: Path) -> None:
    """Low: `tmem ui --host 127.0.0.2` started, then answered every request 400 "Invalid host header"."""
    with Memory.open(tmp_path, Settings(llm="none", embed_backend="hash"), embedder=HashEmbedder()) as mem:
        for host in ("127.0.0.2", "::1", "localhost"):
            shown = f"[{host}]" if ":" in host else host
            with TestClient(local_viewer(mem, host), base_url=f"http://{shown}:8777") as client:
                assert client.get("/ui/").status_code == 200, host
        with TestClient(local_viewer(mem, "127.0.0.2"), base_url="http://evil.example") as client:
            assert client.get("/ui/").status_code == 400  # DNS rebinding is still refused
