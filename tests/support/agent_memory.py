"""What the integration tests share (tests/test_integrations_*.py): the memory each adapter is handed, in process or
through ``tmem serve`` (one suite run against both), and the associative case of an LLM-built dev memory."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.live_server import LiveServer
from tests.test_service import NO_AUTO_BUILD, make_keys
from tmem import AsyncMemory, Memory, Settings
from tmem.answer.budget import Context
from tmem.client import AsyncClient, Client
from tmem.service import create_app

LLM_BUILT = Path(__file__).resolve().parents[3] / "shared" / "data" / "llm-built" / "d26-plus.db"
SPACE = "d26-plus"
# A LoCoMo-Plus cue of d26-plus (queries.json, plus221) and the turn it recalls: no word in common.
CUE = "Dealing with all the headaches of managing those places really makes me question if it was ever worth it."
CUE_TURN = (
    "D20:1"  # Caroline: "I'm studying for my real estate license because I plan to invest in rental properties..."
)
CUE_BUDGET = 1000


def cue_context(memory: Memory) -> Context:
    """tmem's context for the cue, checked to hold the turn it recalls (as a raw turn or a fact from it), which shares
    no word with the cue."""
    turn = next(t for t in memory.export(SPACE).turns if t.id == CUE_TURN)
    assert not words(CUE) & words(turn.text)
    context = memory.context(SPACE, CUE, max_tokens=CUE_BUDGET)
    assert CUE_TURN in context.turn_ids
    return context


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def llm_built(tmp_path: Path) -> Memory:
    """A Memory over a copy of the LLM-built d26-plus (its own embedder, MiniLM, as it was built with)."""
    if not LLM_BUILT.exists():
        pytest.skip(f"{LLM_BUILT} is not here")
    home = tmp_path / "llm-built"
    home.mkdir()
    shutil.copy(LLM_BUILT, home / "tmem.db")
    return Memory.open(home, Settings(llm="none", **NO_AUTO_BUILD))  # type: ignore[arg-type]


@dataclass
class Backends:
    """One memory seen through a sync front end and its async twin: in process (Memory, AsyncMemory over the same
    core) or served (Client, AsyncClient of one tenant)."""

    kind: str
    sync: Memory | Client
    url: str = ""
    key: str = ""

    def make_async(self) -> AsyncMemory | AsyncClient:
        if isinstance(self.sync, Memory):
            return AsyncMemory(self.sync.core)  # shares the core: closed with the Memory
        return AsyncClient(self.url, self.key)

    async def close_async(self, memory: AsyncMemory | AsyncClient) -> None:
        if isinstance(memory, AsyncClient):
            await memory.aclose()


def settings(home: Path) -> Settings:
    return Settings(home=home, llm="none", embed_backend="hash", **NO_AUTO_BUILD)  # type: ignore[arg-type]


@pytest.fixture(params=["local", "remote"])
def backends(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backends]:
    if request.param == "local":
        with Memory.open(settings=settings(tmp_path / "local")) as memory:
            yield Backends("local", memory)
        return
    served = settings(tmp_path / "served")
    key = make_keys(served, "acme")["acme"]
    with LiveServer(create_app(served)) as server, Client(server.url, key) as client:
        yield Backends("remote", client, server.url, key)
