"""LongMemEval evaluation: the official metrics against hand-computed values, and generated S-like and oracle-like
files through import, offline build, --retrieval-only and QA with scripted LLMs. These prove the pipeline and its
bookkeeping, never a quality figure."""

from __future__ import annotations

import json
import math
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from tmem.answer.context import format_date
from tmem.cli.main import cli
from tmem.embed.hashing import HashEmbedder
from tmem.errors import BatchPending, ConfigError
from tmem.eval.longmemeval.data import detect_kind, load_instances, seed_sources
from tmem.eval.longmemeval.metrics import evaluate, official_turn_id, turn_to_session
from tmem.eval.longmemeval.run import eval_longmemeval
from tmem.eval.longmemeval.synth import ABSTENTION, DATE_FORMAT, QUESTION_TYPES, generate, write_file
from tmem.eval.runs import EvalOptions, Models
from tmem.llm.base import ChatRequest
from tmem.llm.scripted import scripted_llm
from tmem.scope import Scope
from tmem.settings import Settings
from tmem.store.sqlite import SQLiteStore

ALL_TYPES = {*QUESTION_TYPES, ABSTENTION}


def test_metrics_match_hand_computed_values() -> None:
    corpus = ["s1_1", "answer_a_1", "s2_1", "answer_b_3", "noans_a_3"]
    gold = ["answer_a_1", "answer_b_3"]
    rankings = [2, 1, 4, 3, 0]  # s2_1, answer_a_1, noans_a_3, answer_b_3, s1_1
    at1 = evaluate(rankings, gold, corpus, 1)
    assert (at1.recall_any, at1.recall_all, at1.ndcg_any) == (0.0, 0.0, 0.0)
    at3 = evaluate(rankings, gold, corpus, 3)
    ideal = 1 + 1 / math.log2(2)  # two relevant entries in the corpus
    assert (at3.recall_any, at3.recall_all) == (1.0, 0.0)
    assert at3.ndcg_any == pytest.approx((1 / math.log2(2)) / ideal)  # hit at rank 2
    at5 = evaluate(rankings, gold, corpus, 5)
    assert (at5.recall_any, at5.recall_all) == (1.0, 1.0)
    assert at5.ndcg_any == pytest.approx((1 / math.log2(2) + 1 / math.log2(4)) / ideal)
    # a ranking that stops early (tmem's context) scores what it returned
    short = evaluate([1], gold, corpus, 10)
    assert (short.recall_any, short.recall_all, short.ndcg_any) == (1.0, 0.0, pytest.approx(1 / ideal))
    # turn -> session: ids lose their turn number; k grows until k distinct sessions are covered
    turns = ["x_1", "x_2", "answer_a_1", "y_1", "noans_a_2"]
    # ranking x_1, x_2, noans_a_2, answer_a_1: sessions x, x, noans_a, answer_a; at k=2 the first 3 entries cover 2
    s2 = turn_to_session([0, 1, 4, 2, 3], ["answer_a_1"], turns, 2)
    assert (s2.recall_any, s2.recall_all, s2.ndcg_any) == (0.0, 0.0, 0.0)
    s3 = turn_to_session([0, 1, 4, 2, 3], ["answer_a_1"], turns, 3)
    assert (s3.recall_any, s3.recall_all) == (1.0, 1.0)
    assert s3.ndcg_any == pytest.approx(1 / math.log2(4))  # the 4th entry, ideal 1
    assert official_turn_id("answer_a", 2, False) == "noans_a_2" and official_turn_id("x", 2, False) == "x_2"
    assert evaluate([0, 1], [], ["a", "b"], 1).ndcg_any == 0.0


def _opts(data: Path, out: Path, **kw: Any) -> EvalOptions:
    return EvalOptions(data=data, out=out, command="test", concurrency=1, **kw)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture
def s_file(tmp_path: Path) -> Path:
    return write_file(tmp_path / "longmemeval_s.json", generate("s", instances=7, sessions=6, turns=(2, 4), seed=7))


