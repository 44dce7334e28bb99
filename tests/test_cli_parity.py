"""The CLI is a thin layer over Memory: the same request through both gives the same answer (search preset, question
date), and Memory creates its answer LLM once and closes it."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.openai_stub import OpenAIStub
from tmem import Memory, Settings
from tmem.cli.main import cli
from tmem.models import SessionInput, TurnInput

LATE, EARLY = datetime(2023, 8, 20, 14, 0), datetime(2023, 5, 8, 13, 56)


def _sessions() -> list[SessionInput]:
    """Two sessions whose list order is not their date order (the later one first)."""

    def turns(prefix: str, texts: list[str]) -> list[TurnInput]:
        return [TurnInput(id=f"{prefix}:{n}", speaker=("Ann", "Bo")[n % 2], text=t) for n, t in enumerate(texts)]

    return [
        SessionInput(
            id="s-late",
            started_at=LATE,
            turns=turns("L", ["We finally adopted a grey kitten named Pixel", "Pixel sounds adorable, congrats"]),
        ),
        SessionInput(
            id="s-early",
            started_at=EARLY,
            turns=turns("E", ["I started pottery classes downtown last week", "Pottery is such a relaxing hobby"]),
        ),
    ]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TMEM_EMBED_BACKEND", "hash")
    home = tmp_path / "mem"
    with Memory.open(home, Settings(llm="none")) as mem:
        mem.add_sessions("pets", _sessions())
        mem.build("pets")
    return home


def _cli_search(home: Path, *args: str) -> dict[str, object]:
    result = CliRunner().invoke(cli, ["--dir", str(home), "search", "pets", "kitten Pixel", "--json", *args])
    assert result.exit_code == 0, result.output
    out: dict[str, object] = json.loads(result.output)
    return out


@pytest.mark.parametrize("preset", [None, "descriptive", "paper"])
def test_search_preset_resolves_the_same_in_cli_and_memory(
    home: Path, preset: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if preset is not None:
        monkeypatch.setenv("TMEM_SEARCH_PRESET", preset)
    via_cli = _cli_search(home)
    with Memory.open(home) as mem:
        via_memory = mem.search("pets", "kitten Pixel").model_dump(mode="json")
    assert via_cli["preset"] == via_memory["preset"] == (preset or "auto:extractive")
    assert via_cli == via_memory
    # an explicit --preset beats the environment in both
    with Memory.open(home) as mem:
        assert _cli_search(home, "--preset", "extractive") == mem.search(
            "pets", "kitten Pixel", "extractive"
        ).model_dump(mode="json")


def test_question_date_is_the_latest_session_start_in_cli_and_memory(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with OpenAIStub() as stub:
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("TMEM_LLM_BACKOFF_BASE", "0")
        ask = CliRunner().invoke(
            cli,
            ["--dir", str(home), "--llm-model", "stub-model", "ask", "pets", "What is the kitten called?", "--json"],
        )
        assert ask.exit_code == 0, ask.output
        via_cli = json.loads(ask.output)
        mem = Memory.open(home, Settings(llm="openai", llm_model="stub-model"))
        first = mem.ask("pets", "What is the kitten called?")
        mem.ask("pets", "Who takes pottery classes?")
        assert mem.core.open_clients == 1  # one answer client for every question
        mem.close()
        assert mem.core.open_clients == 0
    assert via_cli["question_time"] == first.question_time.model_dump(mode="json")
    assert first.question_time.at == LATE and first.question_time.relation == "after"
    assert via_cli["answer"] == first.answer
    prompts = [r.body["messages"][1]["content"] for r in stub.requests if r.path.endswith("/chat/completions")]
    # Memory's first question was byte-identical to the CLI's, so the LLM log answered it from the cache
    assert first.cached and len(prompts) == 2 and all("20 August 2023" in p for p in prompts)
