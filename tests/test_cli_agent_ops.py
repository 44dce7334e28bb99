"""The agent operations through the CLI (messages add, item get/edit/history/delete, forget) and through AsyncMemory,
on the same core as Memory."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tmem import AsyncMemory, InputError, Memory, Settings
from tmem.cli.main import cli
from tmem.scope import Scope

MESSAGES = [
    {
        "id": "a1",
        "speaker": "alice",
        "text": "I adopted a three-legged greyhound called Comet",
        "time": "2025-02-01T09:00",
    },
    {"id": "a2", "speaker": "bot", "text": "Comet sounds like a wonderful companion for your morning runs"},
    {"id": "a3", "speaker": "alice", "text": "We run along the river in Lyon every Sunday morning"},
]


def _invoke(home: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--dir", str(home), "--llm", "none", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_cli_agent_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMEM_EMBED_BACKEND", "hash")
    home = tmp_path / "mem"
    lines = tmp_path / "messages.jsonl"
    lines.write_text("\n".join(json.dumps(m) for m in MESSAGES))
    added = json.loads(_invoke(home, "messages", "add", "alice", str(lines), "--json"))
    assert added["added"] == ["a1", "a2", "a3"]
    assert json.loads(_invoke(home, "messages", "add", "alice", str(lines), "--json"))["skipped"] == ["a1", "a2", "a3"]
    _invoke(home, "build", "alice", "--no-progress")
    with Memory.open(home, Settings(llm="none")) as mem:
        item = next(i for i in mem.store.items(Scope.local("alice")) if "greyhound" in i.text)
    assert json.loads(_invoke(home, "item", "get", "alice", item.id))["text"] == item.text
    edited = json.loads(_invoke(home, "item", "edit", "alice", item.id, "Alice's greyhound Comet is nine years old."))
    assert edited["text"].startswith("Alice's greyhound")
    history = json.loads(_invoke(home, "item", "history", "alice", item.id))
    assert [v["change"] for v in history["versions"]] == ["extracted", "edited"]
    forgot = json.loads(_invoke(home, "forget", "alice", "--turn", "a3"))
    assert forgot["turns_forgotten"] == ["a3"]
    assert json.loads(_invoke(home, "item", "delete", "alice", item.id))["items_forgotten"] == [item.id]
    missing = CliRunner().invoke(cli, ["--dir", str(home), "item", "get", "alice", item.id])
    assert missing.exit_code != 0 and "no item" in str(missing.exception)


def test_async_memory_is_the_same_core(tmp_path: Path) -> None:
    from tmem.embed import HashEmbedder

    async def go() -> None:
        async with AsyncMemory.open(tmp_path / "mem", Settings(llm="none"), embedder=HashEmbedder()) as mem:
            report = await mem.add_messages("alice", MESSAGES)
            assert report.added == ["a1", "a2", "a3"]
            assert (await mem.staleness("alice")).stale_turns == 3
            built = await mem.build("alice")
            assert built.descriptive_only
            found = await mem.search("alice", "greyhound Comet")
            assert found.items and not found.stale
            item = found.items[0].item
            assert (await mem.get_item("alice", item.id)) == item
            await mem.update_item("alice", item.id, "Comet is a greyhound.")
            assert (await mem.history("alice", item.id)).versions[-1].text == "Comet is a greyhound."
            await mem.forget("alice", item_ids=[item.id])
            with pytest.raises(InputError, match=r"messages\[0\]: speaker"):
                await mem.add_messages("alice", [{"text": "no speaker"}])
            await mem.delete_space("alice")
            assert await mem.spaces() == []

    asyncio.run(go())
    with Memory.open(tmp_path / "mem", Settings(llm="none"), embedder=HashEmbedder()) as mem:
        assert mem.spaces() == []
