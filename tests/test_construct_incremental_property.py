"""Property: building a conversation in any number of increments ends with the memory of one build of everything
(scenes, topics, topic links, items, triggers), under the deterministic stand-in model of tests/support."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.stage_replies import SMALL_WINDOWS, dev_space, memory_snapshot, scripted_reply
from tmem.construct.pipeline import build_space
from tmem.embed.hashing import HashEmbedder
from tmem.ingest.importer import import_spaces
from tmem.llm.scripted import scripted_llm
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore

SPACE = "conv-30"
SESSIONS = 8
OPTIONS = SMALL_WINDOWS  # a small window cuts buffers mid-session: scene starts and the provisional tail, often
_FULL: dict[str, Any] = {}


async def _build(store: SQLiteStore) -> None:
    await build_space(
        store, Scope.local(SPACE), llm=scripted_llm(store, fn=scripted_reply), embedder=HashEmbedder(), options=OPTIONS
    )


async def _full() -> Any:
    if "snapshot" not in _FULL:
        store = SQLiteStore.open(":memory:")
        import_spaces(store, [dev_space(SPACE, slice(0, SESSIONS))], source="dev")
        await _build(store)
        _FULL["snapshot"] = memory_snapshot(store, SPACE, with_seq=False)
    return _FULL["snapshot"]


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.sets(st.integers(min_value=1, max_value=SESSIONS - 1), min_size=1, max_size=4).map(sorted))
async def test_any_increments_equal_one_build(cuts: list[int]) -> None:
    store = SQLiteStore.open(":memory:")
    for start, stop in zip([0, *cuts], [*cuts, SESSIONS], strict=True):
        import_spaces(store, [dev_space(SPACE, slice(start, stop))], source="dev")
        await _build(store)
    assert memory_snapshot(store, SPACE, with_seq=False) == await _full()
