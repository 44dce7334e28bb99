"""Batch protocol: pending requests -> Batch API JSONL -> an offline runner -> results JSONL -> cache; and the CLI."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from click.testing import CliRunner
from pydantic import BaseModel

from tests.support.openai_stub import OpenAIStub
from tmem.cli.main import cli
from tmem.errors import BatchPending, NotFoundError
from tmem.llm.base import Message
from tmem.llm.batch import export_pending, import_results
from tmem.llm.scripted import ScriptedBackend, scripted_llm
from tmem.llm.service import StructuredLLM
from tmem.scope import Scope
from tmem.settings import Settings
from tmem.store import open_store
from tmem.store.base import Store
from tmem.store.sqlite import SQLiteStore


class Label(BaseModel):
    label: str
    confidence: float


def prompt(i: int) -> list[Message]:
    return [Message(role="system", content="Label the scene."), Message(role="user", content=f"Scene {i}")]


def label_reply(body: dict[str, Any]) -> str:
    return json.dumps({"label": body["messages"][-1]["content"].lower(), "confidence": 0.9})


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """An empty store on each backend (SQLite file, PostgreSQL database)."""
    s = open_store(store_url)
    yield s
    s.close()


async def queue_requests(llm: StructuredLLM, n: int, space: str = "conv", stage: str = "topics", start: int = 0) -> int:
    results = await asyncio.gather(
        *(llm.complete(prompt(i), Label, stage=stage, space=Scope.local(space)) for i in range(start, start + n)),
        return_exceptions=True,
    )
    assert all(isinstance(r, BatchPending) for r in results), results
    return len(results)


def run_offline(stub: OpenAIStub, batch_file: Path, results_file: Path) -> None:
    """Act as the Batch API: send each exported body to the stub server and write Batch *output* lines."""

    async def run() -> list[str]:
        client = openai.AsyncOpenAI(base_url=stub.base_url, api_key="k", max_retries=0)
        out = []
        try:
            for raw in batch_file.read_text().splitlines():
                line = json.loads(raw)
                assert line["method"] == "POST" and line["url"] == "/v1/chat/completions"
                completion = await client.chat.completions.create(**line["body"])
                result = {
                    "id": f"batch_req_{len(out)}",
                    "custom_id": line["custom_id"],
                    "response": {"status_code": 200, "request_id": "r", "body": completion.model_dump()},
                    "error": None,
                }
                out.append(json.dumps(result))
        finally:
            await client.close()
        return out

    results_file.write_text("\n".join(asyncio.run(run())) + "\n")


def test_round_trip_through_an_offline_runner(store: Store, tmp_path: Path) -> None:
    llm = scripted_llm(store, batch=True, model="gpt-test")
    asyncio.run(queue_requests(llm, 3))
    asyncio.run(queue_requests(llm, 1, space="other"))  # the same request in another space
    assert len(store.pending()) == 4

    batch_file = tmp_path / "batch.jsonl"
    assert export_pending(store, batch_file) == 3  # one line per request hash
    lines = [json.loads(x) for x in batch_file.read_text().splitlines()]
    assert len({x["custom_id"] for x in lines}) == 3
    assert {x["body"]["response_format"]["type"] for x in lines} == {"json_schema"}
    assert export_pending(store, tmp_path / "other.jsonl", space=Scope.local("other")) == 1

    results_file = tmp_path / "results.jsonl"
    with OpenAIStub(reply=label_reply) as stub:
        run_offline(stub, batch_file, results_file)
    assert len(stub.chat_requests) == 3

    report = import_results(store, results_file)
    assert (report.imported, report.already_imported, report.bad, report.still_pending) == (3, 0, [], 0)
    batch_rows = [c for c in store.llm_calls() if c.outcome == "batch"]
    assert len(batch_rows) == 4 and all(c.tokens_in > 0 and c.tokens_out > 0 for c in batch_rows)
    assert {c.model for c in batch_rows} == {"gpt-test"}

    # The build reruns (live mode now): every answer comes from the cache, the backend sees zero requests.
    live = StructuredLLM(ScriptedBackend(), store, model="gpt-test", settings=Settings(llm="openai"))

    async def rerun() -> list[Label]:
        out = [
            (await live.complete(prompt(i), Label, stage="topics", space=Scope.local("conv"))).output for i in range(3)
        ]
        out.append((await live.complete(prompt(0), Label, stage="topics", space=Scope.local("other"))).output)
        return out

    labels = asyncio.run(rerun())
    assert [x.label for x in labels] == ["scene 0", "scene 1", "scene 2", "scene 0"]
    backend = live.backend
    assert isinstance(backend, ScriptedBackend) and backend.requests == []

    # Importing the same file again changes nothing and is not an error.
    again = import_results(store, results_file)
    assert (again.imported, again.already_imported, again.bad) == (0, 3, [])


def test_bad_lines_are_reported_and_good_ones_kept(store: Store, tmp_path: Path) -> None:
    asyncio.run(queue_requests(scripted_llm(store, batch=True), 5))
    hashes = [p.request_hash for p in store.pending()]

    def ok(custom_id: str, content: str | None = '{"label": "a", "confidence": 1}') -> dict[str, Any]:
        body = {
            "id": "c",
            "object": "chat.completion",
            "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3},
        }
        return {"custom_id": custom_id, "response": {"status_code": 200, "body": body}, "error": None}

    failed = {"custom_id": hashes[1], "response": None, "error": {"code": "server_error", "message": "boom"}}
    limited = {"custom_id": hashes[2], "response": {"status_code": 429, "body": {"error": {"message": "slow"}}}}
    lines = [
        json.dumps(ok(hashes[0])),
        "{not json",
        json.dumps(failed),
        json.dumps(limited),
        "",
        json.dumps(ok(hashes[3], content=None)),
        json.dumps(ok("f" * 64)),
        json.dumps(["a list"]),
        json.dumps({"response": {}}),
    ]
    results = tmp_path / "results.jsonl"
    results.write_text("\n".join(lines) + "\n")
    report = import_results(store, results)
    assert report.imported == 1 and report.still_pending == 4
    reasons = {bad.line: bad.reason for bad in report.bad}
    assert sorted(reasons) == [2, 3, 4, 6, 7, 8, 9]
    assert reasons[2].startswith("not JSON")
    assert reasons[3] == "error: boom"
    assert reasons[4] == "status_code 429: slow"
    assert reasons[6].startswith("no message content")
    assert reasons[7].startswith("unknown custom_id")
    assert reasons[8] == "not a JSON object"
    assert reasons[9] == "no custom_id"
    assert {bad.custom_id for bad in report.bad if bad.line in (3, 4, 6)} == set(hashes[1:4])
    assert store.cached_response(Scope.local("conv"), hashes[0]) is not None
    assert store.cached_response(Scope.local("conv"), hashes[1]) is None


def test_missing_results_file_is_a_clear_error(store: Store, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="does not exist"):
        import_results(store, tmp_path / "nope.jsonl")


# ---------------------------------------------------------------------------------------------------- CLI


def _seed(home: Path) -> None:
    store = SQLiteStore.open(home / "tmem.db")
    try:
        llm = scripted_llm(store, replies=[{"label": "x", "confidence": 1.0}] * 2, model="gpt-test")

        async def run() -> None:
            await llm.complete(prompt(0), Label, stage="segment", space=Scope.local("conv"))
            await llm.complete(prompt(0), Label, stage="segment", space=Scope.local("conv"))  # cached
            await llm.complete(prompt(1), Label, stage="topics", space=Scope.local("conv"))

        asyncio.run(run())
        llm.batch = True
        asyncio.run(queue_requests(llm, 2, stage="items", start=2))  # prompts 2 and 3: not cached in conv
        asyncio.run(queue_requests(llm, 1, space="conv2", stage="items"))  # prompt 0: the cache is per space
    finally:
        store.close()


def test_cli_cost_text_and_json(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    _seed(home)
    result = CliRunner().invoke(cli, ["--dir", str(home), "llm", "cost", "conv", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["space"] == "conv" and payload["models"] == ["gpt-test"]
    stages = {s["stage"]: s for s in payload["stages"]}
    assert list(stages) == ["segment", "topics"]
    assert stages["segment"]["calls"] == 1 and stages["segment"]["cached_calls"] == 1
    assert stages["segment"]["input_tokens"] > 0
    total = payload["total"]
    assert total["calls"] == 2 and total["cached_calls"] == 1
    assert total["input_tokens"] == sum(s["input_tokens"] for s in payload["stages"])
    assert set(total) == {"stage", "calls", "cached_calls", "batch_calls", "errors", "input_tokens", "output_tokens"}

    text = CliRunner().invoke(cli, ["--dir", str(home), "llm", "cost"])
    assert text.exit_code == 0 and "all spaces" in text.output and "segment" in text.output

    missing = CliRunner().invoke(cli, ["--dir", str(home), "llm", "cost", "nope"])
    assert missing.exit_code == 1 and isinstance(missing.exception, NotFoundError)


def test_cli_batch_export_and_import(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    _seed(home)
    out = tmp_path / "batch.jsonl"
    result = CliRunner().invoke(cli, ["--dir", str(home), "llm", "batch-export", str(out), "--space", "conv2"])
    assert result.exit_code == 0, result.output
    assert "Wrote 1 request(s)" in result.output
    (line,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert line["body"]["messages"][-1]["content"] == "Scene 0"
    all_out = tmp_path / "all.jsonl"
    result = CliRunner().invoke(cli, ["--dir", str(home), "llm", "batch-export", str(all_out), "--json"])
    assert json.loads(result.output) == {"file": str(all_out), "requests": 3, "space": None}

    good = {
        "custom_id": line["custom_id"],
        "response": {
            "status_code": 200,
            "body": {"choices": [{"message": {"content": '{"label": "y", "confidence": 0.5}'}}], "usage": {}},
        },
    }
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps(good) + "\n" + "garbage\n")
    result = CliRunner().invoke(cli, ["--dir", str(home), "llm", "batch-import", str(results)])
    assert result.exit_code == 1
    assert "Imported 1 result(s)" in result.output
    assert "line 2: not JSON" in result.output
    cost = json.loads(CliRunner().invoke(cli, ["--dir", str(home), "llm", "cost", "conv2", "--json"]).output)
    assert cost["total"]["batch_calls"] == 1
    pending = json.loads(
        CliRunner().invoke(cli, ["--dir", str(home), "llm", "batch-export", str(out), "--json"]).output
    )
    assert pending["requests"] == 2  # conv's two requests are still waiting


async def test_requests_answered_live_since_they_were_queued_are_not_exported_again(
    store: Store, tmp_path: Path
) -> None:
    """A build queued requests for the batch protocol, then ran live instead: exporting must not pay for them twice.
    A request still unanswered in another space stays pending there."""
    batch = scripted_llm(store, batch=True)
    await queue_requests(batch, 2, space="conv")  # requests 0 and 1
    await queue_requests(batch, 1, space="other")  # request 0 again, in another space
    await queue_requests(batch, 1, space="other", start=5)
    queued = {(p.space, p.request_hash) for p in store.pending()}
    live = scripted_llm(store, fn=lambda req: {"label": "x", "confidence": 1.0})
    answered = await live.complete(prompt(0), Label, stage="topics", space=Scope.local("conv"))

    out = tmp_path / "batch.jsonl"
    assert export_pending(store, out) == 3  # request 0 (still pending in "other"), 1 and 5
    assert {(p.space, p.request_hash) for p in store.pending()} == queued - {("conv", answered.request_hash)}
    assert answered.request_hash in {json.loads(line)["custom_id"] for line in out.read_text().splitlines()}
