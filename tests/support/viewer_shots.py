"""The README's viewer screenshots, reproducibly: ``python -m tests.support.viewer_shots docs/img``.

Serves `tmem ui`'s app over a copy of the shipped LLM-built d26-plus memory and photographs the timeline and the
"why recalled" page with headless Debian Chromium (/usr/bin/chromium).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from PIL import Image
from playwright.sync_api import sync_playwright

from tests.support.data import SHARED_DATA
from tests.support.live_server import LiveServer
from tmem import Memory, Settings
from tmem.viewer import create_local_app

QUERY = "Why does Caroline freeze her credit reports?"


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as home:
        shutil.copy(SHARED_DATA / "llm-built" / "d26-plus.db", Path(home) / "tmem.db")
        memory = Memory.open(home, Settings(llm="none"))
        with LiveServer(create_local_app(memory)) as server, sync_playwright() as p:
            base = server.url
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True)
            page = browser.new_page(viewport={"width": 1100, "height": 1000})
            page.set_default_timeout(180_000)  # the first search loads the embedding model
            page.goto(f"{base}/ui/s/d26-plus/timeline")
            scene = page.locator("article.scene").first
            for label in ("Raw turns", "Scene triggers"):
                scene.locator("details", has_text=label).locator("summary").click()
            page.screenshot(path=out / "viewer-timeline.png")
            page.goto(f"{base}/ui/s/d26-plus/search?q={QUERY.replace(' ', '+')}&preset=minilm&max_tokens=1500")
            page.evaluate("document.querySelector('main h2').scrollIntoView()")
            page.screenshot(path=out / "viewer-why-recalled.png")
            browser.close()
        memory.close()
    for name in ("viewer-timeline.png", "viewer-why-recalled.png"):  # 256 colours: a third of the bytes, same look
        Image.open(out / name).quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(out / name, optimize=True)
    print(f"wrote {out}/viewer-timeline.png and {out}/viewer-why-recalled.png")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/img"))
