"""The Python examples of README.md and docs/agents.md run, offline, against a temporary home directory.

Every ```python block of a document is executed in order in one namespace (as a reader pasting them one after the
other), with ``~`` pointing at a temporary directory and that directory as the working directory. A block that needs
an LLM is marked by the line ``<!-- example: llm -->`` just before it; it runs against the local OpenAI-compatible stub
server (tests/support/openai_stub.py), configured through the same environment variables a user sets, and must reach
it. A block marked ``<!-- example: served -->`` talks to a live ``tmem serve`` app on a free loopback port (the
document's ``http://127.0.0.1:8080`` is that server's address, ``KEY`` a key of one of its tenants). Nothing is
skipped: a block that cannot run fails the test.

The README's first example imports ``locomo10.dev.json``; here that file holds the first two sessions of conv-26 of
the shared dev file (the same format and conversation, built in seconds rather than minutes).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.live_server import LiveServer
from tests.support.openai_stub import OpenAIStub
from tests.test_service import NO_AUTO_BUILD, make_keys
from tmem.service import create_app
from tmem.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo10.dev.json"
LLM_MARK = "<!-- example: llm -->"
SERVED_MARK = "<!-- example: served -->"
DOCUMENTED_URL = "http://127.0.0.1:8080"
DOCUMENTS = ["README.md", "docs/agents.md"]


@dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the opening fence
    code: str
    llm: bool
    served: bool = False


def python_blocks(text: str) -> list[Block]:
    """The ```python blocks of a Markdown text, each with whether the line before its fence marks it as needing an
    LLM. An unclosed block is an error, not an example left out."""
    lines = text.splitlines()
    out: list[Block] = []
    n = 0
    while n < len(lines):
        if lines[n].strip() == "```python":
            start = n
            n += 1
            body: list[str] = []
            while n < len(lines) and lines[n].strip() != "```":
                body.append(lines[n])
                n += 1
            if n == len(lines):
                raise ValueError(f"the python block at line {start + 1} is never closed")
            before = next((lines[k].strip() for k in range(start - 1, -1, -1) if lines[k].strip()), "")
            out.append(Block(start + 1, "\n".join(body) + "\n", before == LLM_MARK, before == SERVED_MARK))
        n += 1
    return out


def test_blocks_are_found_with_their_marks() -> None:
    text = "intro\n\n```python\nx = 1\n```\n\n<!-- example: llm -->\n```python\ny = 2\n```\n```bash\nls\n```\n"
    assert python_blocks(text) == [Block(3, "x = 1\n", False), Block(8, "y = 2\n", True)]
    with pytest.raises(ValueError, match="never closed"):
        python_blocks("```python\nx = 1\n")


def _answer(body: dict[str, Any]) -> str:
    return json.dumps({"answer": "adoption agencies"})


def _locomo_slice(path: Path) -> None:
    sample = json.loads(LOCOMO.read_text(encoding="utf-8"))[0]
    conv = sample["conversation"]
    keep = {k: v for k, v in conv.items() if not k.startswith("session_")}
    for n in (1, 2):
        keep[f"session_{n}"] = conv[f"session_{n}"]
        keep[f"session_{n}_date_time"] = conv[f"session_{n}_date_time"]
    path.write_text(json.dumps([{**sample, "conversation": keep, "qa": []}]), encoding="utf-8")


@pytest.mark.slow
@pytest.mark.parametrize("document", DOCUMENTS)
def test_document_examples_run(document: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not LOCOMO.exists():
        pytest.skip(f"{LOCOMO} is not here")
    blocks = python_blocks((ROOT / document).read_text(encoding="utf-8"))
    assert len(blocks) >= 2, f"{document}: its examples were not found"
    for name in list(os.environ):
        if name.startswith(("TMEM_", "OPENAI_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    _locomo_slice(tmp_path / "locomo10.dev.json")
    namespace: dict[str, Any] = {"__name__": "__doc_example__"}
    with OpenAIStub(reply=_answer) as stub:
        for block in blocks:
            with monkeypatch.context() as env:
                if block.llm:
                    env.setenv("TMEM_LLM", "openai")
                    env.setenv("TMEM_LLM_MODEL", "stub-model")
                    env.setenv("OPENAI_BASE_URL", stub.base_url)
                    env.setenv("OPENAI_API_KEY", "stub-key")
                asked = len(stub.chat_requests)
                if block.served:
                    _run_served(block, document, namespace, tmp_path)
                else:
                    exec(compile(block.code, f"{document}:{block.line}", "exec"), namespace)
                if block.llm:
                    assert len(stub.chat_requests) > asked, f"{document}:{block.line} is marked llm but asked none"
                    prompt = json.dumps(stub.chat_requests[-1].body["messages"])
                    assert "Caroline" in prompt, "the answer request carries the recalled context"


def _run_served(block: Block, document: str, namespace: dict[str, Any], tmp_path: Path) -> None:
    """Run a block against a live server of its own, with ``KEY`` one of its tenants' keys."""
    assert DOCUMENTED_URL in block.code, f"{document}:{block.line} is marked served but names no server"
    served = Settings(home=tmp_path / "served", llm="none", embed_backend="hash", **NO_AUTO_BUILD)  # type: ignore[arg-type]
    namespace["KEY"] = make_keys(served, "acme")["acme"]
    with LiveServer(create_app(served)) as server:
        code = block.code.replace(DOCUMENTED_URL, server.url)
        exec(compile(code, f"{document}:{block.line}", "exec"), namespace)
        client = namespace["mem"]
        try:
            assert client.search("alice", "where does alice live?").space == "alice"
        finally:
            client.close()
