"""`tmem demo` on the offline default: no LLM, no network, the real shipped MiniLM embedder, the bundled data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tmem.cli.main import cli
from tmem.eval import demo


@pytest.mark.slow
def test_demo_offline_with_bundled_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo, "dev_file", lambda: None)  # as on a fresh machine without ../shared/data
    runner = CliRunner()
    result = runner.invoke(cli, ["--dir", str(tmp_path), "demo", "--sessions", "2", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["source"] == "bundled locomo_conv30_s1-5.json" and report["sessions"] == 2
    assert report["descriptive_only"] is True and "DESCRIPTIVE ONLY" in report["note"]
    assert "TMEM_LLM_MODEL" in report["note"] and "OPENAI_BASE_URL" in report["note"]
    assert report["build"]["counts"]["scenes"] > 0
    questions = report["questions"]
    assert len(questions) == 3  # single-hop, temporal, multi-hop from LoCoMo itself
    for q in questions:
        assert q["retrieved"] and all(ref["routes"] for ref in q["retrieved"])
        assert q["answer"] is None  # no LLM, no answers: evidence only
        assert set(q["recalled_gold"]) <= set(q["gold_turn_ids"])
    assert (tmp_path / "tmem.db").exists()
    text = runner.invoke(cli, ["--dir", str(tmp_path), "demo", "--sessions", "2"])  # rerun reuses the memory
    assert text.exit_code == 0, text.output
    assert "gold evidence recalled" in text.output and "via " in text.output and "export TMEM_LLM=openai" in text.output
