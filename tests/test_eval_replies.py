"""`tmem eval replies` (issue 29): a reply from tmem's context and one from flat dense's at the same tokens per cue
probe, a judge that sees both, through the scripted LLM and through the batch protocol end to end. The scripted
reply model remembers the cue only when the cue is in the context it was given, and the scripted judge labels a reply
CORRECT only when it names the cue, so the table follows what each context held (hash embedder: bookkeeping, never a
quality figure)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.support.openai_stub import OpenAIStub
from tests.test_llm_batch import run_offline
from tmem import Memory
from tmem.cli.main import cli
from tmem.embed.hashing import HashEmbedder
from tmem.errors import BatchPending, InputError
from tmem.eval.baselines import SpaceBaselines
from tmem.eval.replies import _first_a, load_probes, report, run_replies
from tmem.index.space import cached_vectorizer
from tmem.llm.base import ChatRequest
from tmem.llm.scripted import scripted_llm
from tmem.scope import Scope
from tmem.settings import Settings

SMALL_TALK = [
    "The weather was grey all week.",
    "I painted the fence on Saturday.",
    "My sister visited with her kids.",
    "We tried the new bakery downtown.",
    "The train was late again this morning.",
    "I finished a long novel about sailors.",
]


def _messages() -> list[dict[str, str]]:
    out = []
    for day, text in enumerate(SMALL_TALK):
        out.append({"speaker": "Ann", "text": text, "time": f"2023-05-{day * 3 + 1:02d}T10:00:00"})
        out.append({"speaker": "Bob", "text": "Nice, tell me more.", "time": f"2023-05-{day * 3 + 1:02d}T10:01:00"})
    out.append({"speaker": "Ann", "text": "Someone stole my identity, so I shred every receipt now.",
                "time": "2023-05-25T09:00:00"})  # fmt: skip
    out.append({"speaker": "Bob", "text": "That sounds awful, shredding is wise.", "time": "2023-05-25T09:01:00"})
    return out


PROBES = {
    "conv": [
        {
            "key": "p1",
            "kind": "cue",
            "query": "I feed every receipt into the shredder on Sundays.",
            "gold_turn_ids": ["CUE"],
            "relation_type": "causal",
        },
        {"key": "q1", "kind": "locomo", "query": "What did Ann paint?", "gold_turn_ids": ["x"]},
    ]
}


def _remember(user: str) -> str:
    """The reply model: it remembers the theft only when the memories it was given hold it."""
    memories = user.split("<memories>", 1)[1].split("</memories>", 1)[0]
    text = "I remember the identity theft, no wonder." if "stole my identity" in memories else "Sounds like a plan!"
    return json.dumps({"reply": text})


def _judge(user: str) -> str:
    a = re.search(r"Reply A: (.*)", user)
    b = re.search(r"Reply B: (.*)", user)
    assert a is not None and b is not None
    label = {True: "CORRECT", False: "WRONG"}
    return json.dumps({"reasoning": "r", "a": label["theft" in a.group(1)], "b": label["theft" in b.group(1)]})


def _user(request: ChatRequest) -> str:
    return request.messages[-1].content


def _reply_or_judge(body: dict[str, Any]) -> str:
    """The stub server's model: a judge request or a reply request."""
    user = body["messages"][-1]["content"]
    return _judge(user) if "Reply A:" in user else _remember(user)


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    mem = Memory.open(tmp_path / "home", Settings(llm="none", embed_backend="hash"), embedder=HashEmbedder())
    mem.add_messages("conv", _messages())
    mem.build("conv")
    return mem


def _cue_id(mem: Memory) -> str:
    return next(t.id for t in mem.store.turns(Scope.local("conv")) if "stole my identity" in t.text)


def _probes(mem: Memory, tmp_path: Path) -> Path:
    raw = json.loads(json.dumps(PROBES))
    raw["conv"][0]["gold_turn_ids"] = [_cue_id(mem)]
    path = tmp_path / "probes.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


