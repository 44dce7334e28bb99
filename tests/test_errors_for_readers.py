"""Issue 34, finding 5: errors that fit who reads them. An agent calling MCP tools gets advice it can follow with
tools (never a `tmem ...` command it cannot run); arguments that fail a tool's schema get one short line per field,
not pydantic's dump with its documentation link; a request body that is not JSON is placed by line and column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from mcp import Client

from tests.test_service import NO_AUTO_BUILD, make_keys
from tmem.embed import HashEmbedder
from tmem.mcp_server.server import build_server
from tmem.memory import AsyncMemory
from tmem.scope import Scope
from tmem.service import create_app
from tmem.settings import Settings

CLI_ADVICE = ("`tmem", "tmem import", "tmem show", "tmem search", "tmem build")


def _text(result: Any) -> str:
    assert result.is_error, result
    return " ".join(str(c.model_dump().get("text", "")) for c in result.content)


async def test_mcp_errors_advise_tools_and_name_the_fields_to_fix(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, llm="none", embed_backend="hash")
    async with AsyncMemory.open(settings=settings, embedder=HashEmbedder()) as memory:
        server = build_server(memory, lambda _ctx, name: Scope.local(name), space="me")
        async with Client(server) as client:
            missing = _text(await client.call_tool("recall", {"query": "where do I live?"}))
            assert "No space named 'me'" in missing and "remember tool" in missing
            stored = await client.call_tool(
                "remember", {"messages": [{"speaker": "me", "text": "I live in Lyon."}], "build": "now"}
            )
            assert not stored.is_error
            no_item = _text(await client.call_tool("get_memory", {"item_id": "i_nope"}))
            assert "has no item 'i_nope'" in no_item and "list_memories" in no_item
            no_llm = _text(await client.call_tool("ask", {"question": "Where do I live?"}))
            assert "recall tool" in no_llm
            for text in (missing, no_item, no_llm):
                assert not any(advice in text for advice in CLI_ADVICE), text
            bad = _text(await client.call_tool("recall", {"query": "x", "max_tokens": "lots"}))
            assert bad.startswith("Fix the arguments of recall: max_tokens: ") and bad.count("\n") == 0, bad
            assert "pydantic" not in bad and "validation error" not in bad and "http" not in bad
            bad_list = _text(await client.call_tool("remember", {"messages": "hello"}))
            assert bad_list.startswith("Fix the arguments of remember: messages: "), bad_list


def test_a_malformed_json_body_is_placed_by_line_and_column(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "mem", llm="none", embed_backend="hash", **NO_AUTO_BUILD)  # type: ignore[arg-type]
    key = make_keys(settings, "acme")["acme"]
    body = '{"messages": [\n  {"speaker": "a", "text": "hi"}\n  {"speaker": "b"}\n]}'  # a comma missing on line 3
    with TestClient(create_app(settings)) as client:
        answer = client.post(
            "/v1/spaces/alice/messages",
            content=body,
            headers={"Authorization": f"Bearer {key}", "content-type": "application/json"},
        )
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    assert "line 3, column 3" in problem["detail"], problem
    assert "JSON decode error" not in problem["detail"] and not problem["detail"].startswith(
        "Fix these fields of the request: 4"
    )
    assert problem["errors"][0]["field"] == "body" and "line 3, column 3" in problem["errors"][0]["message"]
