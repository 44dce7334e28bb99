"""tmem in the OpenAI Agents SDK (issue 31): TmemSession, the memory tools and the dynamic instructions, run by the
SDK's own offline test model (``agents.testing.ScriptedModel``) - in process and against ``tmem serve``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner
from agents.testing import ScriptedModel, assistant_message, function_call

from tests.support.agent_memory import CUE, CUE_BUDGET, SPACE, Backends, backends, cue_context, llm_built
from tmem.integrations.core import CONTEXT_HEADER, context_block
from tmem.integrations.openai_agents import SESSION_KEY, TmemSession, memory_instructions, memory_tools

__all__ = ["backends"]  # the fixture, imported for pytest

BASE = "You are a helpful assistant."


def _agent(memory: Any, space: str, model: ScriptedModel, max_tokens: int = 2000) -> Agent[Any]:
    return Agent(
        name="assistant",
        model=model,
        instructions=memory_instructions(memory, space, BASE, max_tokens=max_tokens),
        tools=memory_tools(memory, space, max_tokens=max_tokens),
    )


async def test_the_session_keeps_the_history_and_grows_memory(backends: Backends) -> None:
    memory = backends.make_async()
    try:
        session = TmemSession(memory, "ann", "chat-1")
        await session.add_items(
            [
                {"role": "user", "content": "My sister Ines lives in Porto"},
                {"type": "function_call", "call_id": "c1", "name": "noop", "arguments": "{}"},
                {"role": "assistant", "content": [{"type": "output_text", "text": "Porto is lovely."}]},
            ]
        )
        assert session.pending == []  # the reply came: the exchange is in memory
        assert len(await session.get_items()) == 3  # the SDK's items as they were, tool call included
        assert (await session.get_items(limit=1))[0]["role"] == "assistant"  # type: ignore[typeddict-item]
        turns = (await memory.export("ann")).turns
        assert [(t.speaker, t.text, t.metadata[SESSION_KEY]) for t in turns] == [
            ("user", "My sister Ines lives in Porto", "chat-1"),
            ("assistant", "Porto is lovely.", "chat-1"),
        ]
        await session.add_items([{"role": "user", "content": "Scratch that"}])
        assert session.pending and len((await memory.export("ann")).turns) == 2  # waits for the reply
        assert (await session.pop_item()) == {"role": "user", "content": "Scratch that"}
        assert session.pending == []
        popped = await session.pop_item()
        assert popped is not None and popped["role"] == "assistant"  # type: ignore[typeddict-item]
        assert [t.text for t in (await memory.export("ann")).turns] == ["My sister Ines lives in Porto"]
        await session.clear_session()
        assert await session.get_items() == []
        assert [t.text for t in (await memory.export("ann")).turns] == ["My sister Ines lives in Porto"]  # kept
    finally:
        await backends.close_async(memory)


async def test_an_agent_remembers_through_its_tools_and_session_and_is_handed_its_memory(backends: Backends) -> None:
    memory = backends.make_async()
    try:
        model = ScriptedModel(
            [
                [function_call("remember", {"text": "Ann's cat is called Miso"}, call_id="c1")],
                [assistant_message("I'll remember Miso.")],
                [assistant_message("Have a nice trip!")],
                [function_call("recall", {"query": "cat name"}, call_id="c2")],
                [assistant_message("Your cat is Miso.")],
            ]
        )
        agent, session = _agent(memory, "ann", model), TmemSession(memory, "ann", "chat-1")
        await Runner.run(agent, "My cat is called Miso, please remember", session=session)
        await Runner.run(agent, "I am off to Rome on Friday", session=session)
        done = await Runner.run(agent, "What was the name of my cat?", session=session)
        assert done.final_output == "Your cat is Miso."
        texts = [t.text for t in (await memory.export("ann")).turns]
        assert "Ann's cat is called Miso" in texts  # the remember tool
        assert "I am off to Rome on Friday" in texts and "Have a nice trip!" in texts  # the session
        first, last = model.calls[0], model.calls[3]
        assert first.system_instructions == BASE  # a new user: memory holds nothing yet
        assert last.system_instructions is not None and last.system_instructions.startswith(
            BASE + "\n\n" + CONTEXT_HEADER
        )
        assert "My cat is called Miso, please remember" in last.system_instructions
        tool_output = next(i for i in model.calls[4].input if i.get("call_id") == "c2" and "output" in i)
        assert "Miso" in str(tool_output["output"])
        assert model.remaining_steps == 0
    finally:
        await backends.close_async(memory)


async def test_forget_and_lookup_tools(backends: Backends) -> None:
    memory = backends.make_async()
    try:
        report = await memory.add_messages(
            "ann", [{"speaker": "ann", "text": "I hate olives", "id": "t1", "time": "2024-01-02T10:00:00"}]
        )
        assert report.added == ["t1"]
        model = ScriptedModel(
            [
                [function_call("lookup", {"item_id": "no-such-item"}, call_id="c1")],
                [function_call("forget", {"turn_ids": ["t1"], "item_ids": []}, call_id="c2")],
                [assistant_message("Done.")],
            ]
        )
        await Runner.run(_agent(memory, "ann", model), "Forget what I said about olives")
        outputs = [str(i["output"]) for i in model.calls[2].input if i.get("type") == "function_call_output"]
        assert "no-such-item" in outputs[0] and "forgotten: t1" in outputs[1]
        assert (await memory.export("ann")).turns == []
    finally:
        await backends.close_async(memory)


@pytest.mark.slow
async def test_a_later_turn_is_handed_an_associated_memory_of_the_llm_built_space(tmp_path: Path) -> None:
    with llm_built(tmp_path) as memory:
        model = ScriptedModel([[assistant_message("Congratulations!")], [assistant_message("That sounds tiring.")]])
        agent, session = _agent(memory, SPACE, model, CUE_BUDGET), TmemSession(memory, SPACE, "chat-1")
        await Runner.run(agent, "Guess what, I adopted a second dog last weekend!", session=session)
        told = [t for t in memory.export(SPACE).turns if t.text == "Guess what, I adopted a second dog last weekend!"]
        assert [t.speaker for t in told] == ["user"]
        expected = cue_context(memory)
        await Runner.run(agent, CUE, session=session)
        assert model.calls[-1].system_instructions == BASE + "\n\n" + context_block(expected)
