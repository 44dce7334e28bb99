"""The one async boundary (docs/architecture.md): while AsyncMemory builds, answers and edits, the caller's event loop
keeps serving. A ticker coroutine on that loop measures how late it wakes; the embedder blocks for BLOCK seconds per
call (as a real model on a CPU does), so any store, embedding or search work run on the loop shows up as a lag of at
least BLOCK. Not a benchmark: the bound is a fraction of BLOCK, which a single blocking call on the loop breaks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.openai_stub import OpenAIStub
from tests.support.stage_replies import dev_space, scripted_reply, stub_reply
from tests.test_service import NO_AUTO_BUILD, auth, dev_messages, make_keys
from tmem import AsyncMemory, ConfigError, Memory, Settings
from tmem.core import MemoryCore
from tmem.embed import HashEmbedder
from tmem.embed.base import EmbeddingResult
from tmem.ingest import import_sessions
from tmem.llm.base import ChatRequest
from tmem.llm.scripted import scripted_llm
from tmem.scope import Scope
from tmem.service import create_app
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
    import_sessions(
        store, Scope.local("conv-26"), dev_space("conv-26", slice(0, 1)).sessions
    )  # setup: the loop is not watched
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


async def test_the_services_loop_keeps_serving_during_a_build_job_and_asks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service in-process (its lifespan, build worker and all) on the test's loop: a build job runs while clients
    ask and fetch contexts; the loop wakes late by less than BOUND although every embedding blocks for BLOCK."""
    plain = HashEmbedder.embed

    def slow(self: HashEmbedder, texts: Sequence[str]) -> EmbeddingResult:
        time.sleep(BLOCK)
        return plain(self, texts)

    monkeypatch.setattr(HashEmbedder, "embed", slow)

    def reply(body: dict[str, Any]) -> str:
        try:
            return stub_reply(body)
        except ValueError:  # not a construction prompt: the answer
            return '{"answer": "pottery"}'

    with OpenAIStub(reply=reply) as stub:
        cfg = Settings(
            home=tmp_path / "mem",
            llm="openai",
            llm_model="stub-model",
            llm_base_url=stub.base_url,
            llm_api_key="test",
            embed_backend="hash",
            **NO_AUTO_BUILD,  # type: ignore[arg-type]
        )
        key = make_keys(cfg, "acme")["acme"]
        app = create_app(cfg)
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://tmem", headers=auth(key), timeout=120) as http,
        ):
            r = await http.post("/v1/spaces/c/messages", json={"messages": dev_messages(1)[0]})
            assert r.status_code == 200, r.text
            # Warm-up, not watched: the first LLM call imports the SDK's response types (seconds of imports under
            # load, in whichever thread calls first), as any first request of a fresh server would.
            r = await http.post("/v1/spaces/c/ask", json={"question": "What did Caroline take up?"})
            assert r.status_code == 200, r.text

            async def traffic() -> list[httpx.Response]:
                job = (await http.post("/v1/spaces/c/build")).json()["job"]
                answers: list[httpx.Response] = []
                while True:
                    answers += await asyncio.gather(
                        http.post("/v1/spaces/c/ask", json={"question": "What did Caroline take up?"}),
                        http.get("/v1/spaces/c/context", params={"q": "pottery"}),
                    )
                    state = (await http.get(f"/v1/jobs/{job}")).json()
                    if state["state"] not in ("queued", "running"):
                        assert state["state"] == "succeeded", state
                        return answers

            work = asyncio.ensure_future(traffic())
            lag, _ = await _max_lag(work)
            answers = work.result()
    assert lag < BOUND, f"the service's event loop stalled {lag:.2f} s"
    assert answers and all(r.status_code == 200 for r in answers), [r.text for r in answers if r.status_code != 200]
    assert any(r.json().get("answer") == "pottery" for r in answers)


async def test_memory_inside_a_running_loop_says_to_use_async_memory(tmp_path: Path) -> None:
    """The sync facade would block the loop that calls it while the model works: it refuses, naming AsyncMemory."""
    with Memory.open(tmp_path / "mem", Settings(llm="none", embed_backend="hash")) as mem:
        mem.add_sessions("conv-26", dev_space("conv-26", slice(0, 1)).sessions)
        with pytest.raises(ConfigError, match=r"use tmem\.AsyncMemory there"):
            mem.build("conv-26")
        assert mem.staleness("conv-26").stale_turns > 0  # nothing was built
