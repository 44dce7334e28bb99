"""Property (issue 20, High 1): two tenants on one MCP server over streamable HTTP, driven through the official SDK
client with random interleavings of every tool, error paths included. No response or error text a tenant gets names
the other tenant, its spaces or its text, nor any tenant-prefixed store key; no tool call of one tenant changes the
other's memory."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.live_server import LiveServer
from tests.test_service import make_keys
from tmem.mcp_server.server import http_app
from tmem.memory import AsyncMemory
from tmem.settings import Settings

TENANTS = ("acme", "beta")
SERVED = "notes"
OPS = (
    "remember",
    "remember_retried",
    "remember_empty_text",
    "remember_no_messages",
    "recall",
    "recall_blank",
    "recall_bad_budget",
    "ask",
    "forget_nothing",
    "forget_unknown",
    "forget_foreign",
)


def _other(tenant: str) -> str:
    return next(t for t in TENANTS if t != tenant)


def _text_of(result: Any) -> str:
    return json.dumps([c.model_dump(mode="json") for c in result.content]) + json.dumps(result.structured_content)


def _check(tenant: str, result: Any) -> None:
    seen = _text_of(result)
    other = _other(tenant)
    assert other not in seen, f"{tenant} was shown {other}'s name, space or text: {seen[:400]}"
    assert f"{tenant}/" not in seen, f"{tenant} was shown a store key: {seen[:400]}"


async def _call(client: Client, tenant: str, tool: str, args: dict[str, Any]) -> Any:
    result = await client.call_tool(tool, args)
    _check(tenant, result)
    return result


async def _step(
    client: Client, tenant: str, op: str, n: int, written: dict[str, list[str]], turn_ids: dict[str, list[str]]
) -> None:
    if op == "remember":
        text = f"marker{tenant} note {n} about hiking in Norway"
        msg = {"speaker": tenant.title(), "text": text, "time": f"2024-05-{1 + n % 28:02d}T10:00:00", "id": f"m{n}"}
        result = await _call(client, tenant, "remember", {"messages": [msg], "build": "now" if n % 3 else "no"})
        assert not result.is_error, _text_of(result)
        if result.structured_content["added"]:
            written[tenant].append(text)
            turn_ids[tenant].append(f"m{n}")
    elif op == "remember_retried":  # no message id: the call is named by request_id, and its retry stores nothing
        text = f"marker{tenant} plain note {n}"
        args = {"messages": [{"speaker": tenant.title(), "text": text}], "build": "no", "request_id": f"r{n}"}
        first = await _call(client, tenant, "remember", args)
        again = await _call(client, tenant, "remember", args)
        assert not first.is_error and not again.is_error, _text_of(first) + _text_of(again)
        assert first.structured_content["added"] == 1 and again.structured_content["added"] == 0
        written[tenant].append(text)
        turn_ids[tenant].append(f"r{n}:0")
    elif op == "remember_empty_text":
        assert (await _call(client, tenant, "remember", {"messages": [{"speaker": "A", "text": ""}]})).is_error
    elif op == "remember_no_messages":
        assert (await _call(client, tenant, "remember", {"messages": []})).is_error
    elif op == "recall":
        result = await _call(client, tenant, "recall", {"query": "hiking in Norway", "max_tokens": 200})
        if not result.is_error:  # a missing or unbuilt space is an error (checked above for what it names)
            assert result.structured_content["tokens"] <= 200
    elif op == "recall_blank":
        assert (await _call(client, tenant, "recall", {"query": "  "})).is_error
    elif op == "recall_bad_budget":
        assert (await _call(client, tenant, "recall", {"query": "x", "max_tokens": 10**9})).is_error
    elif op == "ask":  # no LLM on this server: an error for a missing space and for an existing one alike
        assert (await _call(client, tenant, "ask", {"question": "Where is the hike?"})).is_error
    elif op == "forget_nothing":
        assert (await _call(client, tenant, "forget", {})).is_error
    elif op == "forget_unknown":
        await _call(client, tenant, "forget", {"turn_ids": [f"nope{n}"], "item_ids": [f"gone{n}"]})
    elif op == "forget_foreign":  # the other tenant's turn ids: never reach the other tenant's space
        ids = turn_ids[_other(tenant)]
        if ids:
            result = await _call(client, tenant, "forget", {"turn_ids": ids[:2]})
            if not result.is_error:
                assert not set(result.structured_content["turns_forgotten"]) - set(turn_ids[tenant])


def test_mcp_two_tenants_never_see_each_other(tmp_path: Path) -> None:
    cfg = Settings(home=tmp_path / "mem", llm="none", embed_backend="hash")
    keys = make_keys(cfg, *TENANTS)

    async def seed() -> None:  # each tenant has a private space the other could be told about
        async with AsyncMemory.open(settings=cfg) as memory:
            for tenant in TENANTS:
                msg = {"speaker": "X", "text": f"marker{tenant} secret", "time": "2024-01-01T10:00:00"}
                await memory.add_messages(f"{tenant}/private-{tenant}", [msg])

    asyncio.run(seed())
    written: dict[str, list[str]] = {t: [] for t in TENANTS}
    turn_ids: dict[str, list[str]] = {t: [] for t in TENANTS}
    counter = iter(range(10**6))

    with LiveServer(http_app(cfg, SERVED)) as server:
        url = f"{server.url}/mcp"

        async def play(plan: list[tuple[str, str]]) -> None:
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {keys['acme']}"}, timeout=120) as h1,
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {keys['beta']}"}, timeout=120) as h2,
                Client(streamable_http_client(url, http_client=h1)) as acme,
                Client(streamable_http_client(url, http_client=h2)) as beta,
            ):
                clients = {"acme": acme, "beta": beta}
                for tenant, op in plan:
                    await _step(clients[tenant], tenant, op, next(counter), written, turn_ids)

        # Every tool on a space the key does not have yet (the path that listed every tenant's spaces).
        asyncio.run(play([(t, op) for t in TENANTS for op in OPS if op != "remember"]))

        @given(st.lists(st.tuples(st.sampled_from(TENANTS), st.sampled_from(OPS)), min_size=3, max_size=12))
        @settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def run(plan: list[tuple[str, str]]) -> None:
            asyncio.run(play(plan))

        run()

    async def final() -> None:  # each tenant's served space holds exactly what that tenant remembered
        async with AsyncMemory.open(settings=cfg) as memory:
            names = {s.name for s in await memory.spaces()}
            for tenant in TENANTS:
                key = f"{tenant}/{SERVED}"
                if key in names:
                    assert sorted(t.text for t in (await memory.export(key)).turns) == sorted(written[tenant])
                else:
                    assert not written[tenant]

    asyncio.run(final())
