"""A full LLM-mode build of one dev LoCoMo conversation through the OpenAI-compatible stub server, with injected
faults (429s, 500s, malformed JSON), driven by the `tmem build` command; then the integrity checker must pass and the
cost must meet the target (<= 300 calls, <= 0.5M prompt tokens per conversation)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.openai_stub import OpenAIStub
from tests.support.stage_replies import dev_space, stub_reply
from tmem.cli.main import cli
from tmem.construct.check import check_space
from tmem.ingest.importer import import_spaces
from tmem.llm.cost import cost_report
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore

SPACE = "conv-26"


def _import(home: Path, sessions: slice | None = None) -> None:
    store = SQLiteStore.open(home / "tmem.db")
    import_spaces(store, [dev_space(SPACE, sessions)], source="dev")
    store.close()


@pytest.mark.slow
def test_full_build_through_a_faulty_server_passes_the_checker_and_meets_the_cost_target(tmp_path: Path) -> None:
    _import(tmp_path)
    faults = ["429:retry-after=0", "500", "malformed", "ok", "503", "fenced"]
    with OpenAIStub(reply=stub_reply, faults=faults, fault_rate=0.05, seed=11) as stub:
        result = CliRunner().invoke(cli, ["build", SPACE, "--json", "--no-progress"], env=stub.env(tmp_path))
        assert result.exit_code == 0, result.output
        chat = stub.chat_requests
    (report,) = json.loads(result.output)
    assert report["mode"] == "llm" and report["counts"]["scenes"] > 20
    applied = [r.fault for r in chat]
    assert applied[:6] == ["429:retry-after=0", "500", "malformed", "ok", "503", "fenced"]
    assert sum(f != "ok" for f in applied[6:]) >= 1  # random faults during the build as well

    store = SQLiteStore.open(tmp_path / "tmem.db")
    check = check_space(store, Scope.local(SPACE))
    assert check.ok, check.violations[:5]
    cost = cost_report(store, Scope.local(SPACE))
    assert cost.total.errors == 0
    assert cost.total.calls <= 300 and cost.total.input_tokens <= 500_000
    stages = {s.stage: s for s in cost.stages}
    assert set(stages) == {"segment", "topics", "items", "triggers.item", "triggers.scene", "persona"}
    store.close()


def test_cli_rebuild_json_and_usage(tmp_path: Path) -> None:
    _import(tmp_path, slice(0, 2))
    empty = SQLiteStore.open(tmp_path / "tmem.db")
    empty.ensure_space(Scope.local("empty"))  # --all skips a space without turns
    empty.close()
    with OpenAIStub(reply=stub_reply) as stub:
        env = stub.env(tmp_path)
        runner = CliRunner()
        first = runner.invoke(cli, ["build", SPACE, "--no-progress", "--trigger-items", "4"], env=env)
        assert first.exit_code == 0, first.output
        assert "Built conv-26 (llm mode)" in first.output and "triggers.item" in first.output
        served = len(stub.chat_requests)
        again = runner.invoke(cli, ["build", "--all", "--json", "--no-progress", "--trigger-items", "4"], env=env)
        assert again.exit_code == 0, again.output
        assert len(stub.chat_requests) == served  # nothing new: nothing asked
        assert sum(s["llm_calls"] for s in json.loads(again.output)[0]["stages"]) == 0
        both = runner.invoke(cli, ["build", SPACE, "--all"], env=env)
        assert both.exit_code != 0 and "Give one SPACE or --all" in both.output
        unknown = runner.invoke(cli, ["build", "nope"], env=env)
        assert unknown.exit_code != 0
    offline = {"TMEM_HOME": str(tmp_path), "TMEM_EMBED_BACKEND": "hash"}
    mixed = CliRunner().invoke(cli, ["--llm", "none", "build", SPACE, "--no-progress"], env=offline)
    assert mixed.exit_code != 0 and "built with an LLM" in str(mixed.exception)
    rebuilt = CliRunner().invoke(cli, ["--llm", "none", "build", SPACE, "--rebuild", "--no-progress"], env=offline)
    assert rebuilt.exit_code == 0, rebuilt.output
    assert "extractive mode" in rebuilt.output and "descriptive only" in rebuilt.output


def test_cli_batch_out_exits_3_and_writes_requests(tmp_path: Path) -> None:
    _import(tmp_path, slice(0, 1))
    out = tmp_path / "batch.jsonl"
    with OpenAIStub(reply=stub_reply) as stub:
        result = CliRunner().invoke(
            cli, ["build", SPACE, "--batch-out", str(out), "--no-progress"], env=stub.env(tmp_path)
        )
        assert stub.chat_requests == []
    assert result.exit_code == 3, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 1 and lines[0]["url"] == "/v1/chat/completions"
    assert "scene segmenter" in lines[0]["body"]["messages"][0]["content"]
