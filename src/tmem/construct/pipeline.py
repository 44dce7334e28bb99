"""Orchestration of LLM-mode construction: segment -> topics -> items -> item triggers -> scene triggers -> persona.

Checkpoints: every stage derives its to-do list from the store (turns outside scenes, scenes without topics, topics
with scenes not yet extracted, nodes without triggers) and writes each unit of work in one transaction. Sequential
stages (segment, topics) write after every call; parallel stages write once all their calls are answered. A build
killed at any moment and rerun therefore redoes only unwritten work, and every request it repeats is byte-identical
(stable ordering, content-derived ids), so the LLM layer's cache answers it: no call is paid twice.

Batch protocol: with ``options.batch_out`` the LLM only queues uncached requests; the first stage that meets one
gathers all its currently independent requests, writes them with :func:`tmem.llm.batch.export_pending` and raises
:class:`BatchPending`. Import the results (``tmem llm batch-import``) and build again to continue.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Sequence

from pydantic import BaseModel

from tmem.construct.common import StageRun
from tmem.construct.items import STAGE as ITEMS_STAGE
from tmem.construct.items import run_items
from tmem.construct.options import BuildOptions
from tmem.construct.persona import STAGE as PERSONA_STAGE
from tmem.construct.persona import run_persona
from tmem.construct.report import STATE_FAILED, STATE_FALLBACK, STATE_MODE, STATE_SESSIONS, BuildReport
from tmem.construct.revert import STATE_COVERED
from tmem.construct.segment import STAGE as SEGMENT_STAGE
from tmem.construct.segment import STATE_OPEN_TAIL, run_segment
from tmem.construct.topics import STAGE as TOPICS_STAGE
from tmem.construct.topics import run_topics
from tmem.construct.triggers import ITEM_STAGE, SCENE_STAGE, run_item_triggers, run_scene_triggers
from tmem.embed.base import Embedder
from tmem.errors import BatchPending, BuildError, ConfigError, InputError, LLMError
from tmem.index.factory import refresh_space
from tmem.index.space import SpaceRecords, load_space
from tmem.llm.base import LLM
from tmem.models import BuildMode, TriggerFamily
from tmem.scope import Scope
from tmem.store.base import Store
from tmem.util.text import text_hash

STATE_DIGEST = "build.digest"  # content digest of the memory after the last completed LLM build

StageFn = Callable[[Store, Scope, StageRun, BuildOptions], Awaitable[None]]

# What each stage reads that another stage writes (direct dependencies). In batch mode a stage runs in the same round
# as an earlier one whose requests are pending when it does not depend on it, so a fresh build takes one round per
# dependency level: segment | topics + triggers.scene | items | triggers.item + persona (| persona fold).
DEPENDS: dict[str, tuple[str, ...]] = {
    SEGMENT_STAGE: (),
    TOPICS_STAGE: (SEGMENT_STAGE,),
    ITEMS_STAGE: (TOPICS_STAGE,),
    ITEM_STAGE: (ITEMS_STAGE,),
    SCENE_STAGE: (SEGMENT_STAGE,),
    PERSONA_STAGE: (ITEMS_STAGE,),
}

STAGES: tuple[tuple[str, StageFn], ...] = (
    (SEGMENT_STAGE, run_segment),
    (TOPICS_STAGE, run_topics),
    (ITEMS_STAGE, run_items),
    (ITEM_STAGE, run_item_triggers),
    (SCENE_STAGE, run_scene_triggers),
    (PERSONA_STAGE, run_persona),
)


async def build_space(
    store: Store,
    space: Scope,
    *,
    llm: LLM | None,
    embedder: Embedder,
    options: BuildOptions | None = None,
    progress: bool = False,
) -> BuildReport:
    """Build (or extend) the memory of ``space``; with ``llm=None`` the extractive mode builds it instead. In both
    modes ``embedder`` embeds what the index needs (through the store's embedding cache).

    With ``options.batch_out`` set, ``llm`` must be a :class:`tmem.llm.service.StructuredLLM`; it is switched to batch
    mode. Raises BatchPending when requests were written for the batch protocol, BuildError when the space holds a
    memory of the other mode.
    """
    if llm is None:
        from tmem.construct.extractive import build_extractive

        report = await build_extractive(store, space, embedder=embedder, progress=progress)
        # As in the LLM mode below: embed what the index will hold now, so that the first search embeds only its
        # query (the extractive builder embeds turns and keyphrases; items, scenes and trigger views were left to
        # the first search, minutes on an M-sized history: bench/results/longmemeval_scale.md).
        refresh_space(store, space, embedder, progress=progress)
        return report
    options = options or BuildOptions()
    store.get_space(space)  # NotFoundError naming the known spaces
    if not store.turns(space):
        raise InputError(
            "Space {space!r} has no turns yet: import sessions first (`tmem import FILE`).",
            agent="Space {space!r} has no messages yet: store some with the remember tool first.",
            space=space,
        )
    mode = store.get_state(space, STATE_MODE)
    if mode == BuildMode.EXTRACTIVE.value or any(s.mode is BuildMode.EXTRACTIVE for s in store.scenes(space)):
        raise BuildError(
            "Space {space!r} holds an extractive (no-LLM) memory; the LLM mode does not extend it. Rebuild it with "
            "`tmem build {space} --rebuild` (drops the memory, keeps the conversation).",
            space=space,
        )
    if options.batch_out is not None:
        _enable_batch(llm)
    started = time.perf_counter()
    report = BuildReport(space=space.space, mode=BuildMode.LLM.value)
    waiting: dict[str, BatchPending] = {}  # stages whose requests were queued for the batch protocol
    for name, stage in STAGES:
        if any(dep in waiting for dep in _closure(name)):
            continue  # it reads what a waiting stage has not written yet: next round
        run = StageRun(stage=name, llm=llm, space=space, concurrency=options.concurrency, progress=progress)
        t0 = time.perf_counter()
        try:
            await stage(store, space, run, options)
        except BatchPending as pending:
            waiting[name] = pending
            continue
        except LLMError as exc:
            raise BuildError(
                "Space {space!r}, stage {stage}: {cause} Finished work is kept and answered requests are cached: "
                "rerun `tmem build {space}` to resume.",
                agent="Space {space!r}, stage {stage}: {cause} Finished work is kept and answered requests are "
                "cached: the next build (remember with build='now') resumes it.",
                space=space,
                stage=name,
                cause=str(exc),
            ) from exc
        finally:
            run.close()
            run.report.seconds = time.perf_counter() - t0
            report.failed.extend(run.failed)
            report.fallback.update(run.fallback)
        report.stages.append(run.report)
    if waiting:
        _save_failed(store, space, report)
        raise _export(store, space, ", ".join(waiting), options, next(iter(waiting.values()))) from None
    # Embed every text the index will hold (node texts, trigger views) through the embedding cache now, so that the
    # first search embeds only its query; an incremental build embeds only what is new (with pgvector, only the new
    # and changed entries are written to the database).
    records = load_space(store, space)
    refresh_space(store, space, embedder, records, progress=progress)
    report.counts = counts_of(records)
    with store.transaction():
        store.set_state(space, STATE_MODE, BuildMode.LLM.value)
        store.set_state(space, STATE_SESSIONS, str(len(store.sessions(space))))
        # Changes whenever a build changed the memory (readers such as the retriever's index cache watch state keys).
        store.set_state(space, STATE_DIGEST, digest_of(records))
        _save_failed(store, space, report)
    report.seconds = time.perf_counter() - started
    return report


def _save_failed(store: Store, space: Scope, report: BuildReport) -> None:
    """The units this build could not complete (replaced at every build: a rerun that completes them clears it)."""
    failed = json.dumps([u.model_dump() for u in report.failed]) if report.failed else None
    store.set_state(space, STATE_FAILED, failed)


def _closure(stage: str) -> set[str]:
    """Every stage ``stage`` depends on, directly or not."""
    out: set[str] = set()
    todo = list(DEPENDS[stage])
    while todo:
        dep = todo.pop()
        if dep not in out:
            out.add(dep)
            todo.extend(DEPENDS[dep])
    return out


def digest_of(records: SpaceRecords) -> str:
    """Hash of the whole built memory (every record with its texts and links). Counts alone are not enough: a rebuild
    by another model keeps content-derived ids and counts while rewriting titles, summaries and trigger views."""
    parts: list[Sequence[BaseModel]] = [
        records.scenes,
        records.topics,
        records.links,
        records.items,
        records.triggers,
        records.personas,
    ]
    return text_hash(json.dumps([r.model_dump_json() for part in parts for r in part]))[:16]


def counts_of(records: SpaceRecords) -> dict[str, int]:
    counts = {
        "scenes": len(records.scenes),
        "topics": len(records.topics),
        "topic_links": len(records.links),
        "items": len(records.items),
        "items_connected": sum(1 for it in records.items if it.kind.value == "connected"),
        "items_superseded": sum(1 for it in records.items if it.superseded_by is not None),
        "personas": len(records.personas),
    }
    for family in TriggerFamily:
        counts[f"triggers_{family.value}"] = sum(1 for t in records.triggers if t.family is family)
    return counts


def memory_counts(store: Store, space: Scope) -> dict[str, int]:
    """Nodes per type in the stored memory of ``space`` (the counts every build report shows)."""
    return counts_of(load_space(store, space))


def reset_space(store: Store, space: Scope) -> None:
    """Drop the built memory of ``space`` (scenes, topics, items, triggers, personas, build state); keep the
    conversation and the LLM call log (so a rebuild with the same model and prompts is answered from the cache)."""
    with store.transaction():
        store.delete_personas(space)
        store.delete_items(space, [it.id for it in store.items(space)])
        store.delete_scenes(space, [s.id for s in store.scenes(space)])
        store.delete_topics(space, [t.id for t in store.topics(space)])
        for key in store.state_keys(space):
            if key.startswith(("build.", "segment.", "items.", "extractive.")) or key in (
                STATE_OPEN_TAIL,
                STATE_COVERED,
                STATE_FAILED,
                STATE_FALLBACK,
            ):
                store.set_state(space, key, None)


def _enable_batch(llm: LLM) -> None:
    from tmem.llm.service import StructuredLLM

    if not isinstance(llm, StructuredLLM):
        raise ConfigError("The batch protocol needs the StructuredLLM of tmem.llm.service (use make_llm).")
    llm.batch = True


def _export(store: Store, space: Scope, stage: str, options: BuildOptions, first: BatchPending) -> BatchPending:
    from tmem.llm.batch import export_pending

    assert options.batch_out is not None  # only the batch mode raises BatchPending
    count = export_pending(store, options.batch_out, space)
    return BatchPending(
        f"Space {space.key!r}, stage {stage}: {count} uncached request(s) written to {options.batch_out}. Run them "
        f"through the OpenAI Batch API (or any offline process), import the results with `tmem llm batch-import "
        f"RESULTS.jsonl`, then run `tmem build {space.key}` again to continue.",
        count=count,
        stage=stage,
        path=str(options.batch_out),
    )
