"""Issue 34, finding 1: a build leaves every text the index holds embedded, so the first search of a new process (a
CLI call, a new service worker) embeds only its query, on SQLite and on PostgreSQL, and a build shows what it embeds."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_retrieve_fixtures import CountingEmbedder
from tmem import Memory
from tmem.settings import Settings

UPDATES = Path(__file__).resolve().parents[1] / "bench" / "data" / "updates.json"


def _settings(store_url: str, tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", database_url=store_url, llm="none")


def test_the_first_search_after_a_build_embeds_only_its_query(store_url: str, tmp_path: Path) -> None:
    building = CountingEmbedder()
    with Memory.open(settings=_settings(store_url, tmp_path), embedder=building) as mem:
        space = mem.import_file(UPDATES).spaces[0].space
        mem.build(space)
    assert building.texts, "the build embeds its texts"
    searching = CountingEmbedder()  # a new process: nothing held in memory, only what the store keeps
    with Memory.open(settings=_settings(store_url, tmp_path), embedder=searching) as mem:
        hits = mem.search(space, "Where does Dana work now?")
    assert hits
    assert len(searching.texts) == 1, searching.texts[:5]


def test_a_build_shows_what_it_embeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Memory.open(
        settings=_settings(f"sqlite:///{tmp_path / 'tmem.db'}", tmp_path), embedder=CountingEmbedder()
    ) as mem:
        space = mem.import_file(UPDATES).spaces[0].space
        mem.build(space, progress=True)
    err = capsys.readouterr().err
    assert f"index vectors {space}" in err and "text" in err
