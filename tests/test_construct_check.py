"""The integrity checker: one test per rule on hand-made records, plus the CLI on a real extractive build."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.data import DEV_LOCOMO
from tmem.cli.main import cli
from tmem.construct.check import MemorySnapshot, check_snapshot
from tmem.models import (
    BuildMode,
    Item,
    ItemKind,
    LLMCall,
    Persona,
    PersonaTrait,
    Scene,
    Session,
    Space,
    Topic,
    TopicSceneLink,
    Trigger,
    TriggerFamily,
    TriggerView,
    Turn,
)
from tmem.scope import Scope

T0 = datetime(2023, 5, 8, 13, 56)


def turn(i: int, session: str = "s1") -> Turn:
    return Turn(id=f"D1:{i}", session_id=session, seq=i, speaker="Ann", text=f"text {i}", time=T0)


def scene(sid: str, turn_ids: list[str], mode: BuildMode = BuildMode.LLM) -> Scene:
    return Scene(id=sid, seq=0, title="t", summary="s", narrative="", turn_ids=turn_ids, start=T0, end=T0, mode=mode)


def item(iid: str, scenes: list[str], kind: ItemKind = ItemKind.ATOMIC, **kw: object) -> Item:
    return Item(id=iid, text="On 8 May 2023 Ann ran.", kind=kind, scene_ids=scenes, **kw)  # type: ignore[arg-type]


def trig(tid: str, family: TriggerFamily, host_kind: str, host: str, text: str = "x") -> Trigger:
    return Trigger(id=tid, family=family, host_kind=host_kind, host_id=host, views=[TriggerView(name="v", text=text)])  # type: ignore[arg-type]


def call(h: str, outcome: str = "ok", **kw: object) -> LLMCall:
    base: dict[str, object] = dict(
        space="sp", stage="segment", model="m", request_hash=h, tokens_in=10, tokens_out=5, latency_ms=1.0,
        attempts=1, outcome=outcome, created_at=T0, response='{"a": 1}' if outcome in ("ok", "batch") else None,
        error="boom" if outcome == "error" else None,
    )  # fmt: skip
    base.update(kw)
    return LLMCall.model_validate(base)


I2 = Item(id="i2", text="On 8 May 2023 Ann ran twice.", kind=ItemKind.CONNECTED, scene_ids=["sc1", "sc2"])


def valid(**changes: object) -> MemorySnapshot:
    """A small consistent memory; keyword arguments replace whole fields."""
    fields: dict[str, object] = dict(
        space=Space(name="sp", speakers=["Ann", "Bob"]),
        key="sp",
        sessions=[Session(id="s1", seq=0, started_at=T0, content_hash="h")],
        turns=[turn(1), turn(2), turn(3)],
        scenes=[scene("sc1", ["D1:1", "D1:2"]), scene("sc2", ["D1:3"])],
        topics=[Topic(id="tp1", seq=0, label="running")],
        links=[TopicSceneLink(topic_id="tp1", scene_id="sc1"), TopicSceneLink(topic_id="tp1", scene_id="sc2")],
        items=[item("i1", ["sc1"], turn_ids=["D1:1"]), I2],
        triggers=[
            trig("e1", TriggerFamily.ENTITY, "item", "i1"),
            trig("b1", TriggerFamily.BRIDGE, "item", "i2"),
            trig("h1", TriggerFamily.HORIZON, "scene", "sc1"),
            trig("c1", TriggerFamily.SCENE, "scene", "sc2"),
        ],
        personas=[Persona(speaker="Ann", traits=[PersonaTrait(category="hobbies", value="runs", item_ids=["i1"])])],
        calls=[call("h1"), call("h1", "cached", tokens_in=0, tokens_out=0, attempts=0), call("h2", "error", attempts=0)],
        state={"build.mode": "llm", "build.sessions": "1"},
    )  # fmt: skip
    fields.update(changes)
    return MemorySnapshot.model_validate(fields)


def codes(snap: MemorySnapshot) -> list[str]:
    return [v.code for v in check_snapshot(snap).violations]


def test_a_consistent_memory_has_no_violation() -> None:
    report = check_snapshot(valid())
    assert report.ok and report.violations == []
    assert report.mode == "llm" and not report.descriptive_only
    assert report.checked["turns"] == 3 and report.checked["llm_calls"] == 3


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"turns": [turn(1), turn(2), turn(3), turn(4)]}, ["turn_unassigned"]),
        (
            {"scenes": [scene("sc1", ["D1:1", "D1:2"]), scene("sc2", ["D1:2", "D1:3"])]},
            ["turn_in_several_scenes"],
        ),
        ({"scenes": [scene("sc1", ["D1:1", "D1:2"]), scene("sc2", ["D1:3", "D9:9"])]}, ["scene_unknown_turn"]),
        ({"scenes": [scene("sc1", ["D1:2", "D1:1"]), scene("sc2", ["D1:3"])]}, ["scene_turn_order"]),
        (
            {"links": [TopicSceneLink(topic_id="tp1", scene_id="sc1")]},
            ["scene_without_topic"],
        ),
        (
            {
                "links": [
                    TopicSceneLink(topic_id="tp1", scene_id="sc1"),
                    TopicSceneLink(topic_id="tp1", scene_id="sc2"),
                    TopicSceneLink(topic_id="tp9", scene_id="sc1"),
                    TopicSceneLink(topic_id="tp1", scene_id="sc9"),
                ]
            },
            ["topic_link_unknown_topic", "topic_link_unknown_scene"],
        ),
        (
            {"topics": [Topic(id="tp1", seq=0, label="running"), Topic(id="tp2", seq=1, label="empty")]},
            ["topic_empty"],
        ),
        ({"items": [item("i1", ["sc1", "sc2"], turn_ids=["D1:1"]), I2]}, ["atomic_scene_count"]),
        ({"items": [item("i1", ["sc1"]), item("i2", ["sc1"], ItemKind.CONNECTED)]}, ["connected_scene_count"]),
        ({"items": [item("i1", ["sc7"]), I2]}, ["item_unknown_scene"]),
        ({"items": [item("i1", ["sc1"], turn_ids=["D5:5"]), I2]}, ["item_unknown_turn"]),
        ({"items": [item("i1", ["sc1"], topic_id="tp7"), I2]}, ["item_unknown_topic"]),
        ({"items": [item("i1", ["sc1"], date="8 May 2023"), I2]}, ["item_bad_date"]),
        ({"items": [item("i1", ["sc1"], supersedes="i9"), I2]}, ["supersedes_unknown"]),
        (
            {"items": [item("i1", ["sc1"], supersedes="i2"), item("i2", ["sc1", "sc2"], ItemKind.CONNECTED)]},
            ["supersedes_inconsistent"],
        ),
        ({"triggers": [trig("e1", TriggerFamily.ENTITY, "item", "i7")]}, ["trigger_unknown_host"]),
        ({"triggers": [trig("e1", TriggerFamily.ENTITY, "scene", "sc1")]}, ["trigger_family_host_kind"]),
        ({"triggers": [trig("h1", TriggerFamily.HORIZON, "item", "i1")]}, ["trigger_family_host_kind"]),
        ({"triggers": [trig("e1", TriggerFamily.ENTITY, "item", "i1", text="  ")]}, ["trigger_empty_view"]),
        (
            {"personas": [Persona(speaker="Ann", traits=[PersonaTrait(category="x", value="y", item_ids=["i8"])])]},
            ["persona_unknown_item"],
        ),
        ({"personas": [Persona(speaker="Zed", traits=[])]}, ["persona_unknown_speaker"]),
        ({"state": {"build.mode": "magic", "build.sessions": "1"}}, ["state_bad_mode"]),
        ({"state": {"build.mode": "llm", "build.sessions": "5"}}, ["state_bad_sessions"]),
        ({"calls": [call("h1", stage=" ")]}, ["llm_call_no_stage"]),
        ({"calls": [call("h1", model="")]}, ["llm_call_no_model"]),
        ({"calls": [call("h1", tokens_in=-1)]}, ["llm_call_bad_tokens"]),
        ({"calls": [call("h1", attempts=0)]}, ["llm_call_bad_attempts"]),
        ({"calls": [call("h1", response=None)]}, ["llm_ok_without_response"]),
        ({"calls": [call("h1", response="{not json")]}, ["llm_ok_without_response"]),
        ({"calls": [call("h1", "error", error="")]}, ["llm_error_without_message"]),
        ({"calls": [call("h1"), call("h1")]}, ["llm_paid_twice"]),
        ({"calls": [call("h3", "cached")]}, ["llm_cache_without_source"]),
        ({"calls": [call("h1", space="other")]}, ["llm_call_wrong_space"]),
    ],
)
def test_each_rule_reports_its_violation(changes: dict[str, object], expected: list[str]) -> None:
    assert codes(valid(**changes)) == expected


def test_a_batch_result_answers_later_cache_hits() -> None:
    calls = [call("h1", "batch"), call("h1", "cached", attempts=0)]
    assert codes(valid(calls=calls)) == []


def test_a_batch_result_is_the_raw_model_reply_and_need_not_be_json() -> None:
    # Batch import stores the message content unvalidated (repair and validation happen when a build reads it), so
    # a fenced or chatty reply is a legitimate row; only a missing or blank reply is a violation.
    fenced = '```json\n{"a": 1}\n```'
    assert codes(valid(calls=[call("h1", "batch", response=fenced)])) == []
    assert codes(valid(calls=[call("h1", "batch", response="  ")])) == ["llm_ok_without_response"]
    assert codes(valid(calls=[call("h1", "batch", response=None)])) == ["llm_ok_without_response"]


def test_sessions_imported_after_the_build_need_no_scene_yet() -> None:
    later = [*valid().turns, turn(4, session="s2")]
    sessions = [*valid().sessions, Session(id="s2", seq=1, started_at=T0, content_hash="h2")]
    assert codes(valid(turns=later, sessions=sessions)) == []
    # ... but once the build claims to cover it, its turns must be in scenes
    state = {"build.mode": "llm", "build.sessions": "2"}
    assert codes(valid(turns=later, sessions=sessions, state=state)) == ["turn_unassigned"]


def test_never_built_space_is_consistent_and_partial_builds_are_checked() -> None:
    empty = valid(scenes=[], topics=[], links=[], items=[], triggers=[], personas=[], calls=[], state={})
    report = check_snapshot(empty)
    assert report.ok and report.mode is None and not report.build_incomplete
    # Issue 11: a first build killed during segmentation leaves a suffix of unsegmented turns. That is an interrupted
    # build (resumable), not corruption: no violation, and the report says how many turns are pending.
    partial = valid(scenes=[scene("sc1", ["D1:1"])], links=[], topics=[], items=[], triggers=[], personas=[], state={})
    report = check_snapshot(partial)
    assert report.ok and report.pending_turns == 2 and report.build_incomplete
    # A gap (an unsegmented turn before a segmented one) is something no build leaves: still a violation.
    gap = valid(scenes=[scene("sc1", ["D1:2"])], links=[], topics=[], items=[], triggers=[], personas=[], state={})
    report = check_snapshot(gap)
    assert [v.code for v in report.violations] == ["turn_unassigned"] and report.pending_turns == 1


def test_extractive_memory_must_be_descriptive_only() -> None:
    ex = BuildMode.EXTRACTIVE
    extractive = valid(
        scenes=[scene("sc1", ["D1:1", "D1:2"], ex), scene("sc2", ["D1:3"], ex)],
        items=[item("i1", ["sc1"], mode=ex), item("i2", ["sc1", "sc2"], ItemKind.CONNECTED, mode=ex)],
        triggers=[trig("e1", TriggerFamily.ENTITY, "item", "i1")],
        personas=[],
        state={"build.mode": "extractive", "build.sessions": "1"},
    )
    report = check_snapshot(extractive)
    assert report.ok and report.descriptive_only
    assert codes(valid(state={"build.mode": "extractive", "build.sessions": "1"})) == [
        "extractive_not_descriptive",
        "mode_mixed",
    ]


# ------------------------------------------------------------------------------------------------ CLI

DEV = DEV_LOCOMO


@pytest.mark.skipif(not DEV.exists(), reason="dev data not present")
async def test_cli_check_passes_on_a_built_space_and_fails_on_a_corrupted_one(tmp_path: Path) -> None:
    from tmem.construct.extractive import build_extractive
    from tmem.embed.hashing import HashEmbedder
    from tmem.ingest import import_sessions, read_file
    from tmem.store.sqlite import SQLiteStore

    conv = read_file(DEV, space="conv-30")[0]
    store = SQLiteStore.open(tmp_path / "tmem.db")
    import_sessions(store, Scope.local("conv-30"), conv.sessions[:3], speakers=conv.speakers)
    await build_extractive(store, Scope.local("conv-30"), embedder=HashEmbedder())
    runner = CliRunner()
    ok = runner.invoke(cli, ["--dir", str(tmp_path), "check", "conv-30"])
    assert ok.exit_code == 0, ok.output
    assert "descriptive only" in ok.output and "OK: no violation" in ok.output
    as_json = runner.invoke(cli, ["--dir", str(tmp_path), "check", "conv-30", "--json"])
    payload = json.loads(as_json.output)
    assert payload["ok"] is True and payload["mode"] == "extractive" and payload["violations"] == []

    store.set_state(Scope.local("conv-30"), "build.sessions", "9")  # claims more sessions than it holds
    store.close()
    bad = runner.invoke(cli, ["--dir", str(tmp_path), "check", "conv-30"])
    assert bad.exit_code == 1
    assert "state_bad_sessions: build.sessions is 9 but the space holds 3 sessions" in bad.output
    bad_json = runner.invoke(cli, ["--dir", str(tmp_path), "check", "conv-30", "--json"])
    assert bad_json.exit_code == 1
    assert [v["code"] for v in json.loads(bad_json.output)["violations"]] == ["state_bad_sessions"]


def test_cli_check_unknown_space_is_a_one_line_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--dir", str(tmp_path), "check", "nope"])
    assert result.exit_code == 1
    assert "nope" in str(result.exception) or "nope" in result.output
