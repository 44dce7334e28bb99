"""tmem in pydantic-ai (issue 31): the memory toolset and its instructions, carried by the agent's dependencies, run by
pydantic-ai's own offline FunctionModel - in process and against ``tmem serve``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.support.agent_memory import CUE, CUE_BUDGET, SPACE, Backends, backends, cue_context, llm_built
from tmem.errors import ConfigError
from tmem.integrations.core import CONTEXT_HEADER, context_block
from tmem.integrations.pydantic_ai import TmemDeps, aremember_messages, memory_toolset, remember_messages

__all__ = ["backends"]  # the fixture, imported for pytest

BASE = "You are a helpful assistant."


@dataclass
class Script:
    """A FunctionModel's function: answers the scripted responses in turn, recording what each call was handed."""

    replies: list[ModelResponse]
    instructions: list[str | None] = field(default_factory=list)
    inputs: list[list[ModelMessage]] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.instructions.append(info.instructions)
        self.inputs.append(list(messages))
        return self.replies.pop(0)


def _text(text: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(text)])


def _call(tool: str, args: dict[str, Any], call_id: str) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(tool, args, tool_call_id=call_id)])


def _agent(script: Script) -> Agent[TmemDeps, str]:
    return Agent(FunctionModel(script), deps_type=TmemDeps, instructions=BASE, toolsets=[memory_toolset()])


def _returns(messages: list[ModelMessage]) -> list[str]:
    return [
        str(p.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart | RetryPromptPart)
    ]


async def test_an_agent_remembers_through_its_tools_and_is_handed_its_memory(backends: Backends) -> None:
    memory = backends.make_async()
    try:
        deps = TmemDeps(memory, "ann")
        script = Script(
            [
                _call("remember", {"text": "Ann's cat is called Miso"}, "c1"),
                _text("I'll remember Miso."),
                _text("Have a nice trip!"),
                _call("lookup", {"item_id": "no-such-item"}, "c2"),
                _text("Your cat is Miso."),
            ]
        )
        agent = _agent(script)
        first = await agent.run("My cat is called Miso, please remember", deps=deps)
        await aremember_messages(deps, first.new_messages())
        second = await agent.run("I am off to Rome on Friday", deps=deps, message_history=first.all_messages())
        await aremember_messages(deps, second.new_messages())
        done = await agent.run("What was the name of my cat?", deps=deps, message_history=second.all_messages())
        assert done.output == "Your cat is Miso."
        texts = [t.text for t in (await memory.export("ann")).turns]
        assert texts[0] == "Ann's cat is called Miso"  # the remember tool
        assert "I am off to Rome on Friday" in texts and "Have a nice trip!" in texts  # the run, remembered
        assert script.instructions[0] == BASE  # a new user: memory holds nothing yet
        last = script.instructions[3]
        assert last is not None and CONTEXT_HEADER in last and "Ann's cat is called Miso" in last
        assert "tmem:" in _returns(script.inputs[4])[-1] and "no-such-item" in _returns(script.inputs[4])[-1]
    finally:
        await backends.close_async(memory)


async def test_a_sync_memory_serves_the_async_run_and_deps_are_checked(backends: Backends) -> None:
    """A Memory or Client (sync) passed in the deps: the tools and instructions run it in a worker thread."""

    @dataclass
    class AppDeps:
        user_name: str
        tmem: TmemDeps

    script = Script([_text("Noted."), _text("Porto.")])
    agent: Agent[AppDeps, str] = Agent(FunctionModel(script), deps_type=AppDeps, toolsets=[memory_toolset()])
    deps = AppDeps("ann", TmemDeps(backends.sync, "ann"))
    first = await agent.run("I move to Porto next month", deps=deps)
    report = await aremember_messages(deps, first.new_messages())
    assert report is not None and len(report.added) == 2
    await agent.run("Where do I move next month?", deps=deps)
    assert script.instructions[1] is not None and "I move to Porto next month" in script.instructions[1]
    with pytest.raises(ConfigError, match="TmemDeps"):
        await agent.run("hello", deps="not deps")  # type: ignore[arg-type]


def test_a_runs_messages_are_remembered_with_their_own_times(backends: Backends) -> None:
    when = datetime(2024, 5, 1, 9, 30, tzinfo=UTC)
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("I start at the bakery on Monday", timestamp=when)]),
        ModelResponse(parts=[ToolCallPart("recall", {"query": "bakery"}, tool_call_id="c1")], timestamp=when),
        ModelResponse(parts=[TextPart("Good luck on Monday!")], timestamp=when + timedelta(seconds=5)),
    ]
    report = remember_messages(TmemDeps(backends.sync, "ann"), messages)
    assert report is not None and len(report.added) == 2
    turns = backends.sync.export("ann").turns
    assert [(t.speaker, t.text, t.time) for t in turns] == [
        ("user", "I start at the bakery on Monday", datetime(2024, 5, 1, 9, 30)),
        ("assistant", "Good luck on Monday!", datetime(2024, 5, 1, 9, 30, 5)),
    ]
    assert remember_messages(TmemDeps(backends.sync, "ann"), messages[1:2]) is None  # a tool call says nothing


@pytest.mark.slow
async def test_a_later_turn_is_handed_an_associated_memory_of_the_llm_built_space(tmp_path: Path) -> None:
    with llm_built(tmp_path) as memory:
        deps = TmemDeps(memory, SPACE, max_tokens=CUE_BUDGET)
        script = Script([_text("Congratulations!"), _text("That sounds tiring.")])
        agent = _agent(script)
        first = await agent.run("Guess what, I adopted a second dog last weekend!", deps=deps)
        await aremember_messages(deps, first.new_messages())
        told = [t for t in memory.export(SPACE).turns if t.text == "Guess what, I adopted a second dog last weekend!"]
        assert [t.speaker for t in told] == ["user"]
        expected = cue_context(memory)
        await agent.run(CUE, deps=deps, message_history=first.all_messages())
        assert script.instructions[-1] == BASE + "\n\n" + context_block(expected)
