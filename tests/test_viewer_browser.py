"""The viewer in a real browser: Debian's Chromium, headless, driven by Playwright (never a downloaded browser).

One memory directory holds two real spaces: an extractive build (no LLM, the shipped MiniLM embedder) of the LoCoMo
conv-30 slice bundled for `tmem demo`, and a copy of the shipped LLM-built d26-plus memory, so that every trigger
family, connected items and the persona are on screen. `tmem ui`'s app is served by uvicorn on 127.0.0.1 (an
ephemeral port). Every page is loaded, a search is run from the form with the keyboard, the routes tables and the
context are checked, and any console error, page error, failed request or HTTP error fails the test. Screenshots go
to $TMEM_SCREENSHOTS (default: a temporary folder), printed at the end; they are artefacts, not compared.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from tests.support.data import SHARED_DATA
from tests.support.live_server import LiveServer
from tmem import Memory, Settings
from tmem.ingest.locomo import read_locomo
from tmem.viewer import create_local_app

CHROMIUM = Path("/usr/bin/chromium")
LLM_BUILT = SHARED_DATA / "llm-built" / "d26-plus.db"
EXTRACTIVE = "conv-30"
LLM_SPACE = "d26-plus"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium (apt install chromium)"
    ),
]
sync_api = pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("viewer-browser")
    shutil.copy(LLM_BUILT, home / "tmem.db")
    memory = Memory.open(home, Settings(llm="none"))
    data = json.loads(resources.files("tmem.eval").joinpath("data", "locomo_conv30_s1-5.json").read_text())
    conv = next(s for s in read_locomo(data, "bundled") if s.name == EXTRACTIVE)
    memory.add_sessions(EXTRACTIVE, conv.sessions[:3])
    memory.build(EXTRACTIVE)
    memory.add_sessions(EXTRACTIVE, conv.sessions[3:4])  # imported after the build: the space is stale
    with LiveServer(create_local_app(memory)) as server:
        yield server.url
    memory.close()


@pytest.fixture(scope="module")
def shots(request: pytest.FixtureRequest) -> Iterator[Path]:
    folder = Path(os.environ.get("TMEM_SCREENSHOTS") or Path(os.environ.get("TMPDIR", "/tmp")) / "tmem-viewer-shots")
    folder.mkdir(parents=True, exist_ok=True)
    yield folder
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"viewer screenshots: {folder} ({len(list(folder.glob('*.png')))} files)")


class Watched:
    """A page whose console errors, page errors, failed requests and HTTP errors are collected."""

    def __init__(self, page: Any) -> None:
        self.page = page
        page.set_default_timeout(180_000)  # the first search loads the embedding model on a busy machine
        self.problems: list[str] = []
        page.on("console", lambda m: self.problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        page.on("requestfailed", self._failed)
        page.on("response", lambda r: self.problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)

    def _failed(self, request: Any) -> None:
        # net::ERR_ABORTED is a request the browser cancelled because the test navigated on (a favicon still loading
        # on a busy machine): not a fault of the page
        if "ERR_ABORTED" not in str(request.failure):
            self.problems.append(f"request failed: {request.url} {request.failure}")

    def goto(self, url: str) -> None:
        response = self.page.goto(url)
        assert response is not None and response.ok, url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    watched = Watched(context.new_page())
    yield watched
    context.close()
    assert watched.problems == [], watched.problems


def test_every_page_loads_clean(base_url: str, page: Watched, shots: Path) -> None:
    p = page.page
    page.goto(f"{base_url}/ui/")
    assert p.get_by_role("heading", name="Spaces", level=1).is_visible()
    row = p.get_by_role("row").filter(has_text=EXTRACTIVE)
    assert "descriptive only" in row.inner_text() and "stale" in row.inner_text()
    assert "LLM" in p.get_by_role("row").filter(has_text=LLM_SPACE).inner_text()
    p.screenshot(path=shots / "spaces.png")
    for space in (EXTRACTIVE, LLM_SPACE):
        for tab, path in [("Overview", ""), ("Timeline", "/timeline"), ("Topics", "/topics"), ("Items", "/items")]:
            page.goto(f"{base_url}/ui/s/{space}{path}")
            current = p.get_by_role("navigation", name="Space").locator('[aria-current="page"]')
            assert current.inner_text() == tab
            assert p.locator("main h2").first.is_visible()
            p.screenshot(path=shots / f"{space}-{tab.lower()}.png", full_page=tab == "Overview")
        page.goto(f"{base_url}/ui/s/{space}/persona")
        p.screenshot(path=shots / f"{space}-persona.png")
    # the extractive space says what it lacks, and that it is stale
    page.goto(f"{base_url}/ui/s/{EXTRACTIVE}")
    assert p.locator(".badge.descriptive").first.is_visible() and p.locator(".badge.stale").first.is_visible()
    assert "not built yet" in p.locator("main").inner_text()
    page.goto(f"{base_url}/ui/s/{EXTRACTIVE}/timeline")
    unbuilt = p.locator("section:has(#h-unbuilt)")
    unbuilt.locator("summary").click()
    assert unbuilt.locator("ol.turns li").count() == 19  # session 4, imported after the build
    page.goto(f"{base_url}/ui/s/{EXTRACTIVE}/persona")
    assert "built without an LLM" in p.locator("main").inner_text()


def test_timeline_items_and_persona_of_the_llm_built_space(base_url: str, page: Watched, shots: Path) -> None:
    p = page.page
    page.goto(f"{base_url}/ui/s/{LLM_SPACE}/timeline")
    first = p.locator("article.scene").first
    turns = first.locator("details", has_text="Raw turns")
    assert not turns.locator("ol.turns").is_visible()
    turns.locator("summary").focus()
    p.keyboard.press("Enter")  # opens without a mouse
    assert turns.locator("ol.turns li").first.is_visible()
    scene_triggers = first.locator("details", has_text="Scene triggers")
    scene_triggers.locator("summary").focus()
    p.keyboard.press(" ")
    assert scene_triggers.locator(".family.fam-scene").is_visible()
    assert scene_triggers.locator(".family.fam-horizon").is_visible()
    p.screenshot(path=shots / "timeline-open.png")
    page.goto(f"{base_url}/ui/s/{LLM_SPACE}/items?kind=connected")
    card = p.locator("article.item").first
    card.locator("details.triggers summary").click()
    assert card.locator(".family.fam-entity").is_visible() and card.locator(".family.fam-bridge").is_visible()
    assert card.locator(".chip.kind-connected").is_visible()
    p.locator("article.item").last.locator(".item-text a").click()  # an item the search test does not need
    assert p.get_by_role("heading", name="History").is_visible()
    assert p.locator("fieldset[disabled]").count() == 0
    p.get_by_label("Corrected text").fill("Melanie and Caroline both value honest talk (corrected by hand).")
    p.get_by_role("button", name="Save correction").press("Enter")
    p.wait_for_selector("p.note[role=status]")
    assert "Corrected" in p.locator("p.note[role=status]").inner_text()
    history = p.locator("section:has(#h-history) tbody tr")
    assert history.count() == 2 and "edited" in history.nth(1).inner_text()
    assert "(corrected by hand)" in p.locator("article.item .item-text").inner_text()
    p.screenshot(path=shots / "item.png", full_page=True)
    page.goto(f"{base_url}/ui/s/{LLM_SPACE}/persona")
    cites = p.locator("ul.traits details").first
    cites.locator("summary").click()
    cites.locator("a").first.click()
    assert "/items/" in p.url


def test_why_recalled_by_keyboard(base_url: str, page: Watched, shots: Path) -> None:
    p = page.page
    page.goto(f"{base_url}/ui/s/{LLM_SPACE}/search")
    # a situation a Bridge view of Caroline's identity-theft item rehearses, in none of the item's words (the gate of
    # `minilm` is 0.6 of MiniLM)
    p.get_by_label("Query").fill(
        "Caroline got a phone call asking her to confirm her bank account number and birth date."
    )
    p.get_by_label("Preset").select_option("minilm")
    p.get_by_label("Token budget").fill("1500")
    p.get_by_label("PS: persona").check()
    p.get_by_label("Query").press("Enter")
    p.wait_for_selector("#h-context")
    main = p.locator("main").inner_text()
    assert "Preset minilm without PS" in main
    assert p.locator("ol.topic-list li").count() >= 1  # surviving topics
    first_scene = p.locator("section:has(#h-scenes) article.hit").first
    assert "identity" in first_scene.inner_text().lower() or "credit" in first_scene.inner_text().lower()
    routes = first_scene.locator("table.routes tbody tr")
    assert routes.count() >= 2
    names = [routes.nth(i).locator("td").first.inner_text() for i in range(routes.count())]
    assert all(n.startswith("scene.") for n in names)
    for i in range(routes.count()):
        cells = routes.nth(i).locator("td")
        assert int(cells.nth(1).inner_text()) >= 1 and re.fullmatch(r"-?\d+\.\d{4}", cells.nth(2).inner_text())
    folded = p.locator("section:has(#h-items) details.more summary")  # hits past the fifth are folded: open them
    if folded.count():
        folded.first.focus()
        p.keyboard.press("Enter")
    item_routes = p.locator("section:has(#h-items) table.routes tbody tr td:first-child").all_inner_texts()
    assert any(r == "item.trigger" for r in item_routes)  # a trigger route reached an item
    tokens = p.locator("#context-tokens").inner_text()
    match = re.match(r"([\d,]+) tokens \(evidence ([\d,]+), persona 0\) · budget 1,500 · (\d+) hits entered", tokens)
    assert match, tokens
    assert int(match.group(1).replace(",", "")) <= 1500 and int(match.group(3)) >= 1
    context = p.locator("pre.context").inner_text()
    assert context.startswith("Facts:") and "\nScene (" in context and "Persona notes" not in context
    assert "credit" in context
    entered = p.locator("section:has(#h-context) details")
    entered.locator("summary").click()
    assert entered.locator("tbody tr").count() == int(match.group(3))
    p.screenshot(path=shots / "search.png", full_page=True)
    # the extractive space says what cannot recall there
    page.goto(f"{base_url}/ui/s/{EXTRACTIVE}/search?q=dance+studio+flooring")
    assert "Descriptive only" in p.locator("main").inner_text()
    assert p.locator("table.routes").count() >= 1


def test_keyboard_reaches_content_and_missing_pages_say_so(base_url: str, browser: Any) -> None:
    context = browser.new_context()
    watched = Watched(context.new_page())
    p = watched.page
    p.goto(f"{base_url}/ui/s/{LLM_SPACE}")
    p.keyboard.press("Tab")
    assert p.evaluate("document.activeElement.textContent") == "Skip to content"
    p.keyboard.press("Enter")
    assert p.evaluate("document.activeElement.id") == "main"
    missing = p.goto(f"{base_url}/ui/s/no-such-space")
    assert missing is not None and missing.status == 404
    assert "Known spaces" in p.locator("main").inner_text()
    # the guard the other tests rely on saw it twice: as an HTTP error and as the console's error
    assert f"HTTP 404: {base_url}/ui/s/no-such-space" in watched.problems
    assert any(p.startswith("console error:") for p in watched.problems) and len(watched.problems) == 2
    context.close()
