"""Search on a LoCoMo dev conversation built in extractive mode, through the Python API and `tmem search`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.data import DEV_LOCOMO
from tests.test_retrieve_fixtures import CountingEmbedder
from tmem.cli.main import cli
from tmem.construct.extractive import build_extractive
from tmem.embed.hashing import HashEmbedder
from tmem.ingest.importer import import_spaces
from tmem.ingest.reader import read_file
from tmem.retrieve.cascade import Retriever
from tmem.retrieve.config import RetrievalConfig
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore

DEV = DEV_LOCOMO
if not DEV.exists():  # the shared checkout keeps the data beside the repository
    DEV = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo10.dev.json"
SPACE = "conv-26"
QUESTION = "When did Caroline go to the LGBTQ support group?"  # gold evidence D1:3


def _build(store: SQLiteStore) -> None:
    conv = next(s for s in read_file(DEV) if s.name == SPACE)
    import_spaces(store, [conv.model_copy(update={"sessions": conv.sessions[:4]})], source=str(DEV))
    asyncio.run(build_extractive(store, Scope.local(SPACE), embedder=HashEmbedder()))


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    store = SQLiteStore.open(home / "tmem.db")
    try:
        _build(store)
    finally:
        store.close()
    return home


def test_extractive_space_search(db: Path) -> None:
    store = SQLiteStore.open(db / "tmem.db")
    try:
        emb = CountingEmbedder()
        res = Retriever(store, emb).search(Scope.local(SPACE), QUESTION, RetrievalConfig.preset("paper"))
        assert res.descriptive_only and res.personas == []
        assert 0 < len(res.scenes) <= 5 and 0 < len(res.items) <= 15
        assert "D1:3" in res.turn_ids()
        assert "D1:3" in res.items[0].source_turn_ids or "D1:3" in res.items[1].source_turn_ids
        assert not any(r.name.startswith("scene.trigger") for h in res.scenes for r in h.routes)
        # the query is embedded once, without the speaker it names (tmem.retrieve.speakers)
        asked = "When did go to the LGBTQ support group?"
        assert emb.texts[-1] == asked and emb.texts.count(asked) == 1
    finally:
        store.close()


def test_cli_search_text_explain_and_json(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMEM_EMBED_BACKEND", "hash")
    runner = CliRunner()
    out = runner.invoke(cli, ["--dir", str(db), "search", SPACE, QUESTION, "--explain", "--k-scenes", "2"])
    assert out.exit_code == 0, out.output
    assert "descriptive only" in out.output and "Scenes (2):" in out.output
    assert "via scene." in out.output and "D1:3" in out.output

    out = runner.invoke(cli, ["--dir", str(db), "search", SPACE, QUESTION, "--json", "--without", "IC"])
    assert out.exit_code == 0, out.output
    payload = json.loads(out.output)
    assert payload["items"] == [] and payload["disabled"] == ["IC"] and payload["descriptive_only"] is True
    assert payload["scenes"][0]["routes"][0]["rank"] >= 1


def test_cli_search_errors_are_one_line(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMEM_EMBED_BACKEND", "hash")
    runner = CliRunner()
    out = runner.invoke(cli, ["--dir", str(db), "search", "no-such-space", "hi"])
    assert out.exit_code != 0 and "no-such-space" in str(out.exception)
    out = runner.invoke(cli, ["--dir", str(db), "search", SPACE, "hi", "--preset", "bogus"])
    assert out.exit_code != 0 and "Unknown retrieval preset" in str(out.exception)
