"""The viewer's routes over HTTP (no browser): pages of a shipped LLM-built memory, tenant scoping and the key login
the service uses, anti-forgery tokens, error pages and the `tmem ui` command's refusals. The browser tests are in
test_viewer_browser.py."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.support.data import SHARED_DATA
from tmem import Memory, Settings
from tmem.cli.main import cli
from tmem.embed import HashEmbedder
from tmem.models import Item, ItemKind, SessionInput, TurnInput
from tmem.viewer import COOKIE, VISIT_COOKIE, JobView, ViewerScope, create_local_app, create_router
from tmem.viewer.pages import ItemFilter, Pager, Records, date_label, items, personas, timeline
from tmem.viewer.recall import SearchForm

LLM_BUILT = SHARED_DATA / "llm-built" / "d26-plus.db"
SPACE = "d26-plus"


@pytest.fixture(scope="module")
def llm_memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    home = tmp_path_factory.mktemp("viewer-llm")
    shutil.copy(LLM_BUILT, home / "tmem.db")  # a copy: the shipped file stays untouched
    mem = Memory.open(home, Settings(llm="none", embed_backend="hash"), embedder=HashEmbedder())
    yield mem
    mem.close()


@pytest.fixture(scope="module")
def client(llm_memory: Memory) -> Iterator[TestClient]:
    with TestClient(create_local_app(llm_memory), base_url="http://127.0.0.1") as c:
        yield c


def _text(page: str) -> str:
    """The page's text as a reader sees it: tags dropped, entities (&#39; for an apostrophe) decoded."""
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def test_every_page_of_an_llm_built_space(client: TestClient, llm_memory: Memory) -> None:
    export = llm_memory.export(SPACE)
    cost = llm_memory.cost(SPACE)
    spaces = client.get("/ui/")
    assert spaces.status_code == 200 and f'href="http://127.0.0.1/ui/s/{SPACE}"' in spaces.text
    assert f"{cost.total.input_tokens:,} / {cost.total.output_tokens:,}" in _text(spaces.text)
    overview = client.get(f"/ui/s/{SPACE}")
    assert overview.status_code == 200
    text = _text(overview.text)
    assert f"{cost.total.input_tokens:,}" in text and f"{cost.total.output_tokens:,}" in text  # cost per stage
    assert all(stage.stage in text for stage in cost.stages)
    assert "built with an LLM" in text and "descriptive only" not in text
    assert "no jobs are recorded" in text
    timeline_html = client.get(f"/ui/s/{SPACE}/timeline").text
    for scene in export.scenes:
        assert f'id="scene-{scene.id}"' in timeline_html
    assert all(f'id="t-{t.id.replace(":", "%3A")}"' in timeline_html for t in export.turns)  # every raw turn
    assert "horizon" in timeline_html and "situation" in timeline_html  # scene-hosted families
    topics_html = client.get(f"/ui/s/{SPACE}/topics").text
    assert all(t.label.replace("'", "&#39;") in topics_html for t in export.topics)
    persona_html = client.get(f"/ui/s/{SPACE}/persona").text
    trait = export.personas[0].traits[0]
    assert trait.value in persona_html and f"/items/{trait.item_ids[0]}" in persona_html


