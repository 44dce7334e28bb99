"""Batch rounds through the OpenAI Batch API (tmem.llm.batch_api), against a local fake of /v1/files and /v1/batches
driven by the official ``openai`` client: success, expiry, partial failure, cancel, rejection, and a process killed in
the middle of a round (no request paid twice, no duplicate results)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from click.testing import CliRunner

from tests.support.batch_stub import BatchStub
from tests.support.openai_stub import OpenAIStub
from tests.support.stage_replies import dev_space, stub_reply
from tests.test_llm_batch import Label, label_reply, prompt, queue_requests
from tmem.cli.main import cli
from tmem.errors import LLMError
from tmem.ingest.importer import import_spaces
from tmem.llm.batch_api import BatchAPIOptions, BatchAPIRunner
from tmem.llm.scripted import ScriptedBackend, scripted_llm
from tmem.llm.service import StructuredLLM
from tmem.scope import Scope
from tmem.settings import Settings
from tmem.store import open_store
from tmem.store.base import Store
from tmem.store.sqlite import SQLiteStore


class Killed(BaseException):
    """The process dying (a BaseException, as KeyboardInterrupt: nothing in the runner may swallow it)."""


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = open_store(store_url)
    yield s
    s.close()


def runner(store: Store, stub: BatchStub, tmp_path: Path, **kw: Any) -> BatchAPIRunner:
    client = openai.OpenAI(base_url=stub.base_url, api_key="sk-test", max_retries=0)
    options = BatchAPIOptions(poll_initial=0.0, poll_max=0.0, work_dir=tmp_path / "batches")
    return BatchAPIRunner(store, client, options, **kw)


def queue(store: Store, n: int, space: str = "conv") -> None:
    asyncio.run(queue_requests(scripted_llm(store, batch=True, model="gpt-test"), n, space=space))


def answers(store: Store, n: int, space: str = "conv") -> list[str]:
    """Rerun the requests live with a backend that has no replies: every answer must come from the cache."""
    live = StructuredLLM(ScriptedBackend(), store, model="gpt-test", settings=Settings(llm="openai"))

    async def run() -> list[str]:
        scope = Scope.local(space)
        return [(await live.complete(prompt(i), Label, stage="topics", space=scope)).output.label for i in range(n)]

    return asyncio.run(run())


def batch_rows(store: Store) -> Counter[tuple[str, str]]:
    return Counter((c.space, c.request_hash) for c in store.llm_calls() if c.outcome == "batch")


def test_one_round_imports_every_result_into_every_waiting_space(store: Store, tmp_path: Path) -> None:
    queue(store, 4)
    queue(store, 2, space="other")  # the same two requests in a second space: one line each in the batch
    lines: list[str] = []
    with BatchStub(reply=label_reply) as stub:
        report = runner(store, stub, tmp_path, echo=lines.append).run_round()
        assert report is not None and runner(store, stub, tmp_path).run_round() is None  # nothing left
        uploaded = stub.files[stub.uploads[0]].decode().splitlines()
    assert (report.status, report.requests, report.imported, report.failed, report.still_pending) == (
        "completed", 4, 4, [], 0
    )  # fmt: skip
    assert len(uploaded) == 4 and all(json.loads(x)["url"] == "/v1/chat/completions" for x in uploaded)
    assert set(stub.executed.values()) == {1} and len(stub.created) == 1
    assert report.input_tokens > 0 and report.output_tokens > 0
    rows = batch_rows(store)
    assert len(rows) == 6 and set(rows.values()) == {1}
    assert answers(store, 4) == ["scene 0", "scene 1", "scene 2", "scene 3"]
    assert answers(store, 2, space="other") == ["scene 0", "scene 1"]
    assert any("in_progress" in x for x in lines) and "4 result(s) imported" in lines[-1]
    assert not store.state_keys(Scope.local("conv"), "llm.batch_api.")  # the record is gone with the round


def test_an_expired_batch_keeps_its_results_and_the_rest_goes_in_the_next_round(store: Store, tmp_path: Path) -> None:
    queue(store, 5)
    with BatchStub(reply=label_reply, plans=["expire:2"]) as stub:
        first = runner(store, stub, tmp_path).run_round()
        assert first is not None and (first.status, first.imported, first.still_pending) == ("expired", 2, 3)
        assert all("batch_expired" in b.reason for b in first.failed) and len(first.failed) == 3
        second = runner(store, stub, tmp_path).run_round()
        resubmitted = [json.loads(x)["custom_id"] for x in stub.files[stub.uploads[-1]].decode().splitlines()]
    assert second is not None and (second.status, second.requests, second.imported) == ("completed", 3, 3)
    assert len(resubmitted) == 3 and set(stub.executed.values()) == {1} and len(stub.executed) == 5
    assert set(batch_rows(store).values()) == {1} and len(store.pending()) == 0


def test_failed_lines_stay_pending_and_are_retried(store: Store, tmp_path: Path) -> None:
    queue(store, 5)
    with BatchStub(reply=label_reply, plans=["fail:1,3"]) as stub:
        first = runner(store, stub, tmp_path).run_round()
        assert first is not None and (first.imported, first.still_pending) == (3, 2)
        assert [b.reason.split(": ", 1)[1] for b in first.failed] == ["status_code 500: The server had an error."] * 2
        runner(store, stub, tmp_path).run_round()
        assert len(stub.created) == 2
    assert sorted(stub.executed.values()) == [1, 1, 1, 2, 2]  # only the failed ones ran again
    assert answers(store, 5) == [f"scene {i}" for i in range(5)]


def test_a_cancelled_batch_imports_what_completed_and_stops(store: Store, tmp_path: Path) -> None:
    queue(store, 4)
    with BatchStub(reply=label_reply, plans=["cancel"]) as stub:
        with pytest.raises(LLMError, match="was cancelled: 2 completed"):
            runner(store, stub, tmp_path).run_round()
        assert len(store.pending()) == 2 and not store.state_keys(Scope.local("conv"), "llm.batch_api.")
        report = runner(store, stub, tmp_path).run_round()  # a rerun submits the rest
    assert report is not None and report.requests == 2 and set(stub.executed.values()) == {1}


def test_cancel_asks_the_server_and_the_next_run_imports_the_completed_part(store: Store, tmp_path: Path) -> None:
    queue(store, 4)

    def die(_: float) -> None:
        raise Killed

    with BatchStub(reply=label_reply) as stub:
        with pytest.raises(Killed):
            runner(store, stub, tmp_path, sleep=die).run_round()
        assert runner(store, stub, tmp_path).cancel() == stub.created
        with pytest.raises(LLMError, match="cancelled"):
            runner(store, stub, tmp_path).run_round()
    assert len(batch_rows(store)) == 2 and len(store.pending()) == 2


def test_a_rejected_batch_or_a_round_with_no_result_stops_with_the_reason(store: Store, tmp_path: Path) -> None:
    queue(store, 3)
    with BatchStub(reply=label_reply, plans=["failed", "expire:0"]) as stub:
        with pytest.raises(LLMError, match=r"failed validation .*line 1: model not found"):
            runner(store, stub, tmp_path).run_round()
        with pytest.raises(LLMError, match=r"brought back no result .*batch_expired"):
            runner(store, stub, tmp_path).run_round()
    assert len(store.pending()) == 3 and not stub.executed


def test_a_process_killed_while_polling_resumes_the_same_batch(store: Store, tmp_path: Path) -> None:
    queue(store, 4)
    queue(store, 2, space="other")

    def die(_: float) -> None:
        raise Killed

    with BatchStub(reply=label_reply) as stub:
        with pytest.raises(Killed):
            runner(store, stub, tmp_path, sleep=die).run_round()
        restarted = runner(store, stub, tmp_path)
        (record,) = restarted.in_flight()
        assert record.batch_id == stub.created[0] and record.requests == 4
        report = restarted.run_round()
        assert report is not None and report.batch_id == stub.created[0] and report.imported == 4
        assert len(stub.created) == 1 and len(stub.uploads) == 2  # the input and the output file: no second batch
    assert set(stub.executed.values()) == {1}
    rows = batch_rows(store)
    assert len(rows) == 6 and set(rows.values()) == {1}


def test_a_process_killed_before_recording_the_batch_finds_it_on_the_server(store: Store, tmp_path: Path) -> None:
    queue(store, 3)

    class DiesAfterCreate(BatchAPIRunner):
        saves = 0

        def _save(self, record: Any, spaces: list[str]) -> None:
            DiesAfterCreate.saves += 1
            if DiesAfterCreate.saves == 2:  # the batch exists on the server; its id never reached the store
                raise Killed
            super()._save(record, spaces)

    with BatchStub(reply=label_reply) as stub:
        first = runner(store, stub, tmp_path)
        dying = DiesAfterCreate(store, first.client, first.options)
        with pytest.raises(Killed):
            dying.run_round()
        (record,) = runner(store, stub, tmp_path).in_flight()
        assert record.batch_id is None
        report = runner(store, stub, tmp_path).run_round()
        assert report is not None and report.imported == 3 and len(stub.created) == 1
    assert set(stub.executed.values()) == {1} and set(batch_rows(store).values()) == {1}


def test_a_connection_lost_on_create_adopts_the_batch_the_server_made(store: Store, tmp_path: Path) -> None:
    queue(store, 3)
    with BatchStub(reply=label_reply, plans=["drop-create"]) as stub:
        report = runner(store, stub, tmp_path).run_round()
        assert report is not None and report.imported == 3 and len(stub.created) == 1
    assert set(stub.executed.values()) == {1}


# ------------------------------------------------------------------------------------------------ the CLI


SPACE = "conv-26"


def _env(home: Path, base_url: str) -> dict[str, str]:
    return {
        "TMEM_HOME": str(home),
        "TMEM_LLM": "openai",
        "TMEM_LLM_MODEL": "stub-model",
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "sk-test",
        "TMEM_LLM_BACKOFF_BASE": "0.001",
        "TMEM_LLM_BACKOFF_MAX": "0.01",
        "TMEM_EMBED_BACKEND": "hash",
    }


def _import(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    store = SQLiteStore.open(home / "tmem.db")
    import_spaces(store, [dev_space(SPACE, slice(0, 2))], source="dev")
    store.close()


def test_tmem_build_batch_api_builds_what_a_live_build_builds(tmp_path: Path) -> None:
    _import(tmp_path / "batch")
    _import(tmp_path / "live")
    with BatchStub(reply=stub_reply, plans=["complete", "expire:1"]) as stub:
        env = _env(tmp_path / "batch", stub.base_url)
        args = ["build", SPACE, "--batch-api", "--poll-max", "0", "--json", "--no-progress"]
        result = CliRunner().invoke(cli, args, env=env)
        assert result.exit_code == 0, result.output
        assert "Submitted batch" in result.stderr and "batch round(s)" in result.stderr
        assert set(stub.executed.values()) == {1}
        rounds = len(stub.created)
    with OpenAIStub(reply=stub_reply) as live:
        result_live = CliRunner().invoke(
            cli, ["build", SPACE, "--few-rounds", "--json", "--no-progress"], env=_env(tmp_path / "live", live.base_url)
        )
        assert result_live.exit_code == 0, result_live.output
    (batch_report,) = json.loads(result.stdout)
    (live_report,) = json.loads(result_live.stdout)
    assert batch_report["counts"] == live_report["counts"] and batch_report["counts"]["scenes"] > 0
    assert rounds >= 4  # segment, topics, items with the scene triggers, item triggers with the persona; + expiry
    cost = CliRunner().invoke(cli, ["llm", "cost", SPACE, "--json"], env=env)
    total = json.loads(cost.stdout)["total"]
    assert total["batch_calls"] == sum(stub.executed.values()) and total["errors"] == 0


@pytest.mark.slow
def test_tmem_eval_batch_api_runs_builds_answers_and_judges_in_rounds(tmp_path: Path) -> None:
    from tests.test_eval_stub import _slice
    from tests.test_eval_stub import stub_reply as eval_reply

    data = _slice(tmp_path)
    home, out = tmp_path / "mem", tmp_path / "out"
    with BatchStub(reply=eval_reply) as stub:
        env = {**_env(home, stub.base_url), "TMEM_HOME": ""}
        args = ["--dir", str(home), "eval", "locomo", "--data", str(data), "--out", str(out), "--limit", "2"]
        result = CliRunner().invoke(cli, [*args, "--runs", "2", "--batch-api", "--poll-max", "0"], env=env)
        assert result.exit_code == 0, result.output
        assert set(stub.executed.values()) == {1} and len(stub.created) >= 3  # build rounds, answers, judges
    recs = [json.loads(r) for r in (out / "locomo" / "records.jsonl").read_text().splitlines()]
    assert len(recs) == 2 and all(len(r["judgements"]) == 2 for r in recs)
    store = SQLiteStore.open(home / "tmem.db")
    stages = {c.stage for c in store.llm_calls() if c.outcome == "batch"}
    assert {"segment", "answer", "judge"} <= stages and not store.pending()
    store.close()
