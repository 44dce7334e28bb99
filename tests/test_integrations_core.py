"""The adapters' one core (tmem.integrations.core.MemoryLink) on its own: what it refuses, what a new user recalls,
and that a failure is never turned into an empty result - in process and against ``tmem serve``."""

from __future__ import annotations

import pytest

from tests.support.agent_memory import Backends, backends
from tmem.errors import ConfigError, InputError, NotFoundError
from tmem.integrations.core import CONTEXT_HEADER, NOTHING_RECALLED, Call, MemoryLink, Plan, context_block

__all__ = ["backends"]  # the fixture, imported for pytest


def test_it_takes_a_tmem_front_end_and_a_space() -> None:
    with pytest.raises(ConfigError, match=r"tmem\.Memory, tmem\.AsyncMemory, tmem\.client\.Client"):
        MemoryLink(object(), "ann")  # type: ignore[arg-type]


def test_bad_arguments_say_what_to_fix(backends: Backends) -> None:
    with pytest.raises(InputError, match="Name the space"):
        MemoryLink(backends.sync, " ")
    with pytest.raises(InputError, match="max_tokens"):
        MemoryLink(backends.sync, "ann", max_tokens=-1)


async def test_a_new_user_recalls_nothing_and_an_unknown_item_is_an_error(backends: Backends) -> None:
    link = MemoryLink(backends.sync, "ann", max_tokens=300)
    empty = link.recall("where do I live?")
    assert (empty.text, empty.tokens, empty.max_tokens, context_block(empty)) == ("", 0, 300, "")
    assert await link.recall_tool("where do I live?") == NOTHING_RECALLED
    link.remember([{"speaker": "user", "text": "I live in Lyon, near the Saone", "time": "2024-02-03T10:00:00"}])
    found = link.recall("where do I live?")
    assert "I live in Lyon" in found.text and 0 < found.tokens <= 300
    assert (await link.recall_tool("Lyon")).startswith(CONTEXT_HEADER)
    with pytest.raises(NotFoundError):  # the space exists: the item's absence is raised, not an empty answer
        link.lookup("no-such-item")
    with pytest.raises(InputError, match="Name what to forget"):
        await link.forget_tool([], [])
    with pytest.raises(InputError, match="query"):
        await link.recall_tool("  ")


async def test_the_async_forms_and_the_sync_refusal(backends: Backends) -> None:
    memory = backends.make_async()
    try:
        link = MemoryLink(memory, "ann")
        report = await link.aremember([{"speaker": "human", "text": "My bike is a red Bianchi"}])
        assert [t.speaker for t in await link.aturns()] == ["user"]  # a LangChain role, stored under its name
        assert "red Bianchi" in (await link.arecall("bike")).text
        assert (await link.aforget(report.added)).turns_forgotten == report.added
        with pytest.raises(ConfigError, match="is async"):
            link.recall("bike")
    finally:
        await backends.close_async(memory)


def _plan(log: list[object]) -> Plan[int]:
    spaces = yield Call("spaces", "")
    log.append(sorted(s.name for s in spaces))
    yield Call("remember", "bob", [{"speaker": "assistant", "text": "Noted.", "time": "2024-01-01T09:00:00"}])
    turns = yield Call("turns", "bob")
    return len(turns)


async def test_a_plan_runs_the_same_sync_and_async(backends: Backends) -> None:
    sync_log: list[object] = []
    assert MemoryLink(backends.sync, "ann").drive(_plan(sync_log)) == 1
    memory = backends.make_async()
    try:
        async_log: list[object] = []
        assert await MemoryLink(memory, "ann").adrive(_plan(async_log)) == 2
        assert sync_log == [[]] and async_log == [["bob"]]
    finally:
        await backends.close_async(memory)
