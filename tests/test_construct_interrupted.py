"""Issue 11, defects 5-7: ``tmem check`` after an interrupted build, BatchPending outside LLMError, and very long turns
(bounded embedding input, never a multi-gigabyte build)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.openai_stub import OpenAIStub
from tests.support.stage_replies import dev_space, scripted_reply
from tmem.cli.main import cli
from tmem.construct.check import check_space
from tmem.construct.pipeline import build_space
from tmem.embed.base import clip_texts
from tmem.embed.hashing import HashEmbedder
from tmem.embed.remote import REMOTE_MAX_CHARS, OpenAIEmbedder
from tmem.errors import BatchPending, BuildError, LLMError, LLMTransientError, TmemError
from tmem.ingest.importer import import_spaces
from tmem.llm.request import ChatRequest
from tmem.llm.scripted import scripted_llm
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore

SPACE = "conv-26"


def test_batch_pending_is_a_signal_not_an_llm_failure() -> None:
    assert issubclass(BatchPending, TmemError) and not issubclass(BatchPending, LLMError)


async def test_code_retrying_on_llm_errors_does_not_swallow_batch_pending() -> None:
    from pydantic import BaseModel

    class Out(BaseModel):
        answer: str

    store = SQLiteStore.open(":memory:")
    store.ensure_space(Scope.local("s"))
    llm = scripted_llm(store, fn=lambda req: {"answer": "x"}, batch=True)
    from tmem.llm.base import Message

    swallowed = False
    with pytest.raises(BatchPending):
        try:
            await llm.complete([Message(role="user", content="q")], Out, stage="t", space=Scope.local("s"))
        except LLMError:  # what a retry loop around LLM calls does
            swallowed = True
    assert not swallowed


async def test_check_after_a_build_interrupted_during_segmentation_is_not_a_false_alarm(tmp_path: Path) -> None:
    db = tmp_path / "tmem.db"
    store = SQLiteStore.open(db)
    import_spaces(store, [dev_space(SPACE, slice(0, 4))], source="dev")
    calls = {"segment": 0}

    def dies_after_one_segment_call(request: ChatRequest) -> str:
        if request.stage == "segment":
            calls["segment"] += 1
            if calls["segment"] > 1:
                raise LLMTransientError("simulated: the process was killed here")
        return scripted_reply(request)

    with pytest.raises(BuildError):
        await build_space(
            store, Scope.local(SPACE), llm=scripted_llm(store, fn=dies_after_one_segment_call), embedder=HashEmbedder()
        )
    report = check_space(store, Scope.local(SPACE))
    assert store.scenes(Scope.local(SPACE)), "the first buffers' scenes were kept"
    assert report.ok, report.violations  # was: 15 x turn_unassigned and advice to delete the space
    assert report.build_incomplete and report.pending_turns > 0
    store.close()

    env = {"TMEM_HOME": str(tmp_path)}
    out = CliRunner().invoke(cli, ["check", SPACE], env=env)
    assert out.exit_code == 0 and "Build incomplete" in out.output and f"tmem build {SPACE}" in out.output
    payload = json.loads(CliRunner().invoke(cli, ["check", SPACE, "--json"], env=env).output)
    assert payload["ok"] and payload["build_incomplete"] and payload["pending_turns"] == report.pending_turns

    store = SQLiteStore.open(db)  # a plain resume completes it
    await build_space(store, Scope.local(SPACE), llm=scripted_llm(store, fn=scripted_reply), embedder=HashEmbedder())
    report = check_space(store, Scope.local(SPACE))
    assert report.ok and not report.build_incomplete
    store.close()


def test_long_texts_are_clipped_for_embedding_with_a_note(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tmem.embed"):
        out = clip_texts(["short", "x" * 50], 10, "m")
    assert out == ["short", "x" * 10]
    assert "1 text(s) longer than 10 characters were truncated for embedding with m" in caplog.text


def test_remote_embedder_never_sends_a_100k_character_turn(caplog: pytest.LogCaptureFixture) -> None:
    with OpenAIStub() as stub, caplog.at_level(logging.WARNING, logger="tmem.embed"):
        embedder = OpenAIEmbedder("stub-embed", base_url=stub.base_url, api_key="sk-test")
        result = embedder.embed(["word " * 20_000, "short"])
        sent = stub.embedding_requests[-1].body["input"]
    assert result.vectors.shape[0] == 2
    assert [len(t) for t in sent] == [REMOTE_MAX_CHARS, 5]
    assert "truncated for embedding" in caplog.text
