"""The one async boundary (docs/architecture.md): while AsyncMemory builds, answers and edits, the caller's event loop
keeps serving. A ticker coroutine on that loop measures how late it wakes; the embedder blocks for BLOCK seconds per
call (as a real model on a CPU does), so any store, embedding or search work run on the loop shows up as a lag of at
least BLOCK. Not a benchmark: the bound is a fraction of BLOCK, which a single blocking call on the loop breaks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

from tests.support.stage_replies import dev_space, scripted_reply
from tmem import AsyncMemory, Settings
from tmem.core import MemoryCore
from tmem.embed import HashEmbedder
from tmem.embed.base import EmbeddingResult
from tmem.ingest import import_sessions
from tmem.llm.base import ChatRequest
from tmem.llm.scripted import scripted_llm
from tmem.store import open_store

BLOCK = 0.6  # seconds every embedding call blocks its thread
BOUND = 0.3  # the most the loop may wake late (a blocking embedding call on it would take BLOCK)
TICK = 0.01


class SlowEmbedder(HashEmbedder):
    """The hash embedder, blocking its thread for BLOCK seconds per call (time.sleep releases the GIL, as a model's
    native code does)."""

    calls = 0

    def embed(self, texts: Sequence[str]) -> EmbeddingResult:
        SlowEmbedder.calls += 1
        time.sleep(BLOCK)
        return super().embed(texts)


def _reply(request: ChatRequest) -> str:
    if request.stage == "answer":
        return '{"answer": "pottery"}'
    return scripted_reply(request)


async def _max_lag(work: asyncio.Future[object]) -> tuple[float, int]:
    """Tick every TICK seconds until ``work`` is done: the latest wake-up and the number of ticks."""
    worst, ticks = 0.0, 0
    while not work.done():
        before = time.perf_counter()
        await asyncio.sleep(TICK)
        worst = max(worst, time.perf_counter() - before - TICK)
        ticks += 1
    return worst, ticks


def _memory(tmp_path: Path) -> AsyncMemory:
    home = tmp_path / "mem"
    store = open_store(home / "tmem.db")
    import_sessions(store, "conv-26", dev_space("conv-26", slice(0, 1)).sessions)  # setup: the loop is not watched
    llm = scripted_llm(store, fn=_reply)
    return AsyncMemory(MemoryCore(store, Settings(home=home, llm="none"), llm=llm, embedder=SlowEmbedder()))


async def test_the_callers_loop_keeps_serving_while_async_memory_builds(tmp_path: Path) -> None:
    async with _memory(tmp_path) as mem:
        started, calls = time.perf_counter(), SlowEmbedder.calls
        build = asyncio.ensure_future(mem.build("conv-26"))
        lag, ticks = await _max_lag(build)
        report = build.result()
        took = time.perf_counter() - started
    assert lag < BOUND, f"the event loop stalled {lag:.2f} s during a build"
    assert report.mode == "llm" and report.counts["items"] > 0
    assert SlowEmbedder.calls - calls >= 2 and took >= 2 * BLOCK  # the build had seconds of blocking work
    assert ticks > took / (4 * TICK)  # the ticker ran throughout


async def test_the_callers_loop_keeps_serving_while_async_memory_answers_and_edits(tmp_path: Path) -> None:
    async with _memory(tmp_path) as mem:
        await mem.build("conv-26")
        item = (await mem.list_items("conv-26", limit=1)).items[0]
        calls = SlowEmbedder.calls
        work = asyncio.ensure_future(
            asyncio.gather(
                mem.ask("conv-26", "What did Caroline take up?"),
                mem.update_item("conv-26", item.id, "Caroline joined a pottery class in May 2023."),
                mem.context("conv-26", "pottery", max_tokens=300),
            )
        )
        lag, _ = await _max_lag(work)
        answer, updated, context = work.result()
    assert lag < BOUND, f"the event loop stalled {lag:.2f} s during ask, update_item and context"
    assert answer.answer == "pottery" and updated.text.startswith("Caroline joined") and context.hits
    assert SlowEmbedder.calls - calls >= 2  # the queries were embedded (BLOCK seconds each)
