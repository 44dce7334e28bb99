"""Issue 34, finding 3, on a made-up conversation of our own (tests/fixtures/scenarios/first_hour.json): a colleague's
shellfish allergy, a job change (Initech -> Globex) and a move "last year" said in January 2026, built offline.

What a user expects of the headline behaviour: the allergy reaches a 200-token context for tonight's team dinner; the
new employer comes before the old one in ``Memory.search``'s items and in ``Memory.context``; a 150-token context keeps
the new job title; and "last year" said in 2026 is the year 2025 wherever an item's date is shown, not the day
2025-01-01."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tmem import Memory
from tmem.answer.hits import item_record
from tmem.cli.main import cli
from tmem.scope import Scope
from tmem.settings import Settings

SCENARIO = Path(__file__).resolve().parent / "fixtures" / "scenarios" / "first_hour.json"
DINNER = "Where should we take the team for dinner tonight?"
WORK = "Where does Sam work now?"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scenario imported and built offline (extractive mode, the shipped MiniLM), once for the module."""
    where = tmp_path_factory.mktemp("first-hour")
    with Memory.open(settings=Settings(home=where, llm="none")) as mem:
        mem.import_file(SCENARIO)
        mem.build("sam")
    return where


def _open(home: Path) -> Memory:
    return Memory.open(settings=Settings(home=home, llm="none", lexical_dir=home / "lexical"))


@pytest.mark.slow
def test_the_allergy_is_in_the_dinner_context(home: Path) -> None:
    with _open(home) as mem:
        context = mem.context("sam", DINNER, max_tokens=200)
    assert context.tokens <= 200
    assert "shellfish allergy" in context.text, context.text


@pytest.mark.slow
def test_the_new_employer_comes_first_in_search_and_context(home: Path) -> None:
    with _open(home) as mem:
        texts = [hit.item.text for hit in mem.search("sam", WORK).items]
        new = next(n for n, t in enumerate(texts) if "Globex" in t)
        old = next(n for n, t in enumerate(texts) if "Initech as a data analyst" in t)
        assert new < old, texts
        for budget in (150, 200, 500):
            text = mem.context("sam", WORK, max_tokens=budget).text
            assert "senior engineer" in text, (budget, text)  # the new job title survives a small budget
            if "data analyst" in text:
                assert text.index("Globex") < text.index("data analyst"), (budget, text)


@pytest.mark.slow
def test_last_year_said_in_2026_is_the_year_2025(home: Path) -> None:
    with _open(home) as mem:
        (moved,) = [i for i in mem.store.items(Scope.local("sam")) if "Portland" in i.text]
        assert (moved.date, moved.date_end, moved.date_precision) == ("2025-01-01", "2025-12-31", "year")
    record = item_record(moved, list(moved.turn_ids), ["item"], {})  # how MCP recall and the service show a hit
    assert record.date == "2025"  # a year, not a day
    shown = CliRunner().invoke(cli, ["--dir", str(home), "show", "sam", "--items"])
    assert shown.exit_code == 0, shown.output
    (line,) = [ln for ln in shown.output.splitlines() if moved.id in ln]
    assert line.endswith("| 2025 | Sam") and "2025-01-01" not in line, line
