"""docs/integrations.md as a reader uses it (issue 31): its Python examples run, offline, one after the other in one
namespace (as tests/test_repo_doc_examples.py runs the README's), and each MCP client snippet starts ``tmem mcp`` exactly
as it says - the command and arguments of a stdio snippet, the URL and the bearer header of an HTTP snippet against
the server command the document gives - and lists the tools."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.test_mcp_agents import TOOLS  # every tool of the MCP server
from tests.test_repo_doc_examples import python_blocks
from tests.test_service import make_keys
from tmem import Memory
from tmem.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "integrations.md"
SRC = str(ROOT / "src")
DOC_DIR = "/home/me/.local/share/tmem"
MAIN = ["-c", "from tmem.cli.main import main; main()"]  # the `tmem` console script, from this checkout


def snippets() -> dict[tuple[str, str], str]:
    """The fenced block after each ``<!-- mcp: CLIENT TRANSPORT -->`` mark."""
    text = DOC.read_text(encoding="utf-8")
    found = re.findall(r"<!-- mcp: (\S+) (stdio|http) -->\n```\w+\n(.*?)\n```", text, flags=re.S)
    return {(client, transport): body for client, transport, body in found}


def test_every_client_has_a_stdio_and_an_http_snippet() -> None:
    assert set(snippets()) == {(c, t) for c in ("claude-desktop", "claude-code", "cursor") for t in ("stdio", "http")}


def _stdio_command(client: str, body: str) -> tuple[str, list[str], dict[str, str]]:
    if client == "claude-code":
        words = shlex.split(body)
        assert words[:3] == ["claude", "mcp", "add"] and "--" in words, body
        command = words[words.index("--") + 1 :]
        return command[0], command[1:], {}
    server = json.loads(body)["mcpServers"]["tmem"]
    return server["command"], server["args"], server.get("env", {})


def _http_target(client: str, body: str) -> tuple[str, dict[str, str]]:
    """(url, headers) a client snippet connects with."""
    if client == "claude-code":
        words = shlex.split(body)
        assert words[:5] == ["claude", "mcp", "add", "--transport", "http"], body
        name, value = words[words.index("--header") + 1].split(": ", 1)
        return words[6], {name: value}
    server = json.loads(body)["mcpServers"]["tmem"]
    if client == "claude-desktop":  # the mcp-remote bridge: URL, then --header "Name: value"
        args = server["args"]
        name, value = args[args.index("--header") + 1].split(": ", 1)
        return args[args.index("mcp-remote") + 1], {name: value}
    return server["url"], server["headers"]


@pytest.mark.parametrize("client", ["claude-desktop", "claude-code", "cursor"])
async def test_a_stdio_snippet_starts_tmem_mcp(client: str, tmp_path: Path) -> None:
    command, args, env = _stdio_command(client, snippets()[(client, "stdio")])
    assert command == "tmem" and DOC_DIR in args
    given = [str(tmp_path) if a == DOC_DIR else a for a in args]
    params = StdioServerParameters(
        command=sys.executable,
        args=[*MAIN, *given],
        env={"PYTHONPATH": SRC, "TMEM_EMBED_BACKEND": "hash", **env},
    )
    async with Client(params) as session:
        assert {t.name for t in (await session.list_tools()).tools} == TOOLS


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_the_http_snippets_reach_the_documented_server(tmp_path: Path) -> None:
    """The server command of the document (its directory and port replaced), a key made as `tmem keys create me`
    makes one, then each client's URL and header."""
    text = DOC.read_text(encoding="utf-8")
    line = next(ln for ln in text.splitlines() if ln.startswith("tmem --dir /srv/tmem mcp "))
    args = shlex.split(line.split("#")[0])[1:]
    port = _free_port()
    args = [str(tmp_path) if a == "/srv/tmem" else str(port) if a == "8765" else a for a in args]
    key = make_keys(Settings(home=tmp_path, llm="none", embed_backend="hash"), "me")["me"]
    env = {**os.environ, "PYTHONPATH": SRC, "TMEM_EMBED_BACKEND": "hash"}
    server = subprocess.Popen([sys.executable, *MAIN, *args], env=env)
    try:
        import time

        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.post(f"http://127.0.0.1:{port}/mcp", json={}, timeout=5)
                break
            except httpx.TransportError:
                assert server.poll() is None and time.monotonic() < deadline, "tmem mcp did not start"
                time.sleep(0.2)
        for client in ("claude-desktop", "claude-code", "cursor"):
            url, headers = _http_target(client, snippets()[(client, "http")])
            assert url == "http://127.0.0.1:8765/mcp" and headers == {"Authorization": "Bearer KEY"}, client
            url = url.replace("8765", str(port))
            sent = {name: value.replace("KEY", key) for name, value in headers.items()}
            async with (
                httpx2.AsyncClient(headers=sent, timeout=60) as http,
                Client(streamable_http_client(url, http_client=http)) as session,
            ):
                assert {t.name for t in (await session.list_tools()).tools} == TOOLS, client
        assert httpx.post(f"http://127.0.0.1:{port}/mcp", json={}, timeout=5).status_code == 401  # no key, no tools
    finally:
        server.terminate()
        server.wait(30)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")  # langchain.agents is not a dependency
def test_the_python_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    blocks = python_blocks(DOC.read_text(encoding="utf-8"))
    assert len(blocks) == 4, "one example per framework, the store's and the hooks' for LangGraph"
    for name in list(os.environ):
        if name.startswith(("TMEM_", "OPENAI_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__doc_example__"}
    try:
        for block in blocks:
            exec(compile(block.code, f"docs/integrations.md:{block.line}", "exec"), namespace)
    finally:
        namespace["mem"].close()
    printed = capsys.readouterr().out
    assert "{'topic': 'food', 'text': 'Ann has been vegetarian since 2019'}" in printed
    assert "You are moving to Porto." in printed and "Your cat is Miso." in printed
    assert "I play the cello in a quartet" in printed  # the second pydantic-ai run was handed the first one
    with Memory.open(tmp_path / ".tmem-agents") as mem:
        assert [t.text for t in mem.export("ann").turns][:2] == [
            "I am moving to Porto in May",
            "Porto is lovely in May!",
        ]
        assert "Ann's cat is called Miso" in [t.text for t in mem.export("ann-sdk").turns]
