"""Retrieval-only at fixed budgets (--budgets): every system walked to each budget, per-route attribution, the
tables and the PNG figures. Hash embedder and an extractive memory: bookkeeping, never a quality figure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tmem.cli.main import cli
from tmem.embed.hashing import HashEmbedder
from tmem.errors import ConfigError
from tmem.eval.records import CoverageRecord
from tmem.eval.retrieval_only import BUDGETS_VARIANT
from tmem.eval.runs import EvalOptions, Models, eval_locomo
from tmem.scope import Scope
from tmem.settings import Settings
from tmem.store.sqlite import SQLiteStore

from .test_eval_runs import locomo_slice  # noqa: F401  (fixture)

BUDGETS = [60, 200, 800]


async def test_budgets_walk_every_system_to_each_budget(locomo_slice: Path, tmp_path: Path) -> None:  # noqa: F811
    store = SQLiteStore.open(tmp_path / "mem" / "tmem.db")
    out = tmp_path / "out"
    models = Models(build=None, answer=None, judge=None)
    opts = EvalOptions(
        data=locomo_slice, out=out, command="test", retrieval_only=True, limit=5, ablate="SL", budgets=BUDGETS
    )
    report = await eval_locomo(store, Settings(), opts, models, HashEmbedder())
    lines = [json.loads(x) for x in (out / "locomo" / "records.jsonl").read_text().splitlines()]
    recs = [CoverageRecord.model_validate(x) for x in lines]
    budget_recs = [r for r in recs if r.variant == BUDGETS_VARIANT]
    assert len(budget_recs) == 5 and len(recs) == 5 * 3  # full, w/o SL, budgets
    assert {r.counter for r in recs} == {"cl100k"} and report.counter == "cl100k"
    for rec in budget_recs:
        assert [c.budget for c in rec.budgets] == BUDGETS
        for cell in rec.budgets:
            assert set(cell.systems) == {"tmem", "bm25", "dense", "hybrid", "random-scenes"}
            assert all(s.tokens <= cell.budget for s in cell.systems.values())
            tmem = cell.systems["tmem"]
            assert (tmem.coverage or 0) > 0 or not cell.routes  # a route is named only when it put gold inside
    # coverage never falls when the budget grows, for the flat baselines (prefixes of one ranking)
    for rec in budget_recs:
        for system in ("dense", "bm25", "hybrid"):
            values = [c.systems[system].coverage or 0 for c in rec.budgets]
            assert values == sorted(values)
    assert {r.budget for r in report.budget_rows} == set(BUDGETS)
    assert {r.system for r in report.budget_rows} == {"tmem", "bm25", "dense", "hybrid", "random-scenes"}
    assert [r.variant for r in report.rows if r.system == "tmem"] == ["full", "w/o SL"]  # budgets are no variant
    md = (out / "locomo" / "report.md").read_text()
    assert "## At fixed context budgets" in md and "![" in md
    assert "every system counted by the cl100k tokenizer" in md
    for png in ("budgets.png", "variants.png"):
        data = (out / "locomo" / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    with pytest.raises(ConfigError, match="budgets"):
        await eval_locomo(store, Settings(), opts.model_copy(update={"budgets": [100]}), models, HashEmbedder())
    with pytest.raises(ConfigError, match="TMEM_TOKENIZER=cl100k"):  # resumed records are never mixed counts
        await eval_locomo(store, Settings(tokenizer="words"), opts, models, HashEmbedder())


def test_baselines_count_with_the_context_tokenizer(tmp_path: Path) -> None:
    """A flat baseline's turn costs what the line costs in the context's tokenizer, newline included, so the turns
    joined into one text never count more than the budget they were packed into."""
    from tmem import Memory
    from tmem.answer.context import format_turn
    from tmem.eval.baselines import SpaceBaselines
    from tmem.util.tokens import token_counter

    texts = ["Unbelievable!!! 2023-05-08, 12345678.", "I moved to Lyon :)", "ok", "(see https://x.y/z?a=1)"]
    mem = Memory.open(tmp_path, Settings(llm="none"), embedder=HashEmbedder())
    mem.add_messages(
        "s", [{"speaker": "Ann", "text": t, "time": f"2023-05-08T13:0{n}:00"} for n, t in enumerate(texts)]
    )
    store = mem.store
    turns = store.turns(Scope.local("s"))
    embed = HashEmbedder()
    for name in ("cl100k", "words"):
        counter = token_counter(name)
        flat = SpaceBaselines(store, Scope.local("s"), lambda xs: embed.embed(xs).vectors, counter)
        for budget in range(0, 40):
            packed = flat.packed("Lyon", "k", budget)["bm25"]
            lines = [format_turn(next(t for t in turns if t.id == tid), dated=True) for tid in packed.turn_ids]
            assert counter.count("\n".join(lines)) <= packed.tokens <= budget
    mem.close()


def test_cli_budgets_need_retrieval_only_and_integers(tmp_path: Path, locomo_slice: Path) -> None:  # noqa: F811
    runner = CliRunner()
    base = ["--llm", "none", "--dir", str(tmp_path / "m"), "eval", "locomo", "--data", str(locomo_slice)]
    res = runner.invoke(cli, [*base, "--budgets", "500"], env={"TMEM_EMBED_BACKEND": "hash"})
    assert res.exit_code != 0 and "--retrieval-only" in res.output
    res = runner.invoke(cli, [*base, "--retrieval-only", "--budgets", "5x0"], env={"TMEM_EMBED_BACKEND": "hash"})
    assert res.exit_code != 0 and "integers" in res.output
