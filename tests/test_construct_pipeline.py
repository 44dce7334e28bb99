"""Orchestration: full build, rerun, kill-and-resume, incremental == full, batch protocol, extractive delegation."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.stage_replies import dev_space, memory_snapshot, scripted_reply
from tests.test_retrieve_fixtures import CountingEmbedder
from tmem.construct.check import check_space
from tmem.construct.options import BuildOptions
from tmem.construct.pipeline import build_space, reset_space
from tmem.construct.report import STATE_MODE, STATE_SESSIONS, BuildReport
from tmem.construct.segment import STATE_OPEN_TAIL
from tmem.embed.cached import CachedEmbedder
from tmem.embed.hashing import HashEmbedder
from tmem.errors import BatchPending, BuildError, InputError
from tmem.ingest.importer import import_spaces
from tmem.llm.base import ChatRequest
from tmem.llm.batch import import_results
from tmem.llm.scripted import scripted_llm
from tmem.models import ItemKind, TriggerFamily
from tmem.retrieve.cascade import Retriever
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore

SPACE = "conv-26"
# Small windows so that a few sessions exercise several segmentation calls, chunked topics and items.
OPTIONS = BuildOptions(
    segment_window=20,
    max_scene_turns=12,
    topic_scenes_per_call=4,
    item_scenes_per_call=3,
    items_per_trigger_call=6,
    scenes_per_trigger_call=4,
)


class Killed(RuntimeError):
    """Stands for the process dying in the middle of a call."""


def _store(sessions: slice) -> SQLiteStore:
    store = SQLiteStore.open(":memory:")
    import_spaces(store, [dev_space(SPACE, sessions)], source="dev")
    return store


def _ok_hashes(store: SQLiteStore) -> list[str]:
    return [c.request_hash for c in store.llm_calls(Scope.local(SPACE)) if c.outcome == "ok"]


async def _build(
    store: SQLiteStore, fn: Callable[[ChatRequest], str] = scripted_reply, options: BuildOptions = OPTIONS
) -> BuildReport:
    return await build_space(
        store, Scope.local(SPACE), llm=scripted_llm(store, fn=fn), embedder=HashEmbedder(), options=options
    )


async def test_full_build_meets_the_invariants() -> None:
    store = _store(slice(0, 6))
    report = await _build(store)
    turns = [t.id for t in store.turns(Scope.local(SPACE))]
    scenes = store.scenes(Scope.local(SPACE))
    owned = Counter(tid for s in scenes for tid in s.turn_ids)
    assert sorted(owned) == sorted(turns) and set(owned.values()) == {1}  # every turn in exactly one scene
    assert [tid for s in scenes for tid in s.turn_ids] == turns  # scenes are contiguous, in arrival order
    assert max(len(s.turn_ids) for s in scenes) <= OPTIONS.max_scene_turns
    assert any(len({tid.split(":")[0] for tid in s.turn_ids}) > 1 for s in scenes)  # a scene spans a session break
    linked = {link.scene_id for link in store.topic_links(Scope.local(SPACE))}
    assert linked == {s.id for s in scenes}
    items = store.items(Scope.local(SPACE))
    assert {it.kind for it in items} == {ItemKind.ATOMIC, ItemKind.CONNECTED}
    for it in items:
        assert (len(it.scene_ids) == 1) == (it.kind is ItemKind.ATOMIC)
        assert set(it.turn_ids) <= {tid for s in scenes if s.id in it.scene_ids for tid in s.turn_ids}
    by_family = Counter(t.family for t in store.triggers(Scope.local(SPACE)))
    assert by_family[TriggerFamily.ENTITY] == by_family[TriggerFamily.BRIDGE] == OPTIONS.item_triggers_n * len(items)
    assert by_family[TriggerFamily.SCENE] == by_family[TriggerFamily.HORIZON] == len(scenes)
    assert {p.speaker for p in store.personas(Scope.local(SPACE))} == {"Caroline", "Melanie"}
    assert (
        store.get_state(Scope.local(SPACE), STATE_MODE) == "llm"
        and store.get_state(Scope.local(SPACE), STATE_SESSIONS) == "6"
    )
    assert store.get_state(Scope.local(SPACE), STATE_OPEN_TAIL) == scenes[-1].id
    assert report.counts["scenes"] == len(scenes) and report.counts["items"] == len(items)
    assert [s.stage for s in report.stages] == [
        "segment",
        "topics",
        "items",
        "triggers.item",
        "triggers.scene",
        "persona",
    ]


async def test_rerun_changes_nothing_and_pays_nothing() -> None:
    store = _store(slice(0, 4))
    await _build(store)
    before, paid = memory_snapshot(store, SPACE), len(_ok_hashes(store))
    report = await _build(store)
    assert memory_snapshot(store, SPACE) == before
    assert len(_ok_hashes(store)) == paid
    assert sum(s.llm_calls for s in report.stages) == 0


@pytest.mark.parametrize("die_after", [0, 1, 3, 6, 10, 14, 18, 22, 24])
async def test_killed_build_resumes_to_the_same_memory_without_paying_twice(die_after: int) -> None:
    reference = _store(slice(0, 4))
    await _build(reference)
    expected = memory_snapshot(reference, SPACE)
    total = len(_ok_hashes(reference))
    assert die_after < total

    store = _store(slice(0, 4))
    answered = 0

    def dying(request: ChatRequest) -> str:
        nonlocal answered
        if answered >= die_after:
            raise Killed(f"killed after {answered} replies")
        answered += 1
        return scripted_reply(request)

    with pytest.raises(Killed):
        await _build(store, dying)
    await _build(store)
    assert memory_snapshot(store, SPACE) == expected
    assert check_space(store, Scope.local(SPACE)).ok
    paid = _ok_hashes(store)
    assert len(paid) == len(set(paid)) == total  # each request paid exactly once over both runs


@pytest.mark.parametrize("cuts", [(2,), (3,), (1, 4), (2, 3, 5)])
async def test_incremental_build_equals_full_build(cuts: tuple[int, ...]) -> None:
    n = 7
    full = _store(slice(0, n))
    await _build(full)

    inc = SQLiteStore.open(":memory:")
    reverted = kept = 0
    for start, stop in zip((0, *cuts), (*cuts, n), strict=True):
        import_spaces(inc, [dev_space(SPACE, slice(start, stop))], source="dev")
        report = await _build(inc)
        reverted += report.stages[0].updated
        kept += report.stages[0].skipped
    assert memory_snapshot(inc, SPACE, with_seq=False) == memory_snapshot(full, SPACE, with_seq=False)
    assert inc.get_state(Scope.local(SPACE), STATE_SESSIONS) == str(n)
    report = check_space(inc, Scope.local(SPACE))
    assert report.ok, report.violations[:3]
    assert reverted + kept == len(cuts)  # each later build re-examined the provisional tail of the one before


async def test_incremental_build_reverts_a_tail_that_continues_and_keeps_one_that_closed() -> None:
    # conv-26 session 1 ends with a 2-turn chunk (runs on into session 2); session 3 ends with a 7-turn one.
    inc = SQLiteStore.open(":memory:")
    outcomes = []
    for part in (slice(0, 1), slice(1, 3), slice(3, 4)):
        import_spaces(inc, [dev_space(SPACE, part)], source="dev")
        report = await _build(inc)
        outcomes.append((report.stages[0].updated, report.stages[0].skipped))
    assert outcomes[1] == (1, 0)  # session 1's tail was reverted and merged with session 2
    assert outcomes[2] == (0, 1)  # session 3's tail closed where the previous build closed it


async def test_batch_protocol_stops_exports_and_continues(tmp_path: Path) -> None:
    """The sequential plan through the batch protocol ends with the memory of a live build."""
    store = _store(slice(0, 2))
    options = OPTIONS.model_copy(update={"batch_out": tmp_path / "requests.jsonl", "few_rounds": False})
    rounds = 0
    stages_met: list[str] = []
    while True:
        llm = scripted_llm(store, fn=scripted_reply)
        try:
            await build_space(store, Scope.local(SPACE), llm=llm, embedder=HashEmbedder(), options=options)
            break
        except BatchPending as pending:
            rounds += 1
            assert pending.path == str(options.batch_out) and pending.count >= 1
            assert llm.backend.requests == []  # type: ignore[attr-defined]  # batch mode calls nothing
            lines = options.batch_out.read_text().splitlines()  # type: ignore[union-attr]
            assert len(lines) == pending.count
            if pending.stage in ("items", "triggers.item", "triggers.scene") and pending.stage not in stages_met:
                assert pending.count > 1  # an independent stage exports all its requests at once
            stages_met.extend(pending.stage.split(", "))
            results = tmp_path / f"results{rounds}.jsonl"
            results.write_text(_answer_batch(lines))
            report = import_results(store, results)
            assert report.imported == pending.count
            for p in store.pending(Scope.local(SPACE)):
                store.delete_pending([p.request_hash])
        assert rounds < 40
    assert set(stages_met) == {"segment", "topics", "items", "triggers.item", "triggers.scene", "persona"}
    reference = _store(slice(0, 2))
    await _build(reference)
    assert memory_snapshot(store, SPACE, with_seq=False) == memory_snapshot(reference, SPACE, with_seq=False)


def _answer_batch(lines: list[str]) -> str:
    import json

    from tests.support.stage_replies import stub_reply

    out = []
    for line in lines:
        req = json.loads(line)
        content = stub_reply(req["body"])
        out.append(
            json.dumps(
                {
                    "custom_id": req["custom_id"],
                    "response": {
                        "status_code": 200,
                        "body": {
                            "model": req["body"]["model"],
                            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
                            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
                        },
                    },
                }
            )
        )
    return "\n".join(out) + "\n"


async def test_space_without_turns_is_an_input_error() -> None:
    store = SQLiteStore.open(":memory:")
    store.ensure_space(Scope.local("empty"))
    with pytest.raises(InputError, match="import sessions first"):
        await build_space(
            store, Scope.local("empty"), llm=scripted_llm(store, fn=scripted_reply), embedder=HashEmbedder()
        )


async def test_modes_are_not_mixed_and_rebuild_resets() -> None:
    store = _store(slice(0, 2))
    await build_space(store, Scope.local(SPACE), llm=None, embedder=HashEmbedder())
    assert store.get_state(Scope.local(SPACE), STATE_MODE) == "extractive"
    with pytest.raises(BuildError, match="--rebuild"):
        await _build(store)
    reset_space(store, Scope.local(SPACE))
    assert (
        store.scenes(Scope.local(SPACE)) == []
        and store.topics(Scope.local(SPACE)) == []
        and store.get_state(Scope.local(SPACE), STATE_MODE) is None
    )
    assert (
        store.items(Scope.local(SPACE)) == []
        and store.triggers(Scope.local(SPACE)) == []
        and store.personas(Scope.local(SPACE)) == []
    )
    await _build(store)
    reference = _store(slice(0, 2))
    await _build(reference)
    assert memory_snapshot(store, SPACE, with_seq=False) == memory_snapshot(reference, SPACE, with_seq=False)


async def test_a_rebuild_that_changes_only_texts_is_seen_by_a_running_retriever() -> None:
    """The retriever of a long-running process rebuilds its index when the state keys change; a rebuild that keeps
    every id, count and persona but rewrites texts (another model, another prompt) must change them too."""
    store = _store(slice(0, 2))
    await _build(store)
    retriever = Retriever(store, HashEmbedder())
    before = retriever.index(Scope.local(SPACE))

    def moodier(request: ChatRequest) -> str:
        reply = scripted_reply(request)
        if request.schema_name != "SceneTriggerReply":
            return reply
        data = json.loads(reply)
        for scene in data["scenes"]:
            scene["emotion"] = "Quietly elated. " + scene["emotion"]
        return json.dumps(data)

    reset_space(store, Scope.local(SPACE))
    other = scripted_llm(store, fn=moodier, model="another-model")  # another model: the cached replies do not apply
    await build_space(store, Scope.local(SPACE), llm=other, embedder=HashEmbedder(), options=OPTIONS)
    after = retriever.index(Scope.local(SPACE))
    assert after is not before
    emotions = [t.fields["emotion"] for t in store.triggers(Scope.local(SPACE), family=TriggerFamily.SCENE)]
    assert emotions and all(e.startswith("Quietly elated. ") for e in emotions)


async def test_an_llm_build_leaves_every_index_text_embedded_so_the_first_search_embeds_only_the_query() -> None:
    store = _store(slice(0, 2))
    build_embedder = CountingEmbedder()
    llm = scripted_llm(store, fn=scripted_reply)
    await build_space(
        store,
        Scope.local(SPACE),
        llm=llm,
        embedder=CachedEmbedder(build_embedder, store, Scope.local(SPACE)),
        options=OPTIONS,
    )
    assert build_embedder.texts  # node texts and trigger views were embedded during the build

    search_embedder = CountingEmbedder()
    Retriever(store, search_embedder).search(Scope.local(SPACE), "Caroline support group")
    assert search_embedder.texts == ["support group"]  # the query, without the speaker it names (retrieve.speakers)


async def _batch_rounds(store: SQLiteStore, options: BuildOptions, tmp_path: Path) -> list[list[str]]:
    """Build through the batch protocol, answering each exported file with the plausible replies; the stages of each
    round, in order."""
    rounds: list[list[str]] = []
    while True:
        try:
            await build_space(
                store,
                Scope.local(SPACE),
                llm=scripted_llm(store, fn=scripted_reply),
                embedder=HashEmbedder(),
                options=options,
            )
            return rounds
        except BatchPending as pending:
            rounds.append(pending.stage.split(", "))
            lines = Path(pending.path or "").read_text().splitlines()
            results = tmp_path / f"results{len(rounds)}.jsonl"
            results.write_text(_answer_batch(lines))
            assert import_results(store, results).imported == len(lines)
        assert len(rounds) <= 12


async def test_a_fresh_batch_build_of_a_full_locomo_conversation_takes_at_most_six_rounds(tmp_path: Path) -> None:
    """The few-rounds plan (the default with --batch-out): one round per dependency level, whatever the length."""
    store = _store(slice(None))  # all 19 sessions, 419 turns
    # persona_items_per_call below a speaker's item count: the persona is read in parallel chunks and folded once
    options = BuildOptions(batch_out=tmp_path / "requests.jsonl", persona_items_per_call=40)
    rounds = await _batch_rounds(store, options, tmp_path)
    assert rounds == [
        ["segment"],
        ["topics", "triggers.scene"],
        ["items"],
        ["triggers.item", "persona"],
        ["persona"],
    ]
    check = check_space(store, Scope.local(SPACE))
    assert check.ok and check.complete, check.violations[:3]
    assert store.get_state(Scope.local(SPACE), STATE_OPEN_TAIL) is None  # no provisional tail in this plan
    sessions = {t.id: t.session_id for t in store.turns(Scope.local(SPACE))}
    assert all(
        len({sessions[t] for t in s.turn_ids}) == 1 for s in store.scenes(Scope.local(SPACE))
    )  # no scene spans a break
    # the same plan run live gives the same memory (the same requests)
    live = _store(slice(None))
    options_live = BuildOptions(few_rounds=True, persona_items_per_call=40)
    await build_space(
        live,
        Scope.local(SPACE),
        llm=scripted_llm(live, fn=scripted_reply),
        embedder=HashEmbedder(),
        options=options_live,
    )
    assert memory_snapshot(store, SPACE) == memory_snapshot(live, SPACE)


async def test_a_few_rounds_build_extends_incrementally(tmp_path: Path) -> None:
    """New sessions after a few-rounds batch build take one segmentation round too; a live sequential build after it
    picks up where it stopped."""
    store = _store(slice(0, 3))
    options = BuildOptions(batch_out=tmp_path / "requests.jsonl")
    assert len(await _batch_rounds(store, options, tmp_path)) <= 6
    import_spaces(store, [dev_space(SPACE, slice(0, 5))], source="dev")
    assert len(await _batch_rounds(store, options, tmp_path)) <= 6
    import_spaces(store, [dev_space(SPACE, slice(0, 6))], source="dev")
    await _build(store, options=BuildOptions())
    check = check_space(store, Scope.local(SPACE))
    assert check.ok and check.complete and len(store.sessions(Scope.local(SPACE))) == 6


async def test_an_extractive_build_leaves_every_index_text_embedded_so_the_first_search_embeds_only_the_query() -> None:
    store = _store(slice(0, 2))
    await build_space(
        store, Scope.local(SPACE), llm=None, embedder=CachedEmbedder(HashEmbedder(), store, Scope.local(SPACE))
    )
    assert store.items(Scope.local(SPACE)) and store.triggers(Scope.local(SPACE))
    search_embedder = CountingEmbedder()
    Retriever(store, search_embedder).search(Scope.local(SPACE), "Caroline support group")
    assert search_embedder.texts == ["support group"]  # item, scene and trigger texts were embedded by the build
