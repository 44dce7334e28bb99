"""The adapters' async paths never block the framework's event loop (issue 31): a LangGraph agent, an Agents SDK agent
and a pydantic-ai agent run at once on one loop, each recalling and remembering through tmem, while a ticker on the
loop measures how late it wakes. The embedder blocks its thread BLOCK seconds per call (tests/test_memory_event_loop_lag.py),
so one tmem call run on the loop would show as a lag of BLOCK."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner
from agents.testing import ScriptedModel, assistant_message
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.models.function import FunctionModel

from tests.support.agent_memory import settings
from tests.test_integrations_langgraph import react_agent
from tests.test_integrations_pydantic_ai import Script, _text
from tests.test_memory_event_loop_lag import BOUND, SlowEmbedder, _max_lag
from tmem import AsyncMemory, Memory
from tmem.integrations.openai_agents import TmemSession, memory_instructions
from tmem.integrations.pydantic_ai import TmemDeps, aremember_messages, memory_toolset


class ThreeAgents:
    """A LangGraph, an Agents SDK and a pydantic-ai agent over ``memory``, each with a space of its own."""

    spaces = ("lg", "sdk", "pyd")

    def __init__(self, memory: Any, turns: int) -> None:
        self.langgraph = react_agent(memory, "lg", ["Noted."] * turns)
        scripted = ScriptedModel([[assistant_message("Noted.")]] * turns)
        self.sdk = Agent(name="a", model=scripted, instructions=memory_instructions(memory, "sdk", "Be brief."))
        self.session = TmemSession(memory, "sdk", "s1")
        self.pydantic = PydanticAgent(FunctionModel(Script([_text("Noted.")] * turns)), toolsets=[memory_toolset()])
        self.deps = TmemDeps(memory, "pyd")

    async def _pydantic(self, said: str) -> None:
        done = await self.pydantic.run(said, deps=self.deps)
        await aremember_messages(self.deps, done.new_messages())

    async def turn(self, said: str) -> None:
        """One exchange of each agent, at once."""
        await asyncio.gather(
            self.langgraph.ainvoke({"messages": [("user", said)]}),
            Runner.run(self.sdk, said, session=self.session),
            self._pydantic(said),
        )


@pytest.mark.parametrize("front", ["AsyncMemory", "Memory"])
async def test_three_agents_at_once_keep_the_loop_responsive(front: str, tmp_path: Path) -> None:
    SlowEmbedder.calls = 0
    memory = Memory.open(settings=settings(tmp_path), embedder=SlowEmbedder())
    try:
        for space in ("lg", "sdk", "pyd"):  # each agent's user has a past: its recall searches (and embeds)
            memory.add_messages(space, [{"speaker": "user", "text": "I cycle to work", "time": "2024-03-01T08:00"}])
        given: Any = AsyncMemory(memory.core) if front == "AsyncMemory" else memory  # Memory: in worker threads
        agents = ThreeAgents(given, turns=2)
        await agents.turn("I bought a new bike")  # the frameworks' first-call setup (not tmem's), unmeasured
        SlowEmbedder.calls = 0
        work = asyncio.ensure_future(agents.turn("My bike is a red Bianchi"))
        lag, ticks = await _max_lag(work)
        work.result()
        assert SlowEmbedder.calls >= 3, "the agents' recalls embedded nothing: the test measured nothing"
        assert ticks > 10
        assert lag < BOUND, f"the event loop stalled {lag:.2f} s while three agents used tmem"
        for space in agents.spaces:  # each exchange reached memory
            said = [(t.speaker, t.text) for t in memory.export(space).turns]
            assert said[-2:] == [("user", "My bike is a red Bianchi"), ("assistant", "Noted.")], space
    finally:
        memory.close()
