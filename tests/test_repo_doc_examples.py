"""The Python examples of README.md and docs/agents.md run, offline, against a temporary home directory.

Every ```python block of a document is executed in order, each in a namespace of its own (a reader may paste any one
block alone, so each imports what it uses), with ``~`` pointing at a temporary directory and the repository root as
the working directory; the blocks share that home directory. A block that needs
an LLM is marked by the line ``<!-- example: llm -->`` just before it; it runs against the local OpenAI-compatible stub
server (tests/support/openai_stub.py), configured through the same environment variables a user sets, and must reach
it. A block marked ``<!-- example: served -->`` talks to a live ``tmem serve`` app on a free loopback port (the
document's ``http://127.0.0.1:8080`` is that server's address, the environment variable ``KEY`` a key of one of its
tenants). Nothing is
skipped: a block that cannot run fails the test.

The README's quick start (its ``bash`` block under "Quick start") runs too, command by command, each in a new process
from the repository root, as a reader of a fresh clone types it: it imports the LoCoMo slice shipped in the package.
The Python blocks run from the repository root as well (the README's first one imports that same file).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
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


@pytest.mark.slow
@pytest.mark.parametrize("document", DOCUMENTS)
def test_document_examples_run(document: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = python_blocks((ROOT / document).read_text(encoding="utf-8"))
    assert len(blocks) >= 2, f"{document}: its examples were not found"
    for name in list(os.environ):
        if name.startswith(("TMEM_", "OPENAI_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(ROOT)  # a fresh clone's root: relative paths name the repository's files
    with OpenAIStub(reply=_answer) as stub:
        for block in blocks:
            namespace: dict[str, Any] = {"__name__": "__doc_example__"}
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
                    assert "Jon" in prompt, "the answer request carries the recalled context"


def _run_served(block: Block, document: str, namespace: dict[str, Any], tmp_path: Path) -> None:
    """Run a block against a live server of its own, with ``KEY`` one of its tenants' keys."""
    assert DOCUMENTED_URL in block.code, f"{document}:{block.line} is marked served but names no server"
    served = Settings(home=tmp_path / "served", llm="none", embed_backend="hash", **NO_AUTO_BUILD)  # type: ignore[arg-type]
    os.environ["KEY"] = make_keys(served, "acme")["acme"]  # `export KEY=...` of the README's bash block
    with LiveServer(create_app(served)) as server:
        code = block.code.replace(DOCUMENTED_URL, server.url)
        exec(compile(code, f"{document}:{block.line}", "exec"), namespace)
        client = namespace["mem"]
        try:
            assert client.search("alice", "where does alice live?").space == "alice"
        finally:
            client.close()
            del os.environ["KEY"]


def _section_block(text: str, heading: str, lang: str) -> list[str]:
    """The lines of the first ```lang block under the Markdown heading ``heading``."""
    section = text[text.index(f"\n{heading}\n") :]
    found = re.search(rf"```{lang}\n(.*?)```", section, re.DOTALL)
    assert found, f"no {lang} block under {heading}"
    return [line for line in found.group(1).splitlines() if line.strip()]


@pytest.mark.slow
def test_readme_quick_start_runs_as_written(tmp_path: Path) -> None:
    """Every command of the README's quick start, verbatim, from the repository root in a fresh memory home: each
    exits 0 (``tmem check`` too), the import names the space the later commands use, the search recalls."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TMEM_", "OPENAI_"))}
    env |= {"TMEM_HOME": str(tmp_path / "home"), "TMEM_LEXICAL_DIR": str(tmp_path / "lexical")}
    outputs: list[str] = []
    for line in _section_block((ROOT / "README.md").read_text(encoding="utf-8"), "## Quick start", "bash"):
        argv = shlex.split(line, comments=True)
        assert argv[0] == "tmem", line
        for arg in argv[1:]:  # a fresh clone holds the repository only: every file the quick start names is in it
            if arg.endswith((".json", ".jsonl")):
                assert (ROOT / arg).resolve().is_relative_to(ROOT) and (ROOT / arg).is_file(), line
        done = subprocess.run(
            [sys.executable, "-c", "from tmem.cli.main import main; main()", *argv[1:]],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert done.returncode == 0, f"{line}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        outputs.append(done.stdout)
    assert "conv-30" in outputs[1]  # `tmem spaces` lists the imported space
    assert "scene" in outputs[3].lower()  # the search printed what it recalled


def test_readme_documentation_list_names_every_document_once() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = re.findall(r"docs/[\w/.-]+\.md", text[text.index("\n## Documentation\n") :])
    assert len(listed) == len(set(listed)), sorted(n for n in listed if listed.count(n) > 1)
    assert all((ROOT / name).is_file() for name in listed), [n for n in listed if not (ROOT / n).is_file()]
    docs = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert docs <= set(listed), sorted(docs - set(listed))
