"""tmem in LangGraph (issue 31): TmemStore as a BaseStore, and the pre/post model hooks in create_react_agent with
LangChain's own fake chat model - in process and against ``tmem serve`` (the ``backends`` fixture)."""

from __future__ import annotations

import warnings
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import BaseMessage, SystemMessage
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import Item, SearchItem

from tests.support.agent_memory import CUE, CUE_BUDGET, SPACE, Backends, backends, cue_context, llm_built
from tmem.errors import ConfigError, InputError
from tmem.integrations.core import CONTEXT_HEADER, context_block
from tmem.integrations.langgraph import TmemStore, _matches, memory_hooks

__all__ = ["backends"]  # the fixture, imported for pytest

NS = ("users", "ann")


class ModelInputs(BaseCallbackHandler):
    """Records what each chat model call was handed (LangChain's callback protocol)."""

    def __init__(self) -> None:
        self.calls: list[list[BaseMessage]] = []

    def on_chat_model_start(self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any) -> None:
        self.calls.append(messages[0])


def react_agent(memory: Any, space: str, replies: list[str], max_tokens: int = 2000) -> CompiledStateGraph[Any]:
    from langgraph.prebuilt import create_react_agent

    pre, post = memory_hooks(memory, space, max_tokens=max_tokens)
    model = GenericFakeChatModel(messages=iter(replies))
    with warnings.catch_warnings():  # create_react_agent moved to langchain.agents (not installed here)
        warnings.simplefilter("ignore", DeprecationWarning)
        agent: CompiledStateGraph[Any] = create_react_agent(model, [], pre_model_hook=pre, post_model_hook=post)
    return agent


