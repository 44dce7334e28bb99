"""Issue 19, part 1: the MCP server for agents, through the official SDK client over stdio and streamable HTTP.

Every tool runs on two spaces of one tenant (the server's default space and one named per call); over HTTP a second
tenant's key then runs every tool too and sees none of the first tenant's spaces, texts or ids - in results and in
every error text - and changes nothing of them."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

import tmem
from tests.support.live_server import LiveServer
from tests.test_service import make_keys
from tmem.mcp_server.server import configure_logging, http_app
from tmem.memory import AsyncMemory
from tmem.settings import Settings

SRC = str(Path(__file__).resolve().parents[1] / "src")
TOOLS = {
    "remember",
    "recall",
    "ask",
    "list_memories",
    "get_memory",
    "update_memory",
    "memory_history",
    "forget",
    "delete_space",
    "status",
}
CLI = ["-c", "from tmem.cli.main import main; main()"]
FIRST, SECOND = "orchard-log", "kiln-notes"  # the default space, and one named in each call


def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error, _text(result)
    data: dict[str, Any] = result.structured_content
    return data


def _text(result: Any) -> str:
    return json.dumps([c.model_dump(mode="json") for c in result.content]) + json.dumps(result.structured_content)


def orchard(n: int = 8) -> list[dict[str, Any]]:
    """Messages of FIRST: apple work (project alpha) and pear work (project beta), alternating."""
    return [
        {
            "speaker": "Ann" if i % 2 == 0 else "Bob",
            "text": f"apple tree {i} pruned in the north orchard"
            if i % 2 == 0
            else f"pear tree {i} pruned in the orchard, pears pruned",
            "time": f"2024-04-{1 + i:02d}T09:00:00",
            "id": f"o{i}",
            "metadata": {"project": "alpha" if i % 2 == 0 else "beta", "row": i},
        }
        for i in range(n)
    ]


def kiln(n: int = 6) -> list[dict[str, Any]]:
    return [
        {"speaker": "Cy", "text": f"kiln firing {i} reached cone six glaze", "time": f"2024-05-{1 + i:02d}T09:00:00"}
        for i in range(n)
    ]


async def wait_built(client: Client, space: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        status = _data(await client.call_tool("status", {"space": space}))
        if status["jobs"] and status["jobs"][-1]["state"] != "running":
            return status
        assert time.monotonic() < deadline, status
        await asyncio.sleep(0.2)


async def exercise(client: Client) -> dict[str, Any]:
    """Every tool on FIRST (the default) and SECOND (named); returns what the other tenant must never see."""
    listed = {t.name: t for t in (await client.list_tools()).tools}
    assert set(listed) == TOOLS
    for name, tool in listed.items():
        destructive = bool(tool.annotations and tool.annotations.destructive_hint)
        assert destructive == (name in ("forget", "delete_space")), name
        assert "space" in tool.input_schema["properties"], name
    assert client.server_info.version == tmem.__version__

    too_long = {**orchard(1)[0], "metadata": {"note": "x" * 257}}
    refused_metadata = await client.call_tool("remember", {"messages": [too_long]})
    assert refused_metadata.is_error and "at most 256" in _text(refused_metadata)
    stored = _data(await client.call_tool("remember", {"messages": orchard(), "build": "now"}))
    assert stored["space"] == FIRST and stored["built"] and stored["turn_ids"] == [f"o{i}" for i in range(8)]
    auto = _data(await client.call_tool("remember", {"messages": kiln(), "space": SECOND}))  # policy: >= 4 turns
    assert auto["space"] == SECOND and auto["build"] == "started" and not auto["built"]
    status = await wait_built(client, SECOND)
    assert status["jobs"][-1]["state"] == "succeeded" and status["built"] and status["stale_turns"] == 0

    recalled = _data(await client.call_tool("recall", {"query": "trees pruned in the orchard", "max_tokens": 300}))
    assert recalled["space"] == FIRST and recalled["hits"]
    for hit in recalled["hits"]:
        assert set(hit) >= {"id", "kind", "text", "date", "speaker", "turn_ids", "routes"} and hit["routes"]
        assert hit["text"] and hit["turn_ids"] and hit["date"]
    alpha = {"metadata": {"project": "alpha"}}
    only = _data(await client.call_tool("recall", {"query": "trees pruned in the orchard", "where": alpha}))
    assert only["turn_ids"] and all(int(t[1:]) % 2 == 0 for t in only["turn_ids"]) and "pear" not in only["text"]
    assert all(h["metadata"]["project"] == "alpha" for h in only["hits"])
    refused = await client.call_tool("recall", {"query": "x", "where": {"metadata": {"project": []}}})
    assert refused.is_error and "between 1 and" in _text(refused)
    other = _data(await client.call_tool("recall", {"query": "kiln glaze", "space": SECOND, "max_tokens": 200}))
    assert other["space"] == SECOND and "kiln" in other["text"] and "orchard" not in other["text"]

    page = _data(await client.call_tool("list_memories", {"metadata": {"project": "beta"}, "limit": 2}))
    assert page["total"] >= 3 and len(page["memories"]) == 2 and page["next_offset"] == 2
    assert all(m["metadata"]["project"] == "beta" and m["item_kind"] == "atomic" for m in page["memories"])
    kiln_page = _data(await client.call_tool("list_memories", {"space": SECOND, "text": "kiln", "limit": 50}))
    assert kiln_page["memories"] and kiln_page["space"] == SECOND
    memory_id = page["memories"][0]["id"]
    got = _data(await client.call_tool("get_memory", {"item_id": memory_id}))
    assert got["id"] == memory_id and "pear" in got["text"]
    edited = _data(await client.call_tool("update_memory", {"item_id": memory_id, "text": "Bob pruned pear tree 1."}))
    assert edited["text"] == "Bob pruned pear tree 1."
    history = _data(await client.call_tool("memory_history", {"item_id": memory_id}))
    assert [v["change"] for v in history["versions"]] == ["extracted", "edited"]
    kiln_id = kiln_page["memories"][0]["id"]
    assert _data(await client.call_tool("get_memory", {"item_id": kiln_id, "space": SECOND}))["id"] == kiln_id
    missing = await client.call_tool("get_memory", {"item_id": kiln_id})  # not an item of FIRST
    assert missing.is_error
    assert _data(await client.call_tool("memory_history", {"item_id": kiln_id, "space": SECOND}))["versions"]

    kiln_turn = kiln_page["memories"][0]["turn_ids"][0]
    gone = _data(await client.call_tool("forget", {"turn_ids": [kiln_turn], "space": SECOND}))
    assert gone["turns_forgotten"] == [kiln_turn] and gone["space"] == SECOND
    first = _data(await client.call_tool("status", {}))
    assert first["space"] == FIRST and first["turns"] == 8 and first["built"] and not first["building"]
    wrong = await client.call_tool("delete_space", {"space": SECOND, "confirm": FIRST})
    assert wrong.is_error and f"confirm='{SECOND}'" in _text(wrong)
    deleted = _data(await client.call_tool("delete_space", {"space": SECOND, "confirm": SECOND}))
    assert deleted == {"space": SECOND, "deleted": True, "erased": True}
    assert (await client.call_tool("status", {"space": SECOND})).is_error
    assert (await client.call_tool("ask", {"question": "Who pruned the pear trees?"})).is_error  # no LLM here
    again = _data(await client.call_tool("remember", {"messages": kiln(2), "space": SECOND, "build": "no"}))
    assert again["build"] == "off" and again["stale_turns"] == 2  # the space again, unbuilt: kept for the checks
    return {"ids": [memory_id, kiln_id, "o1", "o2"], "texts": ["pruned", "pear tree", "cone six", "glaze"]}


def _stdio_params(home: Path, log: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=[*CLI, "--dir", str(home), "mcp", "--space", FIRST, "--log-file", str(log)],
        env={
            "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "TMEM_EMBED_BACKEND": "hash",
            "TMEM_BUILD_AFTER_TURNS": "4",
            "TMEM_BUILD_IDLE_SECONDS": "3600",
            "TMEM_LEXICAL_DIR": str(home.parent / "lexical"),
        },
    )


async def test_every_tool_over_stdio_on_two_spaces(tmp_path: Path) -> None:
    log = tmp_path / "mcp.log"
    async with Client(_stdio_params(tmp_path / "mem", log)) as client:
        await exercise(client)
    assert "Building index from tokens" not in log.read_text()  # bm25s' DEBUG lines are silenced
    async with AsyncMemory.open(tmp_path / "mem", Settings(llm="none", embed_backend="hash")) as memory:
        assert sorted(s.name for s in await memory.spaces()) == [SECOND, FIRST]


def test_logging_stays_at_warning_on_stderr() -> None:
    root, chatty = logging.getLogger(), logging.getLogger("bm25s")
    before = (root.level, list(root.handlers), chatty.level)
    try:
        configure_logging(None)
        assert root.level == logging.WARNING and chatty.level == logging.WARNING
        (handler,) = root.handlers  # bm25s sets its own logger to DEBUG on import: the handler's level drops those
        assert handler.level == logging.WARNING and getattr(handler, "stream", None) is sys.stderr
    finally:
        root.setLevel(before[0])
        root.handlers[:] = before[1]
        chatty.setLevel(before[2])


async def _as_other(client: Client, seen: dict[str, Any], acme_names: list[str]) -> None:
    """Tenant beta runs every tool, on its default space, on a space of its own and on acme's space names: none of
    acme's texts or ids shows (nor "acme"), and asking for acme's space names answers exactly as for a name that never
    existed (the name beta typed aside)."""

    def clean(result: Any) -> Any:
        text = _text(result)
        for word in [*seen["texts"], *seen["ids"], "acme"]:
            assert word not in text, f"beta was shown {word!r}: {text[:300]}"
        return result

    msg = {"speaker": "Dee", "text": "violin lesson on tuesday", "time": "2024-06-01T10:00:00", "id": "v1"}
    assert _data(clean(await client.call_tool("remember", {"messages": [msg], "space": "strings", "build": "now"})))
    never: list[str] | None = None
    for space in ["never-was", None, *acme_names]:  # None: the server's default space, which beta does not have
        arg = {} if space is None else {"space": space}
        calls = [
            ("recall", {"query": "orchard pear kiln"}),
            ("list_memories", {}),
            ("get_memory", {"item_id": seen["ids"][0]}),
            ("update_memory", {"item_id": seen["ids"][0], "text": "overwritten"}),
            ("memory_history", {"item_id": seen["ids"][1]}),
            ("forget", {"turn_ids": seen["ids"][2:]}),
            ("status", {}),
            ("ask", {"question": "what about the orchard?"}),
            ("delete_space", {"confirm": space or FIRST}),
        ]
        answers = []
        for tool, args in calls:
            result = clean(await client.call_tool(tool, {**args, **arg}))
            assert result.is_error, (tool, space, _text(result))  # beta has no such space
            answers.append(_text(result).replace(space or FIRST, "NAME"))
        if never is None:
            never = answers
        else:  # acme's names answer exactly as a name that never existed: no oracle of another tenant's spaces
            assert answers == never, (space, answers, never)
    listed = _data(clean(await client.call_tool("list_memories", {"space": "strings"})))
    assert listed["space"] == "strings"


async def test_every_tool_over_http_and_another_tenant_sees_none(tmp_path: Path) -> None:
    settings = Settings(
        home=tmp_path / "mem", llm="none", embed_backend="hash", build_after_turns=4, build_idle_seconds=3600
    )
    keys = make_keys(settings, "acme", "beta")
    with LiveServer(http_app(settings, FIRST)) as server:
        url = f"{server.url}/mcp"
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {keys['acme']}"}, timeout=120) as h1,
            Client(streamable_http_client(url, http_client=h1)) as acme,
        ):
            seen = await exercise(acme)
        async with AsyncMemory.open(settings=settings) as memory:
            before = (await memory.export(f"acme/{FIRST}")).model_dump_json()
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {keys['beta']}"}, timeout=120) as h2,
            Client(streamable_http_client(url, http_client=h2)) as beta,
        ):
            await _as_other(beta, seen, [FIRST, SECOND])
    async with AsyncMemory.open(settings=settings) as memory:
        names = sorted(s.name for s in await memory.spaces())
        assert names == [f"acme/{SECOND}", f"acme/{FIRST}", "beta/strings"]
        assert (await memory.export(f"acme/{FIRST}")).model_dump_json() == before  # beta changed nothing
