"""The public surface (pinned) and the Memory facade end to end on a real dev conversation, offline."""

from __future__ import annotations

from pathlib import Path

import pytest

import tmem
from tests.support.data import locomo_slice
from tmem import InputError, Memory, NotFoundError, Settings
from tmem.embed import HashEmbedder

PUBLIC = {
    "Answer",
    "AsyncMemory",
    "BuildBusy",
    "ForgetReport",
    "ItemHistory",
    "MessageInput",
    "MessagesReport",
    "Staleness",
    "BatchPending",
    "BuildError",
    "BuildOptions",
    "BuildReport",
    "ConfigError",
    "ContextLayout",
    "EmbeddingError",
    "InputError",
    "IntegrityError",
    "Item",
    "ItemHit",
    "LLMError",
    "LLMOutputError",
    "LLMTransientError",
    "Memory",
    "NotFoundError",
    "Persona",
    "QuestionTime",
    "RetrievalConfig",
    "Route",
    "Scene",
    "SceneHit",
    "SearchResult",
    "SessionInput",
    "Settings",
    "SpaceExport",
    "StoreError",
    "Topic",
    "TmemError",
    "Trigger",
    "TurnInput",
    "__version__",
}


def test_public_api_is_pinned() -> None:
    assert set(tmem.__all__) == PUBLIC
    for name in PUBLIC:
        assert hasattr(tmem, name)
    assert all(issubclass(getattr(tmem, n), tmem.TmemError) for n in PUBLIC if n.endswith("Error"))


def test_memory_end_to_end_extractive(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "mem", llm="none")
    with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        report = mem.import_file(locomo_slice(tmp_path / "slice.json", sessions=3))
        (space,) = [s.name for s in mem.spaces()]
        assert mem.spaces()[0].build_state == "not built"
        built = mem.build(space)
        assert built.descriptive_only and built.counts["scenes"] > 0
        assert mem.spaces()[0].build_state == "built"
        result = mem.search(space, "LGBTQ support group")
        assert result.descriptive_only
        assert result.scenes, "a query sharing words with the conversation must recall a scene"
        assert any("D1:3" in [t.id for t in hit.turns] for hit in result.scenes)
        assert all(hit.routes for hit in result.scenes)
        exported = mem.export(space)
        assert len(exported.turns) == sum(s.turns_added for s in report.spaces)
        assert {t for s in exported.scenes for t in s.turn_ids} == {t.id for t in exported.turns}
        mem.delete_space(space)
        assert mem.spaces() == []
        with pytest.raises(NotFoundError):
            mem.search(space, "anything")


def test_bad_file_is_an_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[{")
    with Memory.open(tmp_path / "m", Settings(llm="none"), embedder=HashEmbedder()) as mem:
        with pytest.raises(InputError, match=str(bad.name)):
            mem.import_file(bad)
        assert mem.spaces() == []
