"""Issue 33 Low 10: settings resolve the same way on every command. A database URL (``--database-url`` /
``TMEM_DATABASE_URL``) names the store whatever ``--dir`` says; a typed ``--dir`` that holds its own store while a
URL names another is an error saying which to drop (docs/cli.md, "Which store")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn
from click.testing import CliRunner

import tmem.service
from tmem.cli.main import cli
from tmem.settings import Settings

COMMANDS = {
    "serve --dir": ["serve", "--dir", "{dir}"],
    "--dir serve": ["--dir", "{dir}", "serve"],
    "mcp --dir": ["mcp", "--space", "s", "--dir", "{dir}"],
    "--dir mcp": ["--dir", "{dir}", "mcp", "--space", "s"],
}


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[Settings]:
    """The settings `tmem serve` / `tmem mcp` would serve, captured instead of starting a server."""
    seen: list[Settings] = []

    def create_app(settings: Settings, **_: Any) -> object:
        seen.append(settings)
        return object()

    def run_stdio(_fn: Any, settings: Settings, _space: str) -> None:
        seen.append(settings)

    monkeypatch.setattr(tmem.service, "create_app", create_app)
    monkeypatch.setattr(uvicorn, "run", lambda *_a, **_k: None)
    monkeypatch.setattr(anyio, "run", run_stdio)
    return seen


def _args(name: str, folder: Path) -> list[str]:
    return [a.replace("{dir}", str(folder)) for a in COMMANDS[name]]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_dir_never_drops_the_database_url(name: str, served: list[Settings], tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()  # a SQLite URL in a missing folder is refused (tests/test_cli_startup.py)
    url = f"sqlite:///{tmp_path / 'shared' / 'tmem.db'}"
    result = CliRunner().invoke(cli, _args(name, tmp_path / "d"), env={"TMEM_DATABASE_URL": url})
    assert result.exit_code == 0, result.output
    assert [s.store_url for s in served] == [url]
    assert served[0].home == tmp_path / "d"  # --dir still names the memory directory


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_dir_alone_serves_its_own_store(name: str, served: list[Settings], tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, _args(name, tmp_path / "d"), env={"TMEM_DATABASE_URL": None})
    assert result.exit_code == 0, result.output
    assert [s.store_url for s in served] == [f"sqlite:///{tmp_path / 'd' / 'tmem.db'}"]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_dir_with_its_own_store_and_another_url_is_refused(name: str, served: list[Settings], tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "tmem.db").write_bytes(b"")
    url = f"sqlite:///{tmp_path / 'shared' / 'tmem.db'}"
    result = CliRunner().invoke(cli, _args(name, tmp_path / "d"), env={"TMEM_DATABASE_URL": url})
    assert result.exit_code != 0 and not served
    assert "holds its own store" in str(result.exception) and "TMEM_DATABASE_URL" in str(result.exception)
