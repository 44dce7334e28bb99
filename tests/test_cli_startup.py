"""Issue 34, finding 4: start-up failures. ``tmem serve`` (and ``tmem mcp --transport http``) with a store it cannot
open says so in one line and exits 1 before announcing anything; a SQLite URL in a directory that does not exist is an
error naming that path, and nothing is created; messages name the store that is used."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tmem.errors import ConfigError
from tmem.memory import Memory
from tmem.settings import Settings

SRC = str(Path(__file__).resolve().parents[1] / "src")
TMEM = [sys.executable, "-c", "from tmem.cli.main import main; main()"]
ENV = {**os.environ, "PYTHONPATH": SRC, "TMEM_EMBED_BACKEND": "hash", "TMEM_LLM": "none"}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # nothing listens there now


def _tmem(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**ENV, "TMEM_HOME": str(home)}
    return subprocess.run([*TMEM, *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", [["serve", "--port", "0"], ["mcp", "--space", "me", "--transport", "http"]])
def test_an_unreachable_database_fails_serving_in_one_line(tmp_path: Path, command: list[str]) -> None:
    url = f"postgresql://tmem:secret@127.0.0.1:{_closed_port()}/tmem"
    done = _tmem("--database-url", url, *command, home=tmp_path / "home")
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Serving" not in done.stderr and "MCP" not in done.stderr and "Traceback" not in done.stderr
    assert "127.0.0.1" in lines[0] and "secret" not in lines[0]


def test_a_sqlite_url_in_a_missing_directory_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent" / "dir"
    done = _tmem("--database-url", f"sqlite:///{missing / 'x.db'}", "spaces", home=tmp_path / "home")
    assert done.returncode == 1, done.stdout + done.stderr
    assert str(missing) in done.stderr and "does not exist" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "nonexistent").exists() and not (tmp_path / "home").exists()
    with pytest.raises(ConfigError, match="does not exist"):
        Memory.open(settings=Settings(database_url=f"sqlite:///{missing / 'x.db'}"))
    assert not (tmp_path / "nonexistent").exists()


def test_an_empty_store_is_named_where_it_is(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    url = f"sqlite:///{tmp_path / 'db' / 'x.db'}"
    done = _tmem("--database-url", url, "spaces", home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    assert url in done.stdout and str(tmp_path / "home") not in done.stdout
    done = _tmem("spaces", home=tmp_path / "home")  # the default: the memory directory, created
    assert str(tmp_path / "home") in done.stdout and (tmp_path / "home" / "tmem.db").is_file()