def _system(messages: list[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in messages if isinstance(m, SystemMessage))


def test_the_store_maps_namespaces_to_spaces_and_values_to_turns(backends: Backends) -> None:
    store = TmemStore(backends.sync)
    store.put(NS, "trip", {"role": "user", "content": "I am flying to Lisbon for the marathon in October"})
    store.put(NS, "diet", {"topic": "food", "text": "Ann has been vegetarian since 2019"})
    store.put(("users", "bob"), "pet", {"speaker": "bob", "text": "My parrot Kiwi repeats everything"})
    got = store.get(NS, "trip")
    assert isinstance(got, Item) and not isinstance(got, SearchItem)
    assert got.value == {"role": "user", "content": "I am flying to Lisbon for the marathon in October"}
    assert store.get(NS, "diet").value == {"topic": "food", "text": "Ann has been vegetarian since 2019"}  # type: ignore[union-attr]
    assert store.get(NS, "nothing") is None and store.get(("users", "nobody"), "trip") is None

    turns = backends.sync.export("users.ann").turns
    assert [(t.speaker, t.metadata["langgraph_key"]) for t in turns] == [("user", "trip"), ("note", "diet")]

    store.put(NS, "diet", {"topic": "food", "text": "Ann turned vegan in 2024"})  # a new version replaces the old
    store.put(NS, "diet", {"topic": "food", "text": "Ann turned vegan in 2024"})  # unchanged: nothing stored
    assert store.get(NS, "diet").value["text"] == "Ann turned vegan in 2024"  # type: ignore[union-attr]
    assert [t.text for t in backends.sync.export("users.ann").turns if "vegan" in t.text or "vegetarian" in t.text] == [
        '{"topic": "food", "text": "Ann turned vegan in 2024"}'
    ]

    found = store.search(NS, query="flying to Lisbon for the marathon in October")
    assert found and found[0].key == "trip" and found[0].namespace == NS
    assert {h.key for h in store.search(("users",), query="Lisbon marathon")} >= {"trip", "pet"}  # every space under
    assert all(isinstance(h, SearchItem) and h.score is not None for h in found)
    assert [h.score for h in found] == sorted((h.score or 0.0 for h in found), reverse=True)
    assert [h.key for h in store.search(("users",), filter={"topic": "food"})] == ["diet"]
    assert [h.key for h in store.search(("users", "bob"))] == ["pet"]
    assert [h.key for h in store.search(NS, query="vegan food", filter={"topic": {"$ne": "food"}})] == ["trip"]
    with pytest.raises(InputError, match="Unknown filter operator"):
        store.search(NS, filter={"topic": {"$like": "f%"}})

    assert store.list_namespaces(prefix=("users",)) == [("users", "ann"), ("users", "bob")]
    assert store.list_namespaces(suffix=("bob",)) == [("users", "bob")]
    assert store.list_namespaces(max_depth=1) == [("users",)]
    with pytest.raises(NotImplementedError, match="TTL"):
        store.put(NS, "x", {"text": "y"}, ttl=5)
    with pytest.raises(InputError, match="not JSON"):
        store.put(NS, "x", {"when": datetime(2024, 1, 1)})

    store.delete(NS, "trip")
    assert store.get(NS, "trip") is None
    assert "Lisbon" not in " ".join(t.text for t in backends.sync.export("users.ann").turns)


async def test_the_async_store_behaves_as_the_sync_one(backends: Backends) -> None:
    memory = backends.make_async()
    try:
        store = TmemStore(memory)
        await store.aput(NS, "trip", {"role": "user", "content": "I am flying to Lisbon for the marathon"})
        got = await store.aget(NS, "trip")
        assert got is not None and got.value["content"].startswith("I am flying")
        assert (await store.asearch(("users",), query="Lisbon marathon"))[0].key == "trip"
        assert await store.alist_namespaces() == [NS]
        await store.adelete(NS, "trip")
        assert await store.aget(NS, "trip") is None
        with pytest.raises(ConfigError, match="is async"):
            store.get(NS, "trip")
    finally:
        await backends.close_async(memory)


def test_a_react_agent_remembers_and_is_handed_its_memory(backends: Backends) -> None:
    replies = ["Good luck with the move!", "Noted.", "You are moving to Porto."]
    agent, seen = react_agent(backends.sync, "ann", replies), ModelInputs()
    config: Any = {"callbacks": [seen]}
    agent.invoke({"messages": [("user", "Next month I move to Porto for a new job at a bakery")]}, config)
    agent.invoke({"messages": [("user", "Please water the plants tomorrow")]}, config)
    agent.invoke({"messages": [("user", "Which city am I moving to next month?")]}, config)
    turns = backends.sync.export("ann").turns
    assert [(t.speaker, t.text) for t in turns[:2]] == [
        ("user", "Next month I move to Porto for a new job at a bakery"),
        ("assistant", "Good luck with the move!"),
    ]
    assert len(turns) == 6
    assert _system(seen.calls[0]) == ""  # a new user: nothing in memory, nothing added
    last = _system(seen.calls[-1])
    assert last.startswith(CONTEXT_HEADER) and "Porto for a new job at a bakery" in last
    assert "Which city" not in last  # the context is recalled before this exchange is stored


async def test_the_async_agent_uses_the_async_path(backends: Backends) -> None:
    memory = backends.make_async()
    try:
        agent, seen = react_agent(memory, "ann", ["Sure.", "Porto."]), ModelInputs()
        config: Any = {"callbacks": [seen]}
        await agent.ainvoke({"messages": [("user", "I move to Porto next month")]}, config)
        await agent.ainvoke({"messages": [("user", "Where do I move next month?")]}, config)
        assert "I move to Porto next month" in _system(seen.calls[-1])
        assert len((await memory.export("ann")).turns) == 4
    finally:
        await backends.close_async(memory)


@pytest.mark.slow
def test_a_later_turn_is_handed_an_associated_memory_of_the_llm_built_space(tmp_path: Path) -> None:
    """The cue shares no word with the turn it recalls (d26-plus, LoCoMo-Plus plus221)."""
    with llm_built(tmp_path) as memory:
        agent, seen = react_agent(memory, SPACE, ["Congratulations!", "That sounds tiring."], CUE_BUDGET), ModelInputs()
        config: Any = {"callbacks": [seen]}
        agent.invoke({"messages": [("user", "Guess what, I adopted a second dog last weekend!")]}, config)
        told = [t for t in memory.export(SPACE).turns if t.text == "Guess what, I adopted a second dog last weekend!"]
        assert [t.speaker for t in told] == ["user"]
        expected = cue_context(memory)
        agent.invoke({"messages": [("user", CUE)]}, config)
        assert _system(seen.calls[-1]) == context_block(expected)
        found = TmemStore(memory).search((SPACE,), query=CUE, limit=50)  # a built space: facts and scenes too
        kinds = {h.value.get("kind") for h in found}
        assert {"fact", "scene"} <= kinds and all(h.score is not None for h in found)
        facts = [h for h in found if h.value.get("kind") == "fact"]
        assert all(h.key.startswith("item:") and h.value["turn_ids"] for h in facts)
        assert TmemStore(memory).get((SPACE,), facts[0].key) is None  # a fact is no value of the store


@pytest.mark.parametrize(
    ("value", "wanted", "kept"),
    [
        (5, {"$gt": 3}, True),
        (5, {"$gte": 5, "$lt": 6.5}, True),
        ("2024-05", {"$lt": "2024-06"}, True),
        ("7", {"$gt": 3}, False),  # a string against a number: another kind, not a match
        (None, {"$lte": 3}, False),  # the field is missing
        (True, {"$gt": 0}, False),  # a boolean is not a number
        ({"n": 2}, {"n": {"$ne": 3}}, True),
    ],
)
def test_filter_ranges_compare_like_with_like(value: object, wanted: object, kept: bool) -> None:
    assert _matches(value, wanted) is kept


@pytest.mark.parametrize("operand", [None, [1], {"a": 1}, True, float("nan")])
def test_a_range_operand_that_does_not_order_is_refused(operand: object) -> None:
    with pytest.raises(InputError, match=r"\$gt .*compare with a number or a string"):
        _matches(5, {"$gt": operand})
