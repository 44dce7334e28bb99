"""The MCP server through the SDK's own client: `tmem mcp` as a stdio subprocess, and streamable HTTP on a real
uvicorn server with bearer keys (each key's tenant gets its own space of the served name)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.support.live_server import LiveServer
from tests.test_service import dev_messages, make_keys
from tmem.mcp_server.server import http_app
from tmem.memory import AsyncMemory
from tmem.settings import Settings

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data: dict[str, Any] = result.structured_content
    return data


async def test_stdio_tools_remember_and_ask(tmp_path: Path) -> None:
    home = tmp_path / "mem"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from tmem.cli.main import main; main()", "--dir", str(home), "mcp", "--space", "caroline"],
        env={"PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), "TMEM_EMBED_BACKEND": "hash"},
    )
    messages = dev_messages(1)[0]
    async with Client(params) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"remember", "recall", "ask", "forget"} <= tools
        first = _structured(await client.call_tool("remember", {"messages": messages, "build": "now"}))
        assert first == {
            "space": "caroline",
            "added": len(messages),
            "skipped": 0,
            "turn_ids": [m["id"] for m in messages],
            "built": True,
            "build": "built",
            "stale_turns": 0,
        }
        found = _structured(await client.call_tool("recall", {"query": "LGBTQ support group", "max_tokens": 120}))
        assert 0 < found["tokens"] <= 120 and found["hits"] and found["unbuilt_turns"] == 0
        assert "support group" in found["text"]
        laid = {"query": "LGBTQ support group", "max_tokens": 120, "layout": {"excerpt_neighbours": False}}
        single = _structured(await client.call_tool("recall", laid))
        assert single["text"] != found["text"] and 0 < single["tokens"] <= 120  # scenes enter as one turn each
        refused = await client.call_tool("recall", {**laid, "layout": {"context_k0": -1}})
        assert refused.is_error
        for order in ("rank", "date"):  # the context layout's fields (docs/context.md)
            laid = {"query": "LGBTQ support group", "max_tokens": 120, "layout": {"order": order}}
            assert 0 < _structured(await client.call_tool("recall", laid))["tokens"] <= 120
        sideways = await client.call_tool("recall", {"query": "support", "layout": {"order": "sideways"}})
        assert sideways.is_error and "order" in json.dumps([c.model_dump() for c in sideways.content])
        fresh = {
            "speaker": "Caroline",
            "text": "I adopted a grey cat called Pixel",
            "time": messages[-1]["time"],
            "id": "p1",
        }
        stored = _structured(await client.call_tool("remember", {"messages": [fresh], "build": "no"}))
        assert stored["added"] == 1 and stored["stale_turns"] == 1 and not stored["built"]
        unbuilt = _structured(await client.call_tool("recall", {"query": "grey cat Pixel", "max_tokens": 200}))
        assert unbuilt["text"].count(fresh["text"]) == 1 and unbuilt["unbuilt_turns"] == 1  # recallable at once
        rebuilt = _structured(await client.call_tool("remember", {"messages": [fresh], "build": "now"}))  # builds only
        assert rebuilt["skipped"] == 1 and rebuilt["built"] and rebuilt["stale_turns"] == 0
        built = _structured(await client.call_tool("recall", {"query": "grey cat Pixel", "max_tokens": 200}))
        assert built["text"].count(fresh["text"]) == 1 and built["unbuilt_turns"] == 0  # once, after the build
        again = _structured(await client.call_tool("remember", {"messages": messages, "build": "no"}))
        assert again["added"] == 0 and again["skipped"] == len(messages)
        turn = messages[3]["id"]
        gone = _structured(await client.call_tool("forget", {"turn_ids": [turn]}))
        assert gone["turns_forgotten"] == [turn]
        assert gone["erased"] is True and gone["status"] == "forgotten"  # nothing held the erasure up
        refused = await client.call_tool("ask", {"question": "Who went to the support group?"})
        assert refused.is_error and "LLM" in json.dumps([c.model_dump() for c in refused.content])
        bad = await client.call_tool("remember", {"messages": [{"speaker": "A", "text": ""}]})
        assert bad.is_error
        assert (await client.call_tool("forget", {})).is_error
    async with AsyncMemory.open(home, Settings(llm="none", embed_backend="hash")) as memory:
        (space,) = await memory.spaces()
        assert space.name == "caroline" and space.turns == len(messages) and space.build_state == "built"
        assert messages[3]["text"] not in (await memory.export("caroline")).model_dump_json()


async def test_streamable_http_scoped_by_key(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "mem", llm="none", embed_backend="hash")
    keys = make_keys(settings, "acme", "beta")
    msg = {"speaker": "Ann", "text": "I adopted a cat named Miso.", "time": "2024-05-02T10:00:00"}
    with LiveServer(http_app(settings, "notes")) as server:
        url = f"{server.url}/mcp"
        with httpx.Client() as plain:
            refused = plain.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            assert refused.status_code == 401
        for tenant in ("acme", "beta"):
            headers = {"Authorization": f"Bearer {keys[tenant]}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=60) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                tools = {t.name for t in (await client.list_tools()).tools}
                assert {"remember", "ask", "forget"} <= tools
                text = {**msg, "text": f"{tenant}: {msg['text']}"}
                done = _structured(await client.call_tool("remember", {"messages": [text], "build": "now"}))
                assert done["added"] == 1 and done["space"] == "notes" and done["built"]
    async with AsyncMemory.open(settings=settings) as memory:
        assert sorted(s.name for s in await memory.spaces()) == ["acme/notes", "beta/notes"]
        assert [t.text for t in (await memory.export("beta/notes")).turns] == [f"beta: {msg['text']}"]


async def test_tmem_mcp_http_from_the_command_line(tmp_path: Path) -> None:
    import socket
    import subprocess
    import time

    home = tmp_path / "mem"
    keys = make_keys(Settings(home=home, llm="none", embed_backend="hash"), "acme")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": SRC, "TMEM_EMBED_BACKEND": "hash"}
    args = ["--dir", str(home), "mcp", "--space", "notes", "--transport", "http", "--port", str(port)]
    server = subprocess.Popen([sys.executable, "-c", "from tmem.cli.main import main; main()", *args], env=env)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with httpx.Client() as plain:
                    assert plain.post(url, json={}).status_code == 401
                break
            except httpx.TransportError:
                assert server.poll() is None and time.monotonic() < deadline, "tmem mcp did not start"
                time.sleep(0.2)
        headers = {"Authorization": f"Bearer {keys['acme']}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            msg = {"speaker": "Ann", "text": "I adopted a cat named Miso.", "time": "2024-05-02T10:00:00"}
            done = _structured(await client.call_tool("remember", {"messages": [msg], "build": "no"}))
            assert done == {
                "space": "notes",
                "added": 1,
                "skipped": 0,
                "turn_ids": done["turn_ids"],
                "built": False,
                "build": "off",
                "stale_turns": 1,
            }
            assert len(done["turn_ids"]) == 1
    finally:
        server.terminate()
        server.wait(30)


async def test_ask_tool_answers_through_an_openai_compatible_endpoint(tmp_path: Path) -> None:
    from tests.support.openai_stub import OpenAIStub

    home = tmp_path / "mem"
    keys = make_keys(Settings(home=home, llm="none", embed_backend="hash"), "acme")
    async with AsyncMemory.open(home, Settings(llm="none", embed_backend="hash")) as memory:
        await memory.add_messages("acme/notes", dev_messages(1)[0])
        await memory.build("acme/notes")
    with OpenAIStub(reply=lambda request: '{"answer": "an LGBTQ support group"}') as stub:
        settings = Settings(
            home=home, llm="openai", llm_model="stub", llm_base_url=stub.base_url, llm_api_key="t", embed_backend="hash"
        )
        with LiveServer(http_app(settings, "notes")) as server:
            headers = {"Authorization": f"Bearer {keys['acme']}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=60) as http,
                Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client,
            ):
                answer = _structured(await client.call_tool("ask", {"question": "Where did Caroline go?"}))
        assert answer["answer"] == "an LGBTQ support group" and answer["turn_ids"]
        assert "Where did Caroline go?" in json.dumps(stub.chat_requests[-1].body)
