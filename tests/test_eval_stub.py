"""The full LLM pipeline - build, answer, judge - end to end against the local OpenAI-compatible stub server, through
the real OpenAI client, with injected faults, on one small slice of a dev conversation. A proof of the pipeline,
never a quality claim: every reply is written by a rule in tests/support."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.support.openai_stub import OpenAIStub
from tests.support.stage_replies import reply_for
from tmem.cli.main import cli
from tmem.embed.hashing import HashEmbedder
from tmem.eval.records import AnswerRecord
from tmem.eval.runs import EvalOptions, Models, eval_locomo
from tmem.llm.service import make_llm
from tmem.scope import Scope
from tmem.settings import Settings
from tmem.store.sqlite import SQLiteStore

BUNDLED = Path(__file__).resolve().parents[1] / "src" / "tmem" / "eval" / "data" / "locomo_conv30_s1-5.json"


def _slice(tmp_path: Path) -> Path:
    sample = json.loads(BUNDLED.read_text())[0]
    conv = {k: v for k, v in sample["conversation"].items() if not re.match(r"session_[2-9]", k)}
    qa = [q for q in sample["qa"] if all(e.startswith("D1:") for e in q["evidence"])]
    path = tmp_path / "slice.json"
    path.write_text(json.dumps([{"sample_id": "conv-30", "conversation": conv, "qa": qa}]))
    return path


def stub_reply(body: dict[str, Any]) -> str:
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    if system.startswith("You answer questions"):
        question = user.rsplit("Question:", 1)[1].split("\n")[0]
        return json.dumps({"answer": " ".join(question.split()[-3:]).rstrip("?")})
    if system.startswith("You grade answers"):
        gold = re.search(r"Gold answer: (.*)", user)
        pred = re.search(r"Generated answer: (.*)", user)
        assert gold and pred
        shared = set(gold.group(1).lower().split()) & set(pred.group(1).lower().split())
        return json.dumps({"reasoning": "rule", "label": "Correct." if shared else "**WRONG**"})
    return reply_for(system, user)


def _settings(stub: OpenAIStub, home: Path) -> Settings:
    return Settings(
        home=home,
        llm="openai",
        llm_model="stub-model",
        llm_base_url=stub.base_url,
        llm_api_key="test-key",
        llm_backoff_base=0.0,
        llm_backoff_max=0.0,
        embed_backend="hash",
    )


@pytest.mark.slow
async def test_build_answer_judge_against_the_stub(tmp_path: Path) -> None:
    data = _slice(tmp_path)
    with OpenAIStub(reply=stub_reply, faults=["429:retry-after=0", "ok", "500", "malformed", "fenced"]) as stub:
        settings = _settings(stub, tmp_path / "mem")
        store = SQLiteStore.open(settings.db_path)
        llm = make_llm(settings, store)
        assert llm is not None
        opts = EvalOptions(data=data, out=tmp_path / "out", limit=3, runs=2, concurrency=2, command="test")
        try:
            report = await eval_locomo(store, settings, opts, Models(build=llm, answer=llm, judge=llm), HashEmbedder())
        finally:
            await llm.aclose()
        stages = {c.stage for c in store.llm_calls(Scope.local("conv-30"))}
        assert {"answer", "judge"} <= stages and len(stages) >= 4  # construction stages ran through the stub too
        assert any(r.status == 429 for r in stub.requests) and any(r.status == 500 for r in stub.requests)
    recs = [
        AnswerRecord.model_validate_json(x)
        for x in (tmp_path / "out" / "locomo" / "records.jsonl").read_text().splitlines()
    ]
    assert len(recs) == 3
    for r in recs:
        assert r.prediction and len(r.judgements) == 2 and r.answer_tokens_in > 0 and r.judge_tokens_in > 0
        assert r.retrieved
    assert report.rows[0].overall.n == 3
    manifest = json.loads((tmp_path / "out" / "locomo" / "manifest.json").read_text())
    assert manifest["build_mode"] == "llm" and manifest["models"]["judge"] == "stub-model"
    assert "test-key" not in json.dumps(manifest)  # secrets never reach the results folder
    cost = json.loads((tmp_path / "out" / "locomo" / "cost.json").read_text())
    assert cost["total"]["calls"] > 0 and cost["total"]["input_tokens"] > 0
    assert {"answer", "judge"}.isdisjoint(s["stage"] for s in cost["stages"])
    assert "T-Mem (paper, GPT-4.1-mini)" in (tmp_path / "out" / "locomo" / "cost.md").read_text()


@pytest.mark.slow
def test_cli_eval_and_ask_against_the_stub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _slice(tmp_path)
    with OpenAIStub(reply=stub_reply) as stub:
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("TMEM_EMBED_BACKEND", "hash")
        monkeypatch.setenv("TMEM_LLM_BACKOFF_BASE", "0")
        home = tmp_path / "mem"
        out = tmp_path / "out"
        args = ["--dir", str(home), "--llm-model", "stub-model", "eval", "locomo", "--data", str(data)]
        result = CliRunner().invoke(cli, [*args, "--out", str(out), "--limit", "2", "--runs", "1"])
        assert result.exit_code == 0, result.output
        assert "| Single-hop | Multi-hop | Temporal | Open Domain | Overall | F1 |" in result.output
        ask = CliRunner().invoke(
            cli,
            ["--dir", str(home), "--llm-model", "stub-model", "ask", "conv-30", "Why did Jon lose his job?", "--json"],
        )
        assert ask.exit_code == 0, ask.output
        answer = json.loads(ask.output)
        assert answer["answer"] and answer["question_time"]["relation"] == "after"
        assert answer["tokens"]["prompt"] > answer["tokens"]["evidence"] > 0


def test_ask_without_an_llm_says_how_to_configure_one(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--dir", str(tmp_path), "ask", "conv-30", "When?"])
    assert result.exit_code != 0
    message = str(result.exception)
    assert "TMEM_LLM_MODEL" in message and "OPENAI_BASE_URL" in message and "tmem search" in message


def _act_as_batch_api(stub: OpenAIStub, requests_file: Path, results_file: Path) -> int:
    """Send each exported request body to the stub (as the Batch API would) and write Batch output lines."""
    import asyncio

    import openai

    async def run() -> list[str]:
        client = openai.AsyncOpenAI(base_url=stub.base_url, api_key="k", max_retries=0)
        out = []
        try:
            for raw in requests_file.read_text().splitlines():
                line = json.loads(raw)
                completion = await client.chat.completions.create(**line["body"])
                body = completion.model_dump()
                out.append(json.dumps({"custom_id": line["custom_id"], "response": {"status_code": 200, "body": body}}))
        finally:
            await client.close()
        return out

    lines = asyncio.run(run())
    results_file.write_text("".join(x + "\n" for x in lines))
    return len(lines)


@pytest.mark.slow
def test_whole_run_through_the_batch_protocol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tmem.errors import BatchPending

    data = _slice(tmp_path)
    with OpenAIStub(reply=stub_reply) as stub:
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("TMEM_EMBED_BACKEND", "hash")
        home, out = tmp_path / "mem", tmp_path / "out"
        requests_file, results_file = tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
        base = ["--dir", str(home), "--llm-model", "stub-model"]
        args = [*base, "eval", "locomo", "--data", str(data), "--out", str(out), "--limit", "2", "--runs", "2"]
        stages: list[str] = []
        for _ in range(15):
            result = CliRunner().invoke(cli, [*args, "--batch-out", str(requests_file)])
            if result.exit_code == 0:
                break
            assert isinstance(result.exception, BatchPending), result.output
            stages.append(result.exception.stage)
            live_before = len(stub.chat_requests)
            assert _act_as_batch_api(stub, requests_file, results_file) > 0
            imported = CliRunner().invoke(cli, [*base, "llm", "batch-import", str(results_file)])
            assert imported.exit_code == 0, imported.output
            assert len(stub.chat_requests) > live_before
        else:
            pytest.fail(f"the batch rounds did not converge: {stages}")
    assert stages[-2:] == ["answer", "judge"] and len(stages) >= 4  # build stages first, then answers, then judges
    recs = (out / "locomo" / "records.jsonl").read_text().splitlines()
    assert len(recs) == 2 and all(len(json.loads(r)["judgements"]) == 2 for r in recs)


@pytest.mark.slow
def test_demo_with_an_llm_builds_the_full_memory_and_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tmem.eval import demo

    monkeypatch.setattr(demo, "dev_file", lambda: None)
    with OpenAIStub(reply=stub_reply) as stub:
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("TMEM_EMBED_BACKEND", "hash")
        args = ["--dir", str(tmp_path), "--llm-model", "stub-model", "demo", "--sessions", "1", "--json"]
        result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["descriptive_only"] is False and report["build"]["mode"] == "llm"
    assert report["build"]["counts"]["triggers_horizon"] > 0
    assert all(q["answer"] for q in report["questions"])