def test_items_page_filters_and_pages(client: TestClient, llm_memory: Memory) -> None:
    export = llm_memory.export(SPACE)
    page1 = client.get(f"/ui/s/{SPACE}/items")
    assert f"{len(export.items)} of {len(export.items)} items; showing 1–40" in _text(page1.text)
    assert 'aria-current="page">1<' in page1.text
    last = -(-len(export.items) // 40)
    tail = client.get(f"/ui/s/{SPACE}/items", params={"page": last})
    assert f"showing {40 * (last - 1) + 1}–{len(export.items)}" in _text(tail.text)
    connected = client.get(f"/ui/s/{SPACE}/items", params={"kind": "connected", "family": "bridge"})
    n = sum(1 for i in export.items if i.kind.value == "connected")
    assert f"{n} of {len(export.items)} items" in _text(connected.text)
    assert 'class="pager"' not in connected.text  # one page: no page links
    caroline = client.get(f"/ui/s/{SPACE}/items", params={"speaker": "Caroline"})
    assert sum(1 for i in export.items if i.speaker == "Caroline") > 40
    assert "speaker=Caroline&amp;page=2" in caroline.text  # page links keep the filters


def test_item_page_shows_triggers_by_family_history_and_edit_forms(client: TestClient, llm_memory: Memory) -> None:
    export = llm_memory.export(SPACE)
    item = next(i for i in export.items if i.kind.value == "connected")
    html = client.get(f"/ui/s/{SPACE}/items/{item.id}").text
    assert "Entity (Q I" in html and "Bridge (Q II" in html
    bridge = next(t for t in export.triggers if t.host_id == item.id and t.family.value == "bridge")
    assert bridge.views[0].text.replace("'", "&#39;") in html
    assert all(f">{tid}</a>" in html for tid in item.turn_ids)  # source turns
    assert "<fieldset disabled" not in html and html.count('name="csrf"') == 3
    assert "at the build" in html  # version 0 of the history: the extracted text
    missing = client.get(f"/ui/s/{SPACE}/items/i_nope")
    assert missing.status_code == 404 and "No item" in missing.text


@pytest.fixture
def editable(tmp_path: Path) -> Iterator[tuple[TestClient, Memory]]:
    shutil.copy(LLM_BUILT, tmp_path / "tmem.db")
    mem = Memory.open(tmp_path, Settings(llm="none", embed_backend="hash"), embedder=HashEmbedder())
    with TestClient(create_local_app(mem), base_url="http://127.0.0.1") as c:
        yield c, mem
    mem.close()


def _token(client: TestClient, path: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', client.get(path).text)
    assert found is not None
    return found.group(1)


def test_correct_delete_and_forget_through_the_forms(editable: tuple[TestClient, Memory]) -> None:
    client, mem = editable
    items = mem.export(SPACE).items
    first, second, third = items[0], items[1], next(i for i in items[2:] if i.turn_ids)
    page = f"/ui/s/{SPACE}/items/{first.id}"
    forged = client.post(f"{page}/delete", data={"csrf": "forged"})
    assert forged.status_code == 400 and "came from another site" in forged.text
    assert mem.get_item(SPACE, first.id).text == first.text  # nothing changed
    empty = client.post(f"{page}/correct", data={"csrf": _token(client, page), "text": "  "})
    assert empty.status_code == 400 and "empty" in empty.text
    fixed = client.post(f"{page}/correct", data={"csrf": _token(client, page), "text": "Caroline never had a dog."})
    assert fixed.status_code == 200 and fixed.url.path == page and "Corrected" in fixed.text
    assert mem.get_item(SPACE, first.id).text == "Caroline never had a dog."
    history = _text(fixed.text)
    assert first.text in history and "Caroline never had a dog." in history and "edited" in history
    confirmed = {"confirm": "yes"}  # the confirmation step itself: tests/test_viewer_hostile.py
    gone = client.post(f"/ui/s/{SPACE}/items/{second.id}/delete", data={"csrf": _token(client, page), **confirmed})
    assert gone.status_code == 200 and gone.url.path == f"/ui/s/{SPACE}/items" and "Deleted the item" in gone.text
    assert client.get(f"/ui/s/{SPACE}/items/{second.id}").status_code == 404
    turns = set(third.turn_ids)
    forgot = client.post(f"/ui/s/{SPACE}/items/{third.id}/forget", data={"csrf": _token(client, page), **confirmed})
    assert forgot.status_code == 200 and "Forgotten" in forgot.text
    assert turns.isdisjoint(t.id for t in mem.export(SPACE).turns)  # its source turns are gone too
    assert third.id not in {i.id for i in mem.export(SPACE).items}


def test_search_page_shows_cascade_gate_and_context(client: TestClient) -> None:
    params = {"q": "What is Caroline studying for?", "preset": "paper", "max_tokens": "300", "without": ["PS"]}
    page = client.get(f"/ui/s/{SPACE}/search", params=params)
    assert page.status_code == 200
    text = _text(page.text)
    assert "Preset paper without PS" in text and "Stage 1 · surviving topics" in text
    assert "<code>scene.bm25</code>" in page.text and "Fell under the gate" in text
    used = re.search(r"([\d,]+) tokens \(evidence [\d,]+, persona 0\) · budget 300", text)
    assert used and int(used.group(1).replace(",", "")) <= 300  # packed within the budget (Memory.context)
    assert 'name="without" value="PS" checked' in page.text
    bad = client.get(f"/ui/s/{SPACE}/search", params={"q": "x", "preset": "nope"})
    assert bad.status_code == 400 and "Unknown preset" in bad.text
    bad_budget = client.get(f"/ui/s/{SPACE}/search", params={"q": "x", "max_tokens": "lots"})
    assert bad_budget.status_code == 400 and "whole number" in bad_budget.text
    for order in ("rank", "date"):  # the context layout's order (docs/context.md), kept in the form
        laid = client.get(f"/ui/s/{SPACE}/search", params={**params, "order": order})
        assert laid.status_code == 200 and f'<option value="{order}" selected>' in laid.text
    assert '<option value="" selected>' in page.text  # none asked: the recipe's
    bad_order = client.get(f"/ui/s/{SPACE}/search", params={"q": "x", "order": "sideways"})
    assert bad_order.status_code == 400 and "Unknown context order" in bad_order.text


def test_search_page_lays_the_context_out_as_asked(client: TestClient, llm_memory: Memory) -> None:
    query, layout = "What is Caroline studying for?", '{"scene_titles": true, "context_k0": 5}'
    page = client.get(f"/ui/s/{SPACE}/search", params={"q": query, "max_tokens": "400", "layout": layout})
    assert page.status_code == 200
    text = _text(page.text)
    assert (
        "Layout: RRF k0 5" in text
        and "blocks under scene titles" in text
        and "(set here: context_k0, scene_titles)" in text
    )
    expected = llm_memory.context(SPACE, query, 400, layout={"scene_titles": True, "context_k0": 5})
    assert expected.text.splitlines()[0] in page.text  # the context Memory.context gives for the same layout
    plain = _text(client.get(f"/ui/s/{SPACE}/search", params={"q": query, "max_tokens": "400"}).text)
    assert "Layout: RRF k0 3" in plain and "blocks under session dates" in plain  # the associative recipe's
    for bad, says in (("[1]", "JSON object"), ('{"context_k0": -2}', "context_k0"), ('{"kS": 2}', "kS")):
        answer = client.get(f"/ui/s/{SPACE}/search", params={"q": query, "layout": bad})
        assert answer.status_code == 400 and says in answer.text, bad


def test_responses_forbid_outside_resources_and_unknown_hosts(client: TestClient, llm_memory: Memory) -> None:
    page = client.get("/ui/")
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "style-src 'self'" in csp and "script-src" not in csp
    assert "http" not in re.sub(r'(href|action)="http://127\.0\.0\.1/[^"]*"', "", page.text)  # no outside URL
    css = client.get("/ui/static/viewer.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert "@import" not in css.text and "url(" not in css.text
    assert client.get("/ui/static/secrets.txt").status_code == 404
    with TestClient(create_local_app(llm_memory), base_url="http://evil.example") as rebinding:
        assert rebinding.get("/ui/").status_code == 400  # only loopback host names are answered


# ------------------------------------------------------------------ the service's way: tenants, keys, cookie


def _chat(text: str) -> list[SessionInput]:
    return [
        SessionInput(
            id="s1",
            started_at=datetime(2024, 3, 1, 9, 0),
            turns=[TurnInput(id="t1", speaker="Ana", text=text), TurnInput(id="t2", speaker="Bo", text="Noted.")],
        )
    ]


@pytest.fixture
def tenants(tmp_path: Path) -> Iterator[TestClient]:
    mem = Memory.open(tmp_path, Settings(llm="none", embed_backend="hash"), embedder=HashEmbedder())
    mem.add_sessions("alice/chat", _chat("Alice's private note"))
    mem.add_sessions("bob/chat", _chat("Bob's private note"))
    mem.add_sessions("local", _chat("A local-tenant note"))
    keys = {"key-alice": "alice", "key-bob": "bob"}
    jobs = [JobView(id="j1", state="running", stage="building", fraction=0.75, note="items of 3 scenes")]

    def resolve(key: str | None) -> ViewerScope | None:
        tenant = keys.get(key or "")
        if tenant is None:
            return None
        return ViewerScope(mem, tenant=tenant, jobs=lambda space: jobs)

    host = FastAPI()
    host.include_router(create_router(resolve, key_login=True), prefix="/ui")
    with TestClient(host, base_url="https://testserver") as c:
        yield c
    mem.close()


def test_key_login_sets_a_strict_cookie_and_scopes_to_the_tenant(tenants: TestClient) -> None:
    first = tenants.get("/ui/s/chat", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"].endswith("/ui/login?next=%2Fui%2Fs%2Fchat")
    form = tenants.get(first.headers["location"]).text
    token = re.search(r'name="csrf" value="([0-9a-f]+)"', form)
    assert token is not None and 'type="password"' in form
    wrong = tenants.post("/ui/login", data={"key": "nope", "csrf": token.group(1), "next": "/ui/s/chat"})
    assert wrong.status_code == 401 and "not accepted" in wrong.text
    ok = tenants.post(
        "/ui/login", data={"key": "key-alice", "csrf": token.group(1), "next": "/ui/s/chat"}, follow_redirects=False
    )
    assert ok.status_code == 303 and ok.headers["location"] == "/ui/s/chat"
    cookie = ok.headers["set-cookie"]
    assert f"{COOKIE}=key-alice" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert "Secure" in cookie and "Path=/ui/" in cookie
    page = tenants.get("/ui/s/chat")
    assert page.status_code == 200 and "tenant alice" in page.text
    assert "not built" in page.text and '<progress max="100" value="75"' in page.text  # the job's progress
    assert "items of 3 scenes" in page.text and "building" in page.text
    listing = _text(tenants.get("/ui/").text)
    assert "chat" in listing and "bob" not in listing and "local" not in listing
    timeline_html = tenants.get("/ui/s/chat/timeline").text
    assert "No scenes yet" in timeline_html


def test_bearer_key_and_other_tenants_spaces_are_missing(tenants: TestClient) -> None:
    bob = {"Authorization": "Bearer key-bob"}
    assert "Bob" in tenants.get("/ui/s/chat", headers=bob).text
    assert tenants.get("/ui/s/alice%2Fchat", headers=bob).status_code == 404
    assert tenants.get("/ui/s/local", headers=bob).status_code == 404
    for path in ("/ui/s/nope", "/ui/s/nope/items/i_x", "/ui/s/nope/search?q=x", "/ui/s/chat/items/i_x"):
        missing = tenants.get(path, headers=bob)
        assert missing.status_code == 404 and "alice" not in missing.text and "bob/" not in missing.text, path
    assert "Known spaces: chat." in tenants.get("/ui/s/nope", headers=bob).text  # only bob's own
    redirect = tenants.post("/ui/login", data={"key": "key-bob", "csrf": "x", "next": "//evil.example/"})
    assert redirect.status_code == 400  # forged form refused before anything else


def test_login_only_sends_back_to_viewer_paths(tenants: TestClient) -> None:
    form = tenants.get("/ui/login").text
    token = re.search(r'name="csrf" value="([0-9a-f]+)"', form)
    assert token is not None
    for target in ("//evil.example/ui/", "https://evil.example/", "/elsewhere"):
        visit = tenants.cookies.get(VISIT_COOKIE)  # the form's token is this visitor's, for a request without a key
        tenants.cookies.clear()
        tenants.cookies.set(VISIT_COOKIE, visit or "")
        r = tenants.post("/ui/login", data={"key": "key-bob", "csrf": token.group(1), "next": target})
        assert r.status_code == 200 and r.url.path == "/ui/"


# ------------------------------------------------------------------ pieces


def test_page_models_on_the_llm_built_space(llm_memory: Memory) -> None:
    records = Records(llm_memory.export(SPACE))
    days = timeline(records)
    starts = [sv.scene.start for d in days for sv in d.scenes]
    assert starts == sorted(starts) and sum(len(d.scenes) for d in days) == len(records.export.scenes)
    assert {fam for d in days for sv in d.scenes for fam in sv.triggers} == {"scene", "horizon"}
    views = items(records, ItemFilter())
    assert {fam for v in views for fam in v.triggers} == {"entity", "bridge"}
    assert any(v.cited_by for v in views)
    cited = {iid for p in records.export.personas for t in p.traits for iid in t.item_ids}
    assert {v.item.id for v in views if v.cited_by} == cited & set(records.item)
    assert [p.speaker for p in personas(records)] == [p.speaker for p in records.export.personas]
    assert items(records, ItemFilter(q=views[0].item.id))[0].item.id == views[0].item.id


@pytest.mark.parametrize(
    ("count", "page", "expected"), [(0, 1, (1, 1, 0, 0)), (95, 3, (3, 3, 80, 95)), (95, 9, (3, 3, 80, 95))]
)
def test_pager(count: int, page: int, expected: tuple[int, int, int, int]) -> None:
    p = Pager.of(count, page, 40)
    assert (p.page, p.pages, p.start, p.stop) == expected


def test_search_form_validation() -> None:
    form = SearchForm.parse(" q ", "", ["HT", "SL"], "", "auto")
    assert (form.query, form.preset, form.without, form.max_tokens) == ("q", "auto", ("SL", "HT"), 2000)
    assert form.config().disabled == frozenset({"SL", "HT"})
    with pytest.raises(Exception, match="Unknown switch XX"):
        SearchForm.parse("q", "auto", ["XX"], "", "auto")
    with pytest.raises(Exception, match="between 0 and"):
        SearchForm.parse("q", "auto", [], "-1", "auto")


def test_ui_command_serves_the_viewer_on_loopback(tmp_path: Path) -> None:
    mem = Memory.open(tmp_path, Settings(llm="none", embed_backend="hash"), embedder=HashEmbedder())
    mem.add_sessions("notes", _chat("A note to find in the browser"))
    mem.close()
    code = "from tmem.cli.main import main; main()"
    args = [sys.executable, "-c", code, "--dir", str(tmp_path), "ui", "--port", "0"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/ui/", line)
        assert match, line + (proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
        url = match.group(0)
        deadline = time.monotonic() + 60
        while True:
            try:
                page = httpx.get(url + "s/notes/timeline", timeout=5)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.2)
        assert page.status_code == 200 and "A note to find in the browser" in page.text  # a turn not built yet
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_ui_command_refuses_a_non_loopback_host(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--dir", str(tmp_path), "ui", "--host", "0.0.0.0"])
    assert result.exit_code != 0
    assert "loopback" in str(result.exception) and "tmem serve" in str(result.exception)


def test_any_space_name_and_turn_text_round_trip(tmp_path: Path) -> None:
    mem = Memory.open(tmp_path, Settings(llm="none", embed_backend="hash"), embedder=HashEmbedder())
    name = "my notes é#?%"
    mem.add_sessions(name, _chat("<script>alert(1)</script> & more"))
    with TestClient(create_local_app(mem), base_url="http://127.0.0.1") as c:
        listing = c.get("/ui/").text
        link = re.search(r'href="(http://127\.0\.0\.1/ui/s/[^"]+)"', listing)
        # encoded twice (a server decodes once before routing, so a '/' in a name stays in one segment)
        assert link is not None and link.group(1).endswith("/ui/s/my%2520notes%2520%25C3%25A9%2523%253F%2525")
        for tab in ("", "/timeline", "/topics", "/items", "/persona", "/search?q=note"):
            page = c.get(link.group(1) + tab)
            assert page.status_code == 200, tab
            assert "<script>" not in page.text
        unbuilt = c.get(link.group(1) + "/search?q=note").text  # not built: said, and searched as raw turns
        assert "no memory built yet" in unbuilt and "Raw turn hits" in unbuilt and "turn.unbuilt.dense" in unbuilt
        timeline_html = c.get(link.group(1) + "/timeline").text
        assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in timeline_html
    mem.close()


def test_item_date_label() -> None:
    item = Item(id="i", text="t", kind=ItemKind.ATOMIC, scene_ids=["s"], date="2023-05-08")
    assert date_label(item) == "2023-05-08"
    assert date_label(item.model_copy(update={"date": None})) == "undated"
    month = item.model_copy(update={"date": "2023-05-01", "date_end": "2023-05-31", "date_precision": "month"})
    assert date_label(month) == "2023-05-01 – 2023-05-31 (month)"


def test_why_recalled_tables_hold_every_hit_of_its_context(llm_memory: Memory) -> None:
    """The route tables come from the search the budgeted context was packed from (as deep as the budget), so every
    scene and item in the context has its row with its routes."""
    from tmem.viewer.recall import recall

    form = SearchForm.parse("It feels strange to finally call this place mine.", "auto", [], "1000", "auto")
    found = recall(llm_memory, "d26-plus", form)
    rows = {h.scene.id for h in found.result.scenes} | {h.item.id for h in found.result.items}
    packed = {h.id for h in found.context.hits if h.kind != "turn"}
    assert packed and packed <= rows
