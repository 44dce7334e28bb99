"""The evaluation harness end to end on a slice of real dev data: extractive memory, deterministic hash embedder,
scripted answer and judge LLMs. These prove the pipeline and its bookkeeping, never a quality figure."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tmem.embed.hashing import HashEmbedder
from tmem.errors import ConfigError, InputError, LLMError
from tmem.eval.records import AnswerRecord, CoverageRecord
from tmem.eval.runs import EvalOptions, Models, eval_locomo, eval_plus, read_locomo_overall
from tmem.llm.base import ChatRequest
from tmem.llm.scripted import scripted_llm
from tmem.settings import Settings
from tmem.store.sqlite import SQLiteStore

BUNDLED = Path(__file__).resolve().parents[1] / "src" / "tmem" / "eval" / "data" / "locomo_conv30_s1-5.json"
PLUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo_plus.dev.json"


@pytest.fixture
def locomo_slice(tmp_path: Path) -> Path:
    """conv-30 sessions 1-2 (44 turns) with the questions whose evidence lies there."""
    sample = json.loads(BUNDLED.read_text())[0]
    conv = {k: v for k, v in sample["conversation"].items() if not re.match(r"session_[3-9]", k)}
    qa = [q for q in sample["qa"] if all(e.startswith(("D1:", "D2:")) for e in q["evidence"])]
    path = tmp_path / "slice.json"
    path.write_text(json.dumps([{"sample_id": "conv-30", "conversation": conv, "qa": qa}]))
    return path


def _user(request: ChatRequest) -> str:
    return request.messages[-1].content


def _question(request: ChatRequest) -> str:
    return re.search(r"Question: <question>(.*)</question>", _user(request))[1]  # type: ignore[index]


def answer_fn(request: ChatRequest) -> dict[str, Any]:
    if request.schema_name == "MemoryReply" or "MemoryReply" in request.schema_name:
        return {"reply": "Is this about what you told me before?"}
    question = _question(request)
    return {"answer": " ".join(question.split()[:3])}


def judge_fn(request: ChatRequest) -> dict[str, Any]:
    text = _user(request)
    gold = re.search(r"Gold answer: (.*)", text)
    pred = re.search(r"(?:Generated answer|Reply): (.*)", text)
    assert pred is not None
    shared = gold is None or set(gold.group(1).lower().split()) & set(pred.group(1).lower().split())
    return {"reasoning": "scripted", "label": "CORRECT" if shared else "WRONG"}


def _opts(data: Path, out: Path, **kw: Any) -> EvalOptions:
    return EvalOptions(data=data, out=out, command="test", concurrency=1, **kw)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


async def test_retrieval_only_locomo_records_and_report(locomo_slice: Path, tmp_path: Path) -> None:
    store = SQLiteStore.open(tmp_path / "mem" / "tmem.db")
    out = tmp_path / "out"
    models = Models(build=None, answer=None, judge=None)
    opts = _opts(locomo_slice, out, retrieval_only=True, limit=6, ablate="SL,TF", sweep=["kS=2,8"])
    report = await eval_locomo(store, Settings(), opts, models, HashEmbedder())
    recs = [CoverageRecord.model_validate(x) for x in _lines(out / "locomo" / "records.jsonl")]
    assert len(recs) == 6 * 5  # full, w/o SL, w/o TF, kS=2, kS=8
    for rec in recs:
        assert set(rec.systems) == {"tmem", "bm25", "dense", "hybrid", "random-scenes"}
        budget = rec.systems["tmem"].tokens
        assert all(s.tokens <= budget for s in rec.systems.values())  # same budget for everyone
        assert all(t.startswith("D") for t in rec.gold_turn_ids)
    full = {r.key: r for r in recs if r.variant == "full"}
    no_scenes = [r for r in recs if r.variant == "w/o SL"]
    assert all(not any(ref.kind == "scene" for ref in r.retrieved) for r in no_scenes)
    assert any(ref.kind == "scene" for r in full.values() for ref in r.retrieved)
    assert all(ref.routes for r in full.values() for ref in r.retrieved)
    md = (out / "locomo" / "report.md").read_text()
    assert "random scenes (query-agnostic control)" in md and "| kS=2 | tmem (cascade)" in md
    manifest = json.loads((out / "locomo" / "manifest.json").read_text())
    assert manifest["mode"] == "retrieval-only" and manifest["embed_model"] == "hash-256"
    assert manifest["data_files"] == {str(locomo_slice): hashlib.sha256(locomo_slice.read_bytes()).hexdigest()}
    assert report.rows[0].n == 6
    # rerun: everything is already there
    again = await eval_locomo(store, Settings(), opts, models, HashEmbedder())
    assert len(_lines(out / "locomo" / "records.jsonl")) == 30 and again.rows == report.rows
    # the same data given by another path is the same run; another preset would mix results and is refused
    copy = tmp_path / "copy.json"
    copy.write_bytes(locomo_slice.read_bytes())
    await eval_locomo(store, Settings(), opts.model_copy(update={"data": copy}), models, HashEmbedder())
    with pytest.raises(ConfigError, match="different preset"):
        await eval_locomo(store, Settings(), opts.model_copy(update={"preset": "minilm"}), models, HashEmbedder())


async def test_qa_locomo_complete_records_and_resume(
    locomo_slice: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteStore.open(tmp_path / "mem" / "tmem.db")
    out = tmp_path / "out"
    calls = {"n": 0}

    def flaky_answer(request: ChatRequest) -> dict[str, Any]:
        calls["n"] += 1
        if calls["n"] == 4:  # the fourth question dies: an interruption mid-run
            raise LLMError("connection dropped (test)")
        return answer_fn(request)

    answer = scripted_llm(store, fn=flaky_answer, model="qa-scripted")
    judge = scripted_llm(store, fn=judge_fn, model="judge-scripted")
    opts = _opts(locomo_slice, out, limit=5, runs=2)
    with pytest.raises(LLMError, match="connection dropped"):
        await eval_locomo(store, Settings(), opts, Models(build=None, answer=answer, judge=judge), HashEmbedder())
    first = _lines(out / "locomo" / "records.jsonl")
    assert len(first) == 3
    # a write cut short by the interruption is redone, not trusted
    with (out / "locomo" / "records.jsonl").open("a") as fh:
        fh.write('{"key": "conv-30#99", "variant": "fu')
    answer2 = scripted_llm(store, fn=answer_fn, model="qa-scripted")
    judge2 = scripted_llm(store, fn=judge_fn, model="judge-scripted")
    report = await eval_locomo(
        store, Settings(), opts, Models(build=None, answer=answer2, judge=judge2), HashEmbedder()
    )
    assert "incomplete (an interrupted write)" in caplog.text
    recs = [AnswerRecord.model_validate(x) for x in _lines(out / "locomo" / "records.jsonl")]
    assert len(recs) == 5 and len({r.key for r in recs}) == 5
    assert [r.model_dump() for r in recs[:3]] == [AnswerRecord.model_validate(x).model_dump() for x in first]
    asked = {_question(r) for r in answer2.backend.requests}  # type: ignore[attr-defined]
    assert asked == {r.question for r in recs[3:]}  # only the missing questions were answered again
    for r in recs:
        assert r.prediction and r.gold and r.question_time.startswith("The question is asked after")
        assert [j.run for j in r.judgements] == [1, 2] and r.f1 is not None
        assert r.retrieved and r.context_tokens > 0 and r.prompt_tokens > r.context_tokens
        assert r.judge_tokens_in > 0 and r.category in (1, 2, 3, 4)
    row = report.rows[0]
    assert row.overall.n == 5 and row.runs == 2 and row.f1 is not None
    md = (out / "locomo" / "report.md").read_text()
    assert "| Single-hop | Multi-hop | Temporal | Open Domain | Overall | F1 |" in md


async def test_resuming_with_another_answer_protocol_is_refused(locomo_slice: Path, tmp_path: Path) -> None:
    # Records are keyed by question only: reusing them under another --runs (missing runs would count as WRONG) or
    # another prompt (short answers reported as chain of thought) would mix results.
    store = SQLiteStore.open(tmp_path / "mem" / "tmem.db")
    answer = scripted_llm(store, fn=answer_fn, model="qa-scripted")
    judge = scripted_llm(store, fn=judge_fn, model="judge-scripted")
    models = Models(build=None, answer=answer, judge=judge)
    opts = _opts(locomo_slice, tmp_path / "out", limit=1, runs=1)
    await eval_locomo(store, Settings(), opts, models, HashEmbedder())
    with pytest.raises(ConfigError, match="different runs"):
        await eval_locomo(store, Settings(), opts.model_copy(update={"runs": 2}), models, HashEmbedder())
    with pytest.raises(ConfigError, match="different prompt"):
        await eval_locomo(store, Settings(), opts.model_copy(update={"prompt": "cot"}), models, HashEmbedder())
    await eval_locomo(store, Settings(), opts, models, HashEmbedder())  # the same protocol resumes


@pytest.mark.skipif(not PLUS.exists(), reason="dev data not present")
async def test_resuming_plus_with_another_stitching_is_refused(locomo_slice: Path, tmp_path: Path) -> None:
    store = SQLiteStore.open(tmp_path / "mem" / "tmem.db")
    opts = _opts(PLUS, tmp_path / "out", locomo=locomo_slice, retrieval_only=True, limit=1)
    await eval_plus(store, Settings(), opts, Models(None, None, None), HashEmbedder())
    with pytest.raises(ConfigError, match="different stitch"):
        per_probe = opts.model_copy(update={"stitch": "per-probe"})
        await eval_plus(store, Settings(), per_probe, Models(None, None, None), HashEmbedder())


def test_a_damaged_locomo_report_beside_plus_is_a_clear_error(tmp_path: Path) -> None:
    assert read_locomo_overall(tmp_path) is None  # no LoCoMo run in this folder: no gap, said in the report
    (tmp_path / "locomo").mkdir()
    (tmp_path / "locomo" / "report.json").write_text('{"rows": [{"variant": "full", "overall": {"mean": 61.5}}]}')
    assert read_locomo_overall(tmp_path) == 61.5
    (tmp_path / "locomo" / "report.json").write_text('{"rows": [')
    with pytest.raises(InputError, match="rerun `tmem eval locomo`"):
        read_locomo_overall(tmp_path)


async def test_qa_needs_llms(locomo_slice: Path, tmp_path: Path) -> None:
    store = SQLiteStore.open(":memory:")
    with pytest.raises(ConfigError, match="--retrieval-only"):
        await eval_locomo(store, Settings(), _opts(locomo_slice, tmp_path), Models(None, None, None), HashEmbedder())


@pytest.mark.skipif(not PLUS.exists(), reason="dev data not present")
async def test_plus_retrieval_only_and_qa(locomo_slice: Path, tmp_path: Path) -> None:
    store = SQLiteStore.open(tmp_path / "mem" / "tmem.db")
    out = tmp_path / "out"
    opts = _opts(PLUS, out, locomo=locomo_slice, retrieval_only=True, limit=4)
    await eval_plus(store, Settings(), opts, Models(None, None, None), HashEmbedder())
    recs = [CoverageRecord.model_validate(x) for x in _lines(out / "locomo-plus" / "records.jsonl")]
    assert len(recs) == 4 and all(r.gold_turn_ids[0].startswith("P") for r in recs)
    assert all(r.systems["tmem"].coverage is None for r in recs)  # cue hit is binary
    assert all(r.relation in ("causal", "state", "goal", "value") for r in recs)
    header = next(x for x in (out / "locomo-plus" / "report.md").read_text().splitlines() if x.startswith("| Variant"))
    assert header.endswith("| Cue hit | Tokens |") and {r.relation for r in recs} <= set(header.split(" | "))
    stitching = json.loads((out / "locomo-plus" / "stitching.json").read_text())
    assert stitching["probes"] == 4 and stitching["spaces"] == 1
    # QA on the same stitched memory, with the LoCoMo gap when a LoCoMo report sits in the same folder
    (out / "locomo").mkdir()
    (out / "locomo" / "report.json").write_text(json.dumps({"rows": [{"variant": "full", "overall": {"mean": 70.0}}]}))
    answer = scripted_llm(store, fn=answer_fn, model="qa-scripted")
    judge = scripted_llm(store, fn=judge_fn, model="judge-scripted")
    qa_out = tmp_path / "qa"
    (qa_out / "locomo").mkdir(parents=True)
    (qa_out / "locomo" / "report.json").write_text((out / "locomo" / "report.json").read_text())
    opts = _opts(PLUS, qa_out, locomo=locomo_slice, limit=4, runs=1)
    report = await eval_plus(store, Settings(), opts, Models(None, answer, judge), HashEmbedder())
    assert report.locomo_overall == 70.0
    records = [AnswerRecord.model_validate(x) for x in _lines(qa_out / "locomo-plus" / "records.jsonl")]
    assert len(records) == 4
    for r in records:
        assert r.gold and ":" in r.gold  # the cue dialogue with real speaker names
        assert r.question_time.startswith("Today is")
    first = answer.backend.requests[0]  # type: ignore[attr-defined]
    assert "You are: <you>" in first.messages[1].content and "Talking with: <speaker>" in first.messages[1].content
    md = (qa_out / "locomo-plus" / "report.md").read_text()
    assert "| Variant | LoCoMo | LoCoMo-Plus | Gap |" in md and "70.00" in md


class _CountingEmbedder(HashEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.texts = 0

    def embed(self, texts: Any) -> Any:
        self.texts += len(texts)
        return super().embed(texts)


@pytest.mark.skipif(not PLUS.exists(), reason="dev data not present")
async def test_stitched_space_reuses_the_conversations_vectors(locomo_slice: Path, tmp_path: Path) -> None:
    store = SQLiteStore.open(tmp_path / "mem" / "tmem.db")
    models = Models(None, None, None)
    await eval_locomo(
        store, Settings(), _opts(locomo_slice, tmp_path / "a", retrieval_only=True, limit=1), models, HashEmbedder()
    )
    counting = _CountingEmbedder()
    opts = _opts(PLUS, tmp_path / "b", locomo=locomo_slice, retrieval_only=True, limit=1)
    await eval_plus(store, Settings(), opts, models, counting)
    fresh = _CountingEmbedder()
    await eval_plus(
        SQLiteStore.open(tmp_path / "other.db"),
        Settings(),
        _opts(PLUS, tmp_path / "c", locomo=locomo_slice, retrieval_only=True, limit=1),
        models,
        fresh,
    )
    assert 0 < counting.texts < fresh.texts / 2  # most texts came from conv-30's cache
