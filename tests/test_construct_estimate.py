"""The cost estimate shown before a build: request counts that follow from the plan match a build's, and the CLI
shows it (`tmem llm cost SPACE --estimate`, and `tmem build --batch-out` before a fresh build)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from tests.support.stage_replies import dev_space, scripted_reply
from tmem.cli.main import cli
from tmem.construct.estimate import estimate_build
from tmem.construct.options import BuildOptions
from tmem.construct.pipeline import build_space
from tmem.embed.hashing import HashEmbedder
from tmem.ingest.importer import import_spaces
from tmem.llm.scripted import scripted_llm
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore

SPACE = "conv-26"


async def test_the_estimate_counts_the_requests_the_plan_fixes() -> None:
    store = SQLiteStore.open(":memory:")
    import_spaces(store, [dev_space(SPACE, slice(0, 6))], source="dev")
    options = BuildOptions(few_rounds=True)
    planned = estimate_build(store, Scope.local(SPACE), options)
    assert planned.open_turns == len(store.turns(Scope.local(SPACE))) and planned.rounds == 4
    assert [s.stage for s in planned.stages] == [
        "segment",
        "topics",
        "items",
        "triggers.item",
        "triggers.scene",
        "persona",
    ]
    assert planned.total.requests == sum(s.requests for s in planned.stages)
    assert all(s.input_tokens > 0 and s.output_tokens > 0 for s in planned.stages)
    llm = scripted_llm(store, fn=scripted_reply)
    await build_space(store, Scope.local(SPACE), llm=llm, embedder=HashEmbedder(), options=options)
    asked = Counter(c.stage for c in store.llm_calls(Scope.local(SPACE)) if c.outcome == "ok")
    by_stage = {s.stage: s.requests for s in planned.stages}
    # windows and topic requests follow from the turns and the options alone
    assert by_stage["segment"] == asked["segment"] and by_stage["topics"] == asked["topics"]
    assert by_stage["persona"] == asked["persona"] == 2
    assert estimate_build(store, Scope.local(SPACE), options).open_turns == 0  # built: nothing left to estimate


def test_cli_shows_the_estimate_before_a_batch_build(tmp_path: Path) -> None:
    store = SQLiteStore.open(tmp_path / "tmem.db")
    import_spaces(store, [dev_space(SPACE, slice(0, 2))], source="dev")
    store.close()
    env = {"TMEM_HOME": str(tmp_path), "TMEM_EMBED_BACKEND": "hash"}
    shown = CliRunner().invoke(cli, ["llm", "cost", SPACE, "--estimate", "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    payload = json.loads(shown.output)
    assert payload["plan"] == "few-rounds" and payload["rounds"] == 4 and payload["total"]["requests"] > 0
    text = CliRunner().invoke(cli, ["llm", "cost", SPACE, "--estimate", "--sequential"], env=env)
    assert "sequential plan" in text.output and "triggers.item" in text.output
    env |= {"TMEM_LLM": "openai", "TMEM_LLM_MODEL": "m", "OPENAI_BASE_URL": "http://127.0.0.1:9", "OPENAI_API_KEY": "x"}
    batch = CliRunner().invoke(
        cli, ["build", SPACE, "--batch-out", str(tmp_path / "b.jsonl"), "--no-progress"], env=env
    )
    assert batch.exit_code == 3, batch.output
    assert "Estimated cost of building conv-26 (few-rounds plan, 4 batch round(s))" in batch.stderr


def test_the_estimate_of_a_file_sums_its_spaces_as_they_would_be_imported(tmp_path: Path) -> None:
    spaces = [dev_space(SPACE, slice(0, 3)), dev_space(SPACE, slice(3, 5)).model_copy(update={"name": "other"})]
    data = tmp_path / "two.json"
    native = [
        {"space": s.name, **s.model_dump(mode="json", include={"speakers", "sessions"}, exclude_none=True)}
        for s in spaces
    ]
    data.write_text(json.dumps(native), encoding="utf-8")
    env = {"TMEM_HOME": str(tmp_path / "home")}
    result = CliRunner().invoke(cli, ["llm", "cost", "--estimate", "--file", str(data), "--json"], env=env)
    assert result.exit_code == 0, result.output
    whole = json.loads(result.output)
    assert not (tmp_path / "home" / "tmem.db").exists()  # nothing was imported or written

    store = SQLiteStore.open(":memory:")
    import_spaces(store, spaces, source="dev")
    each = [estimate_build(store, Scope.local(s.name), BuildOptions(few_rounds=True)) for s in spaces]
    assert [s["space"] for s in whole["spaces"]] == [SPACE, "other"]
    assert whole["spaces"] == [e.model_dump(mode="json") for e in each]
    for key in ("requests", "input_tokens", "output_tokens"):
        assert whole["total"][key] == sum(getattr(e.total, key) for e in each)
        assert sum(s[key] for s in whole["stages"]) == whole["total"][key]
    table = CliRunner().invoke(cli, ["llm", "cost", "--estimate", "--file", str(data)], env=env)
    assert table.exit_code == 0 and f"{whole['total']['requests']:,}" in table.output and "(2 spaces)" in table.output
    refused = CliRunner().invoke(cli, ["llm", "cost", "--file", str(data)], env=env)
    assert refused.exit_code == 2 and "--file goes with --estimate" in refused.output


def test_the_estimate_covers_a_longmemeval_file_before_anything_is_spent(tmp_path: Path) -> None:
    from tmem.eval.longmemeval.synth import generate, write_file

    data = generate("s", instances=3, sessions=6, seed=1)
    path = write_file(tmp_path / "lme.json", data)
    env = {"TMEM_HOME": str(tmp_path / "home")}
    result = CliRunner().invoke(cli, ["llm", "cost", "--estimate", "--file", str(path), "--json"], env=env)
    assert result.exit_code == 0, result.output
    whole = json.loads(result.output)
    assert [s["space"] for s in whole["spaces"]] == [d["question_id"] for d in data]
    turns = [sum(len(s) for s in d["haystack_sessions"]) for d in data]
    assert [s["open_turns"] for s in whole["spaces"]] == turns and whole["open_turns"] == sum(turns)
    assert whole["total"]["requests"] > 0 and not (tmp_path / "home" / "tmem.db").exists()