async def test_retrieval_only_official_metrics_and_coverage(s_file: Path, tmp_path: Path) -> None:
    store = SQLiteStore.open(tmp_path / "mem" / "tmem.db")
    out = tmp_path / "out"
    models = Models(build=None, answer=None, judge=None)
    opts = _opts(s_file, out, retrieval_only=True, budgets=[500, 1000, 2000, 4000])
    summary = await eval_longmemeval(store, Settings(), opts, models, HashEmbedder())
    recs = _lines(out / "longmemeval" / "records.jsonl")
    assert len(recs) == 7
    assert {r["question_type"] if not r["abstention"] else ABSTENTION for r in recs} == ALL_TYPES
    counted = [r for r in recs if r["counted"]]
    # abstention and the assistant-evidence question have no labelled user turn: left out, as officially
    assert {r["question_type"] for r in counted} == set(QUESTION_TYPES) - {"single-session-assistant"}
    for rec in recs:
        assert set(rec["metrics"]) == {
            "tmem",
            "bm25",
            "dense",
            "hybrid",
            "bm25-session",
            "dense-session",
            "hybrid-session",
        }
        assert set(rec["metrics"]["tmem"]) == {"turn", "session"} and set(rec["metrics"]["bm25-session"]) == {"session"}
        for levels in rec["metrics"].values():
            for scores in levels.values():
                assert len(scores) == 12 and all(0.0 <= v <= 1.0 for v in scores.values())
                # (no gold, as in an uncounted question: all() of nothing is 1, any() is 0, as officially)
                assert scores["recall_all@10"] <= scores["recall_any@10"] or not rec["counted"]
                assert scores["recall_any@1"] <= scores["recall_any@3"] <= scores["recall_any@10"]
        assert [c["budget"] for c in rec["budgets"]] == [500, 1000, 2000, 4000]
    assert summary["kind"] == "s" and summary["counted"] == len(counted) == 5
    tmem = summary["retrieval"]["tmem"]["session"]["recall_any@5"]
    assert tmem["overall"]["n"] == 5 and set(tmem) == {"overall", *(r["question_type"] for r in counted)}
    expected = sum(r["metrics"]["tmem"]["session"]["recall_any@5"] for r in counted) / 5
    assert tmem["overall"]["mean"] == pytest.approx(expected)
    cov = summary["coverage"]["4000"]
    assert set(cov) == {"tmem", "bm25", "dense", "hybrid", "random-scenes"}
    assert cov["bm25"]["overall"]["n"] == 6  # every non-abstention question has has_answer turns
    # the histories are small (< 4000 tokens): the flat baselines hold every turn at 4000 tokens
    assert cov["bm25"]["overall"]["mean"] == 1.0
    saved = json.loads((out / "longmemeval" / "summary.json").read_text())
    assert saved["retrieval"] == summary["retrieval"] and "| tmem |" in (out / "longmemeval" / "report.md").read_text()
    again = await eval_longmemeval(store, Settings(), opts, models, HashEmbedder())  # resume: nothing redone
    assert len(_lines(out / "longmemeval" / "records.jsonl")) == 7 and again["retrieval"] == summary["retrieval"]
    only = await eval_longmemeval(
        store, Settings(), opts.model_copy(update={"types": ["knowledge-update"]}), models, HashEmbedder()
    )
    assert only["questions"] == 1 and set(only["retrieval"]["tmem"]["session"]["recall_any@1"]) == {
        "knowledge-update",
        "overall",
    }
    store.close()


def _user(request: ChatRequest) -> str:
    return request.messages[-1].content


def _judge(request: ChatRequest) -> dict[str, Any]:
    text = _user(request)
    gold = re.search(r"(?:Reference answer|Rubric|Why it cannot be answered): (.*)", text)
    reply = re.search(r"Reply: (.*)", text)
    assert gold is not None and reply is not None
    shared = set(gold.group(1).lower().split()) & set(reply.group(1).lower().split())
    return {"reasoning": "scripted", "label": "CORRECT" if shared else "WRONG"}