async def test_replies_from_both_contexts_judged_blind(memory: Memory, tmp_path: Path) -> None:
    probes = load_probes(_probes(memory, tmp_path), "conv")
    assert [p.key for p in probes] == ["p1"]  # the LoCoMo question is no cue probe
    scope = Scope.local("conv")
    store = memory.store
    baselines = SpaceBaselines(store, scope, cached_vectorizer(store, scope, memory.embedder))
    writer = scripted_llm(store, fn=lambda r: _remember(_user(r)))
    judge = scripted_llm(store, fn=lambda r: _judge(_user(r)), model="judge")
    budgets = [12, 400]
    records = await run_replies(store, memory.retriever, baselines, probes, budgets, writer, judge)
    assert [(r.key, r.budget) for r in records] == [("p1", 12), ("p1", 400)]
    for rec in records:
        assert (rec.speaker, rec.listener) == ("Ann", "Bob")  # the cue's speaker says the trigger
        for side in rec.systems.values():
            assert side.tokens <= rec.budget
            assert side.connects == side.cue_in_context  # the judge saw which reply remembered, whatever its place
            assert ("theft" in side.reply) == side.cue_in_context
            assert (side.position is not None) == side.cue_in_context
    small, large = records
    assert not any(s.cue_in_context for s in small.systems.values())  # 12 tokens hold no turn with the cue
    assert all(s.cue_in_context for s in large.systems.values())  # the whole conversation fits in 400
    judged = [r for r in judge.backend.requests]
    assert len(judged) == 2 and all("shred every receipt" in r.messages[-1].content for r in judged)
    table = report(records)
    assert "| conv | 400 | 1 | 100.0 / 100.0 | 100.0 / 100.0 | 100.0 / 100.0 |" in table
    assert "| conv | 12 | 1 | 0.0 / 0.0 | 0.0 / 0.0 | - / - | - / - |" in table
    unjudged = await run_replies(store, memory.retriever, baselines, probes, [400], writer)
    assert unjudged[0].systems["tmem"].connects is None and "not judged" in report(unjudged)
    assert {_first_a(f"k{n}", 500) for n in range(20)} == {True, False}  # both orders occur


async def test_batch_mode_queues_every_reply_then_every_judgement(memory: Memory, tmp_path: Path) -> None:
    probes = load_probes(_probes(memory, tmp_path), "conv")
    scope = Scope.local("conv")
    store = memory.store
    baselines = SpaceBaselines(store, scope, cached_vectorizer(store, scope, memory.embedder))
    writer = scripted_llm(store, fn=lambda r: _remember(_user(r)), batch=True)
    with pytest.raises(BatchPending) as caught:
        await run_replies(store, memory.retriever, baselines, probes, [100, 400], writer)
    assert (caught.value.stage, caught.value.count) == ("answer.reply", 4)


def test_probe_files_are_checked(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(InputError, match="cannot read it as JSON"):
        load_probes(bad, "conv")
    bad.write_text(json.dumps({"other": []}), encoding="utf-8")
    with pytest.raises(InputError, match="no probes for space 'conv'"):
        load_probes(bad, "conv")
    bad.write_text(json.dumps([{"key": "p", "query": "", "gold_turn_ids": ["a"]}]), encoding="utf-8")
    with pytest.raises(InputError, match="probe 0"):
        load_probes(bad, "conv")
    bad.write_text(json.dumps([{"key": "q", "kind": "locomo", "query": "x", "gold_turn_ids": ["a"]}]))
    with pytest.raises(InputError, match="no cue probes"):
        load_probes(bad, "conv")


def test_cli_runs_through_the_batch_protocol(memory: Memory, tmp_path: Path) -> None:
    probes = _probes(memory, tmp_path)
    home = tmp_path / "home"
    memory.close()
    env = {"TMEM_LLM": "openai", "TMEM_LLM_MODEL": "m", "OPENAI_API_KEY": "unused", "TMEM_EMBED_BACKEND": "hash"}
    base = [
        "--dir",
        str(home),
        "eval",
        "replies",
        "conv",
        "--probes",
        str(probes),
        "--budgets",
        "12,400",
        "--layout",
        "date",
    ]
    runner = CliRunner()
    # at 12 tokens both contexts are empty: one request for both (the same request is one hash, asked once)
    for stage, count in (("answer.reply", 3), ("judge", 2)):
        batch = tmp_path / f"{stage}.jsonl"
        result = runner.invoke(cli, [*base, "--judge", "--batch-out", str(batch)], env=env)
        assert isinstance(result.exception, BatchPending), result.output
        assert f"{count} {stage} request(s) of conv written to {batch}" in str(result.exception)
        assert len(batch.read_text().splitlines()) == count
        answers = tmp_path / f"{stage}.results.jsonl"
        with OpenAIStub(reply=_reply_or_judge) as stub:
            run_offline(stub, batch, answers)
        imported = runner.invoke(cli, ["--dir", str(home), "llm", "batch-import", str(answers)], env=env)
        assert imported.exit_code == 0, imported.output
    out = tmp_path / "table.md"
    done = [*base, "--judge", "--batch-out", str(tmp_path / "none.jsonl"), "--out", str(out), "--json"]
    result = runner.invoke(cli, done, env=env)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["layout"] == "date" and len(payload["records"]) == 2
    assert "| conv | 400 | 1 | 100.0 / 100.0 | 100.0 / 100.0 | 100.0 / 100.0 |" in out.read_text()
    # another layout of tmem's 400-token context is another request; flat dense's and the empty ones are answered
    other = runner.invoke(cli, [*done, "--layout", "rank"], env=env)
    assert isinstance(other.exception, BatchPending) and other.exception.count == 1
    bad = runner.invoke(cli, [*base, "--layout", "sideways"], env=env)
    assert "unknown context layout 'sideways'" in str(bad.exception)
    none = runner.invoke(cli, [*base], env={**env, "TMEM_LLM": "none"})
    assert "needs a model to write the replies" in str(none.exception)
