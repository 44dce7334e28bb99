"""CLI and library rough edges (issue 19 part 5): `tmem ui --dir`, errors not chained to unrelated ones, and an
unreachable database that fails at once with one line naming its host and port, never its password."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.test_service import dev_messages
from tmem.embed import HashEmbedder
from tmem.errors import ConfigError, StoreError
from tmem.memory import Memory
from tmem.settings import Settings
from tmem.store import open_store

SRC = str(Path(__file__).resolve().parents[1] / "src")
TMEM = [sys.executable, "-c", "from tmem.cli.main import main; main()"]
ENV = {**os.environ, "PYTHONPATH": SRC, "TMEM_EMBED_BACKEND": "hash", "TMEM_LLM": "none"}


def test_ui_takes_dir_after_the_command(tmp_path: Path) -> None:
    with Memory.open(tmp_path / "mem", Settings(llm="none", embed_backend="hash"), embedder=HashEmbedder()) as mem:
        mem.add_messages("notes", [{"speaker": "a", "text": "A note behind ui --dir", "time": "2024-01-01T10:00:00"}])
    args = [*TMEM, "--dir", str(tmp_path / "elsewhere"), "ui", "--dir", str(tmp_path / "mem"), "--port", "0"]
    proc = subprocess.Popen(args, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+/ui/", line)
        assert found, line + (proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
        deadline = time.monotonic() + 60
        while True:
            try:
                page = httpx.get(found.group(0) + "s/notes/timeline", timeout=5)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.2)
        assert page.status_code == 200 and "A note behind ui --dir" in page.text
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_ask_without_an_llm_is_one_error_not_chained_to_another(tmp_path: Path) -> None:
    with Memory.open(tmp_path, Settings(llm="none", embed_backend="hash"), embedder=HashEmbedder()) as mem:
        mem.add_messages("c", dev_messages(1)[0][:4])
        with pytest.raises(ConfigError, match="TMEM_LLM=openai") as info:
            mem.ask("c", "What did Caroline research?")
    assert info.value.__context__ is None and info.value.__cause__ is None


def _refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # closed again: nothing listens there


def test_an_unreachable_database_is_one_line_with_host_and_port(tmp_path: Path) -> None:
    port = _refused_port()
    url = f"postgresql://bob:s3cret-pw@127.0.0.1:{port}/memories"
    done = subprocess.run(
        [*TMEM, "--database-url", url, "spaces"], env=ENV, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr  # no pool retrying and logging each attempt
    assert lines[0].startswith("Error: Cannot connect to PostgreSQL at 127.0.0.1:") and f":{port} " in lines[0]
    assert "s3cret" not in done.stderr + done.stdout


def test_a_silent_database_times_out_at_connect(tmp_path: Path) -> None:
    """A server that accepts the connection and never answers: libpq's connect timeout ends it (not the pool's 30 s)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = silent.getsockname()[1]
        with pytest.raises(StoreError, match="timeout expired") as info:
            open_store(f"postgresql://bob:s3cret-pw@127.0.0.1:{port}/memories")
    assert f"127.0.0.1:{port}" in str(info.value) and "s3cret" not in str(info.value)
    assert info.value.__suppress_context__ and info.value.__cause__ is None


def test_a_malformed_database_url_never_shows_its_password() -> None:
    with pytest.raises(StoreError, match="cannot be parsed") as info:
        open_store("postgresql://bob:s3cret-pw@[::1/memories")
    assert "s3cret" not in str(info.value)