async def test_qa_writes_the_official_hypothesis_file_and_judges_per_type(tmp_path: Path) -> None:
    data = generate("oracle", instances=7, seed=3)
    path = write_file(tmp_path / "longmemeval_oracle.json", data)
    store = SQLiteStore.open(tmp_path / "mem" / "tmem.db")
    prompts: list[str] = []

    def answer(request: ChatRequest) -> dict[str, Any]:
        prompts.append(_user(request))
        return {"answer": "The information provided is not enough, I think."}

    judged: list[str] = []

    def judge(request: ChatRequest) -> dict[str, Any]:
        judged.append(request.messages[0].content)
        return _judge(request)

    models = Models(
        build=None,
        answer=scripted_llm(store, fn=answer, model="qa-scripted"),
        judge=scripted_llm(store, fn=judge, model="judge-scripted"),
    )
    out = tmp_path / "out"
    summary = await eval_longmemeval(store, Settings(), _opts(path, out, runs=1), models, HashEmbedder())
    hyps = _lines(out / "longmemeval" / "hypotheses.jsonl")
    assert [set(h) for h in hyps] == [{"question_id", "hypothesis"}] * 7
    assert [h["question_id"] for h in hyps] == [x["question_id"] for x in data]
    assert summary["kind"] == "oracle" and summary["judged"] == 7
    acc = summary["accuracy"]
    assert set(acc) == ALL_TYPES | {"overall"} and acc["overall"]["n"] == 7
    # the reply shares words with the abstention explanation ("information provided is not enough") only
    assert acc[ABSTENTION]["mean"] == 1.0 and acc["single-session-user"]["mean"] == 0.0
    # the question date reaches the reader; each type is judged by its own criteria
    for inst in data:
        asked = format_date(datetime.strptime(inst["question_date"], DATE_FORMAT))
        assert any(inst["question"] in p and f"Today is {asked}." in p for p in prompts), inst["question_id"]
    assert any("off by one" in j for j in judged) and any("cannot be answered" in j for j in judged)
    assert any("rubric" in j for j in judged) and any("updated one" in j for j in judged)
    # judging is optional: answers and the hypothesis file only, in a folder of its own
    bare = Models(build=None, answer=models.answer, judge=None)
    out2 = tmp_path / "out2"
    unjudged = await eval_longmemeval(store, Settings(), _opts(path, out2, judge=False), bare, HashEmbedder())
    assert unjudged["judged"] == 0 and unjudged["judge_model"] is None
    assert len(_lines(out2 / "longmemeval" / "hypotheses.jsonl")) == 7
    with pytest.raises(ConfigError, match="different models"):  # a judged rerun would mix unjudged records
        await eval_longmemeval(store, Settings(), _opts(path, out2), models, HashEmbedder())
    store.close()


async def test_batch_protocol_collects_every_answer_first(tmp_path: Path) -> None:
    path = write_file(tmp_path / "o.json", generate("oracle", instances=4, seed=2))
    store = SQLiteStore.open(tmp_path / "mem" / "tmem.db")
    batch = scripted_llm(store, model="qa", batch=True)
    models = Models(build=None, answer=batch, judge=batch)
    with pytest.raises(BatchPending) as caught:
        await eval_longmemeval(store, Settings(), _opts(path, tmp_path / "out", runs=1), models, HashEmbedder())
    assert caught.value.stage == "answer" and caught.value.count == 4
    assert len(store.pending()) == 4
    store.close()


