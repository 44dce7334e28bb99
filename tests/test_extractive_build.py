"""The extractive build on real dev LoCoMo data: invariants, determinism, incremental == full, resume, checker."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import pytest

from tests.support.data import DEV_LOCOMO
from tmem.construct.check import check_space
from tmem.construct.extractive import STATE_CURSOR, build_extractive
from tmem.construct.report import STATE_MODE, STATE_SESSIONS
from tmem.embed.base import EmbeddingResult
from tmem.embed.hashing import HashEmbedder
from tmem.errors import BuildError, EmbeddingError
from tmem.ingest import SpaceInput, import_sessions, read_file
from tmem.models import BuildMode, ItemKind, Scene, TriggerFamily
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore

DEV = DEV_LOCOMO
SPACE = "conv-26"
pytestmark = pytest.mark.skipif(not DEV.exists(), reason="dev data not present")


@cache
def conversation() -> SpaceInput:
    return read_file(DEV, space=SPACE)[0]


def store_with(n_sessions: int, start: int = 0, store: SQLiteStore | None = None) -> SQLiteStore:
    s = store or SQLiteStore.open(":memory:")
    conv = conversation()
    import_sessions(s, Scope.local(SPACE), conv.sessions[start:n_sessions], speakers=conv.speakers)
    return s


def snapshot(s: SQLiteStore) -> tuple[object, ...]:
    return (
        s.scenes(Scope.local(SPACE)),
        s.topics(Scope.local(SPACE)),
        sorted((x.topic_id, x.scene_id) for x in s.topic_links(Scope.local(SPACE))),
        s.items(Scope.local(SPACE)),
        sorted(s.triggers(Scope.local(SPACE)), key=lambda t: t.id),
    )


async def test_build_covers_every_turn_once_and_passes_the_checker() -> None:
    s = store_with(6)
    report = await build_extractive(s, Scope.local(SPACE), embedder=HashEmbedder())
    turns = s.turns(Scope.local(SPACE))
    scenes = s.scenes(Scope.local(SPACE))
    assert sorted(t for sc in scenes for t in sc.turn_ids) == sorted(t.id for t in turns)
    for sc in scenes:
        sessions = {tid.split(":")[0] for tid in sc.turn_ids}
        assert len(sessions) == 1, "session breaks close scenes in this mode"
        assert sc.mode is BuildMode.EXTRACTIVE and sc.narrative == "" and sc.title and sc.summary.startswith("On ")
    items = s.items(Scope.local(SPACE))
    assert 0 < len(items) < len(turns)  # greetings skipped
    assert all(i.kind is ItemKind.ATOMIC and len(i.scene_ids) == 1 and len(i.turn_ids) == 1 for i in items)
    triggers = s.triggers(Scope.local(SPACE))
    assert triggers and {t.family for t in triggers} == {TriggerFamily.ENTITY}
    assert not s.personas(Scope.local(SPACE))
    assert report.descriptive_only and report.mode == "extractive"
    assert report.counts["scenes"] == len(scenes) and report.counts["items"] == len(items)
    assert (
        s.get_state(Scope.local(SPACE), STATE_MODE) == "extractive"
        and s.get_state(Scope.local(SPACE), STATE_SESSIONS) == "6"
    )
    check = check_space(s, Scope.local(SPACE))
    assert check.ok, check.violations
    assert check.descriptive_only


async def test_the_support_group_turn_becomes_a_dated_item() -> None:
    s = store_with(1)
    await build_extractive(s, Scope.local(SPACE), embedder=HashEmbedder())
    item = next(i for i in s.items(Scope.local(SPACE)) if i.turn_ids == ["D1:3"])
    assert item.text == (
        'On 8 May 2023, Caroline said: "I went to a LGBTQ support group yesterday [7 May 2023] and it was so powerful."'
    )
    assert item.date == "2023-05-07" and item.speaker == "Caroline"
    concepts = {t.views[0].text for t in s.triggers(Scope.local(SPACE), host_ids=[item.id])}
    assert "LGBTQ support group" in concepts


async def test_rerun_changes_nothing_and_embeds_nothing() -> None:
    s = store_with(4)
    await build_extractive(s, Scope.local(SPACE), embedder=HashEmbedder())
    before = snapshot(s)
    counting = CountingEmbedder()
    report = await build_extractive(s, Scope.local(SPACE), embedder=counting)
    assert snapshot(s) == before
    assert counting.texts == 0
    assert sum(st.created for st in report.stages) == 0


@pytest.mark.parametrize("k", [1, 3, 7])
async def test_incremental_equals_full(k: int) -> None:
    n = 9
    full = store_with(n)
    await build_extractive(full, Scope.local(SPACE), embedder=HashEmbedder())
    inc = store_with(k)
    await build_extractive(inc, Scope.local(SPACE), embedder=HashEmbedder())
    store_with(n, start=k, store=inc)
    report = await build_extractive(inc, Scope.local(SPACE), embedder=HashEmbedder())
    assert report.stages[0].skipped == k
    assert snapshot(inc) == snapshot(full)
    assert inc.get_state(Scope.local(SPACE), STATE_SESSIONS) == str(n)
    assert check_space(inc, Scope.local(SPACE)).ok


class CountingEmbedder(HashEmbedder):
    def __init__(self, fail_after: int | None = None) -> None:
        super().__init__()
        self.calls = 0
        self.texts = 0
        self.fail_after = fail_after

    def embed(self, texts: Sequence[str]) -> EmbeddingResult:
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise EmbeddingError("embedding backend went away (simulated crash)")
        self.calls += 1
        self.texts += len(texts)
        return super().embed(texts)


async def test_a_build_killed_midway_resumes_to_the_same_memory() -> None:
    full = store_with(6)
    await build_extractive(full, Scope.local(SPACE), embedder=HashEmbedder())
    crashed = store_with(6)
    with pytest.raises(EmbeddingError):
        # each session embeds its turns then its scenes' keyphrases: 5 calls ends inside session 3
        await build_extractive(crashed, Scope.local(SPACE), embedder=CountingEmbedder(fail_after=5))
    cursor = int(crashed.get_state(Scope.local(SPACE), STATE_CURSOR) or 0)
    assert 0 < cursor < 6
    assert crashed.get_state(Scope.local(SPACE), STATE_SESSIONS) is None  # not a completed build
    committed = {tid.split(":")[0] for sc in crashed.scenes(Scope.local(SPACE)) for tid in sc.turn_ids}
    assert committed == {f"D{i}" for i in range(1, cursor + 1)}  # whole sessions only
    await build_extractive(crashed, Scope.local(SPACE), embedder=HashEmbedder())
    assert snapshot(crashed) == snapshot(full)


async def test_refuses_to_extend_an_llm_built_space() -> None:
    s = store_with(1)
    turn = s.turns(Scope.local(SPACE))[0]
    s.put_scenes(
        Scope.local(SPACE),
        [Scene(id="llm-1", seq=0, title="t", summary="s", narrative="n", turn_ids=[turn.id], start=turn.time,
               end=turn.time, mode=BuildMode.LLM)],
    )  # fmt: skip
    s.set_state(Scope.local(SPACE), STATE_MODE, "llm")
    with pytest.raises(BuildError, match="built with an LLM"):
        await build_extractive(s, Scope.local(SPACE), embedder=HashEmbedder())


async def test_topic_threshold_is_fixed_by_the_first_build() -> None:
    s = store_with(2)
    await build_extractive(s, Scope.local(SPACE), embedder=HashEmbedder(), topic_threshold=0.4)
    store_with(3, start=2, store=s)
    with pytest.raises(BuildError, match=r"topic threshold 0\.4"):
        await build_extractive(s, Scope.local(SPACE), embedder=HashEmbedder(), topic_threshold=0.7)
    await build_extractive(s, Scope.local(SPACE), embedder=HashEmbedder())  # unset: the recorded value is used
    assert s.get_state(Scope.local(SPACE), STATE_SESSIONS) == "3"


async def test_a_cursor_that_disagrees_with_the_scenes_is_refused() -> None:
    s = store_with(2)
    s.set_state(Scope.local(SPACE), STATE_CURSOR, "2")  # claims two sessions built, but nothing is
    with pytest.raises(BuildError, match="has turns in no scene"):
        await build_extractive(s, Scope.local(SPACE), embedder=HashEmbedder())
