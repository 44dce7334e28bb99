"""Failures isolated per unit: a unit whose replies stay invalid after the retries is recorded as failed, the build
finishes everything that does not depend on it, `tmem check` lists it, and a rerun retries only those units."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.openai_stub import OpenAIStub
from tests.support.stage_replies import dev_space, scripted_reply, stub_reply
from tmem.cli.main import cli
from tmem.construct.check import check_space
from tmem.construct.options import BuildOptions
from tmem.construct.pipeline import build_space
from tmem.construct.report import EXIT_INCOMPLETE, STATE_FAILED, STATE_FALLBACK, BuildReport
from tmem.embed.hashing import HashEmbedder
from tmem.ingest.importer import import_spaces
from tmem.llm.base import ChatRequest
from tmem.llm.scripted import scripted_llm
from tmem.models import TriggerFamily
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore

SPACE = "conv-26"
OPTIONS = BuildOptions(
    segment_window=20,
    max_scene_turns=12,
    topic_scenes_per_call=4,
    item_scenes_per_call=3,
    items_per_trigger_call=2,
    scenes_per_trigger_call=2,
)
FAILING = {"TopicReply", "ItemReply", "ItemTriggerReply", "SceneTriggerReply", "PersonaReply"}


def _store(sessions: slice = slice(0, 3)) -> SQLiteStore:
    store = SQLiteStore.open(":memory:")
    import_spaces(store, [dev_space(SPACE, sessions)], source="dev")
    return store


def _first_invalid(schemas: set[str]) -> Callable[[ChatRequest], str]:
    """Invalid replies (a required field missing) to the first request of each of ``schemas`` - and to its retries,
    which repeat its prompt: that unit fails for good in this build."""
    doomed: dict[str, str] = {}

    def reply(request: ChatRequest) -> str:
        prompt = request.messages[1].content
        if request.schema_name in schemas and doomed.setdefault(request.schema_name, prompt) == prompt:
            return "{}"
        return scripted_reply(request)

    return reply


async def _build(store: SQLiteStore, fn: Callable[[ChatRequest], str], options: BuildOptions = OPTIONS) -> BuildReport:
    return await build_space(
        store, Scope.local(SPACE), llm=scripted_llm(store, fn=fn), embedder=HashEmbedder(), options=options
    )


def _assert_complete(store: SQLiteStore) -> None:
    check = check_space(store, Scope.local(SPACE))
    assert check.ok and check.complete, (check.violations[:3], check.failed_units[:3])
    scenes = {s.id for s in store.scenes(Scope.local(SPACE))}
    assert {t.host_id for t in store.triggers(Scope.local(SPACE), family=TriggerFamily.SCENE)} == scenes
    current = {it.id for it in store.items(Scope.local(SPACE)) if it.superseded_by is None}
    assert {t.host_id for t in store.triggers(Scope.local(SPACE), family=TriggerFamily.ENTITY)} >= current
    speakers = {it.speaker for it in store.items(Scope.local(SPACE)) if it.speaker}
    assert {p.speaker for p in store.personas(Scope.local(SPACE))} == speakers
    assert store.get_state(Scope.local(SPACE), STATE_FAILED) is None


@pytest.mark.parametrize("few_rounds", [False, True])
async def test_failed_units_are_recorded_the_rest_is_built_and_a_rerun_retries_only_them(few_rounds: bool) -> None:
    store = _store()
    # several topic requests per build, so that one failing leaves scenes for the later stages
    options = OPTIONS.model_copy(update={"few_rounds": few_rounds, "topic_scenes_per_round_call": 3})
    first = await _build(store, _first_invalid(FAILING), options)
    assert not first.complete
    stages = {u.stage for u in first.failed}
    assert stages == {"topics", "items", "triggers.item", "triggers.scene", "persona"}, stages
    assert [s.stage for s in first.stages][-1] == "persona" and len(first.stages) == 6
    assert all(u.refs and "Field required" in u.reason for u in first.failed)
    assert json.loads(store.get_state(Scope.local(SPACE), STATE_FAILED) or "[]") == [
        u.model_dump() for u in first.failed
    ]
    # everything that did not depend on a failed unit was built
    assert store.triggers(Scope.local(SPACE), family=TriggerFamily.SCENE) and store.triggers(
        Scope.local(SPACE), family=TriggerFamily.ENTITY
    )
    failed_hosts = {r for u in first.failed if u.stage == "triggers.scene" for r in u.refs}
    with_triggers = {t.host_id for t in store.triggers(Scope.local(SPACE), family=TriggerFamily.SCENE)}
    assert with_triggers == {s.id for s in store.scenes(Scope.local(SPACE))} - failed_hosts
    check = check_space(store, Scope.local(SPACE))
    assert check.ok and not check.complete and check.failed_units == first.failed

    paid_before = {c.request_hash for c in store.llm_calls(Scope.local(SPACE)) if c.outcome == "ok"}
    second = await _build(store, scripted_reply, options)
    assert second.complete
    _assert_complete(store)  # includes: no request was paid twice (llm_paid_twice)
    resent = {c.request_hash for c in store.llm_calls(Scope.local(SPACE)) if c.outcome == "ok"} - paid_before
    assert resent  # what the failed units (and the work depending on them) needed; nothing answered before is paid
    # again (the checker's llm_paid_twice in _assert_complete)


async def test_a_window_the_model_cannot_segment_falls_back_to_an_extractive_split_marked_as_such() -> None:
    store = _store()

    def no_session_2(request: ChatRequest) -> str:
        if request.schema_name == "SegmentReply" and "[D2:1]" in request.messages[1].content:
            return '{"scenes": []}'
        return scripted_reply(request)

    report = await _build(store, no_session_2)
    assert report.complete and report.fallback
    marks = json.loads(store.get_state(Scope.local(SPACE), STATE_FALLBACK) or "{}")
    assert set(marks) == set(report.fallback) and all("segment" in why for why in marks.values())
    fallback = [s for s in store.scenes(Scope.local(SPACE)) if s.id in marks]
    assert fallback and all(len(s.turn_ids) <= OPTIONS.max_scene_turns for s in fallback)
    assert any("D2:1" in s.turn_ids for s in fallback)
    assert all(s.narrative.startswith("On ") and "2023" in s.narrative for s in fallback)
    check = check_space(store, Scope.local(SPACE))
    assert check.ok and check.complete and check.fallback_scenes == marks
    _assert_complete(store)


async def test_without_fallback_a_failed_window_leaves_its_turns_for_the_rerun() -> None:
    store = _store()
    options = OPTIONS.model_copy(update={"few_rounds": True, "fallback": False})

    def no_session_2(request: ChatRequest) -> str:
        if request.schema_name == "SegmentReply" and "[D2:1]" in request.messages[1].content:
            return '{"scenes": []}'
        return scripted_reply(request)

    first = await _build(store, no_session_2, options)
    assert [u.stage for u in first.failed] == ["segment"] and "D2:1" in first.failed[0].refs
    open_turns = {t.id for t in store.turns(Scope.local(SPACE))} - {
        tid for s in store.scenes(Scope.local(SPACE)) for tid in s.turn_ids
    }
    assert open_turns == set(first.failed[0].refs)
    assert any(
        s.turn_ids[0] == "D3:1" for s in store.scenes(Scope.local(SPACE))
    )  # the sessions after it were segmented
    check = check_space(store, Scope.local(SPACE))
    assert check.ok and not check.complete
    second = await _build(store, scripted_reply, options)
    assert second.complete
    _assert_complete(store)
    seqs = [s.seq for s in store.scenes(Scope.local(SPACE))]
    assert seqs == list(range(len(seqs)))  # the gap's scenes took their place in arrival order
    firsts = [store.turns(Scope.local(SPACE), [s.turn_ids[0]])[0].seq for s in store.scenes(Scope.local(SPACE))]
    assert firsts == sorted(firsts)


@pytest.mark.slow
def test_fault_run_with_15_percent_corrupted_replies_ends_complete_after_reruns(tmp_path: Path) -> None:
    """The issue's fault run: per attempt 15 % corrupted replies (truncated or missing a required field) plus 429s
    and 500s. The first build allows no output retry, so units fail; `tmem build` lists them and exits 4, `tmem
    check` lists them and exits 4, and reruns with the default retries complete the memory."""
    store = SQLiteStore.open(tmp_path / "tmem.db")
    import_spaces(store, [dev_space(SPACE, slice(0, 6))], source="dev")
    store.close()
    kinds = ["malformed", "invalid", "malformed", "invalid", "429:retry-after=0", "500"]
    runner = CliRunner()
    with OpenAIStub(reply=stub_reply, fault_rate=0.225, fault_kinds=kinds, seed=5) as stub:
        first = runner.invoke(
            cli, ["build", SPACE, "--json", "--no-progress"], env=stub.env(tmp_path, TMEM_LLM_OUTPUT_RETRIES="0")
        )
        assert first.exit_code == EXIT_INCOMPLETE, first.output
        (report,) = json.loads(first.stdout)
        assert report["failed"] and "retry only those" in first.stderr
        listed = runner.invoke(cli, ["check", SPACE, "--json"], env=stub.env(tmp_path))
        assert listed.exit_code == EXIT_INCOMPLETE, listed.output
        payload = json.loads(listed.output)
        assert payload["ok"] and not payload["complete"] and payload["failed_units"] == report["failed"]
        text = runner.invoke(cli, ["check", SPACE], env=stub.env(tmp_path))
        assert "failed unit" in text.output and "tmem build conv-26" in text.output
        for _ in range(4):
            rerun = runner.invoke(cli, ["build", SPACE, "--no-progress"], env=stub.env(tmp_path))
            if rerun.exit_code == 0:
                break
            assert rerun.exit_code == EXIT_INCOMPLETE and "FAILED" in rerun.output, rerun.output
        assert rerun.exit_code == 0, rerun.output
        applied = [r.fault for r in stub.chat_requests]
    assert {"malformed", "invalid", "429:retry-after=0", "500"} <= set(applied)
    store = SQLiteStore.open(tmp_path / "tmem.db")
    _assert_complete(store)
    store.close()