def test_import_build_and_retrieval_only_from_the_command_line(
    s_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMEM_EMBED_BACKEND", "hash")
    home = tmp_path / "home"

    def run(*args: str) -> str:
        result = CliRunner().invoke(cli, ["--dir", str(home), "--llm", "none", *args], catch_exceptions=True)
        assert result.exit_code == 0, result.output
        return result.output

    assert "in 7 space(s)" in run("import", str(s_file))
    run("build", "--all", "--no-progress")
    out = tmp_path / "out"
    text = run("eval", "longmemeval", "--data", str(s_file), "--out", str(out), "--retrieval-only", "--limit", "3")
    assert "Session level" in text
    summary = json.loads((out / "longmemeval" / "summary.json").read_text())
    assert summary["questions"] == 3
    bad = CliRunner().invoke(
        cli, ["--dir", str(home), "eval", "longmemeval", "--data", str(s_file), "--types", "x", "--retrieval-only"]
    )
    assert isinstance(bad.exception, ConfigError) and "--types: x unknown" in str(bad.exception)


def test_shared_sessions_seed_from_the_instance_sharing_most(tmp_path: Path) -> None:
    data = generate("s", instances=6, sessions=8, pool=12, seed=1)
    instances = load_instances(write_file(tmp_path / "s.json", data))
    sources = seed_sources(instances)
    ids = [set(x["haystack_session_ids"]) for x in data]
    assert data[0]["question_id"] not in sources and len(sources) == 5  # a pool of 12: every later history shares
    for i in range(1, 6):
        chosen = next(j for j in range(i) if data[j]["question_id"] == sources[data[i]["question_id"]])
        assert len(ids[i] & ids[chosen]) == max(len(ids[i] & ids[j]) for j in range(i))


async def test_seeded_embeddings_equal_the_instance_own(tmp_path: Path) -> None:
    """Building with vectors copied from a sharing instance gives the same memory as building alone."""
    path = write_file(tmp_path / "s.json", generate("s", instances=2, sessions=6, pool=6, turns=(2, 4), seed=9))
    opts = _opts(path, tmp_path / "o1", retrieval_only=True)
    models = Models(build=None, answer=None, judge=None)
    shared = SQLiteStore.open(tmp_path / "a.db")
    await eval_longmemeval(shared, Settings(), opts, models, HashEmbedder())
    alone = SQLiteStore.open(tmp_path / "b.db")
    second = load_instances(path)[1]
    await eval_longmemeval(
        alone,
        Settings(),
        opts.model_copy(update={"out": tmp_path / "o2", "types": [second.type_label]}),
        models,
        HashEmbedder(),
    )
    scope = Scope.local(second.key)
    assert [s.model_dump() for s in shared.scenes(scope)] == [s.model_dump() for s in alone.scenes(scope)]
    assert [i.model_dump() for i in shared.items(scope)] == [i.model_dump() for i in alone.items(scope)]
    a = _lines(tmp_path / "o1" / "longmemeval" / "records.jsonl")[1]
    b = _lines(tmp_path / "o2" / "longmemeval" / "records.jsonl")[0]
    assert a["key"] == b["key"] and a["metrics"] == b["metrics"]
    shared.close()
    alone.close()


@given(st.lists(st.booleans(), min_size=1, max_size=30), st.randoms(use_true_random=False))
def test_metric_invariants(relevant: list[bool], rnd: Any) -> None:
    corpus = [f"{'answer' if r else 'x'}_{i}_1" for i, r in enumerate(relevant)]
    gold = [c for c in corpus if "answer" in c]
    order = list(range(len(corpus)))
    rnd.shuffle(order)
    previous = None
    for k in (1, 3, 5, 10):
        s = evaluate(order, gold, corpus, k)
        assert 0.0 <= s.ndcg_any <= 1.0 + 1e-9
        if gold:
            assert s.recall_all <= s.recall_any
        if previous is not None:
            assert s.recall_any >= previous.recall_any and s.recall_all >= previous.recall_all
        previous = s
        ideal = sorted(range(len(corpus)), key=lambda i: not relevant[i])
        assert evaluate(ideal, gold, corpus, k).ndcg_any == (pytest.approx(1.0) if gold else 0.0)
        sessions = turn_to_session(order, gold, corpus, k)
        assert sessions.recall_any >= s.recall_any  # k distinct sessions cover at least the first k turns


def test_load_instances_limit_and_types(s_file: Path) -> None:
    assert [i.type_label for i in load_instances(s_file, types=[ABSTENTION])] == [ABSTENTION]
    assert len(load_instances(s_file, limit=2)) == 2
    with pytest.raises(ConfigError, match="unknown"):
        load_instances(s_file, types=["two-hop"])
    assert detect_kind(load_instances(s_file)) == "s"


def test_m_sized_files_are_detected(tmp_path: Path) -> None:
    path = write_file(tmp_path / "m.json", generate("m", instances=2, turns=(2, 2), sentences=(1, 1), seed=4))
    instances = load_instances(path)
    assert [len(i.space.sessions) for i in instances] == [500, 500] and detect_kind(instances) == "m"
