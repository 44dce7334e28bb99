"""Optional extras (issue 24 part 6): a bare ``pip install tmem`` is the library, SQLite, MiniLM and the CLI; every part
that needs an extra says which one when it is missing. A missing package is simulated by ``sys.modules[name] = None``
(``import`` then fails and ``importlib.util.find_spec`` answers None, as for a package that is not installed); .ci/run
also checks a real bare virtual environment."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from tmem.cli.main import cli
from tmem.errors import ConfigError
from tmem.util.extras import EXTRAS, require_extra

REPO = Path(__file__).resolve().parents[1]
# the distributions each extra installs -> the module tmem imports from each
DISTRIBUTIONS = {
    "fastapi": "fastapi",
    "uvicorn": "uvicorn",
    "jinja2": "jinja2",
    "python-multipart": "python_multipart",
    "mcp": "mcp",
    "psycopg": "psycopg",
    "psycopg-pool": "psycopg_pool",
    "matplotlib": "matplotlib",
    "faiss-cpu": "faiss",
    "langgraph": "langgraph",
    "langchain-core": "langchain_core",
    "openai-agents": "agents",
    "pydantic-ai-slim": "pydantic_ai",
}


def _name(requirement: str) -> str:
    found = re.match(r"[A-Za-z0-9_.-]+", requirement)
    assert found, requirement
    return found.group(0).lower()


def _block(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)


def test_pyproject_extras_are_the_ones_the_code_checks() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = {_name(r) for r in project["dependencies"]}
    extras = project["optional-dependencies"]
    assert not core & set(DISTRIBUTIONS), "an optional package is back among the hard dependencies"
    for extra, modules in EXTRAS.items():
        assert {DISTRIBUTIONS[_name(r)] for r in extras[extra]} == set(modules), extra
    pulled = [r for r in extras["dev"] if r.startswith("tmem[")]
    assert len(pulled) == 1 and set(pulled[0][5:-1].split(",")) == set(EXTRAS), "dev must pull every extra (README)"


@pytest.mark.parametrize(
    ("args", "extra", "blocked"),
    [
        (["serve"], "server", "fastapi"),
        (["ui"], "viewer", "jinja2"),
        (["mcp", "--space", "notes"], "mcp", "mcp"),
        (["eval", "locomo", "--data", "pyproject.toml", "--retrieval-only"], "eval", "matplotlib"),
    ],
)
def test_a_command_names_the_extra_it_needs(
    args: list[str], extra: str, blocked: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _block(monkeypatch, blocked)
    monkeypatch.chdir(REPO)
    done = CliRunner().invoke(cli, ["--dir", str(tmp_path), *args])
    assert done.exit_code == 1 and isinstance(done.exception, ConfigError)
    command = " ".join(args[:2] if args[0] == "eval" else args[:1])
    assert str(done.exception).startswith(
        f"tmem {command.split()[0]} needs the {extra} extra: pip install 'tmem[{extra}]'"
    )
    assert f"({blocked} not installed)" in str(done.exception)
    assert done.exception.__context__ is None, "the check runs before any import: nothing to chain"


def test_library_parts_name_their_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tmem.index.ivf import faiss_module
    from tmem.store import open_store

    _block(monkeypatch, "psycopg", "faiss")
    with pytest.raises(ConfigError, match=re.escape("pip install 'tmem[postgres]'")) as info:
        open_store("postgresql://bob:s3cret-pw@127.0.0.1:5432/memories")
    assert "s3cret" not in str(info.value)
    with pytest.raises(ConfigError, match=r"needs the scale extra: .*TMEM_APPROX_ABOVE above"):
        faiss_module()


def test_require_extra_passes_when_installed() -> None:
    for extra in EXTRAS:
        require_extra(extra, "this test")  # the dev install has every extra


_BARE = """
import sys
for m in {blocked!r}:
    sys.modules[m] = None
import tmem, tmem.cli.main, tmem.client
from tmem.errors import ConfigError
import tmem.integrations.core
for package, extra in (
    ("tmem.service", "server"),
    ("tmem.viewer", "viewer"),
    ("tmem.mcp_server", "mcp"),
    ("tmem.integrations.langgraph", "langgraph"),
    ("tmem.integrations.openai_agents", "openai-agents"),
    ("tmem.integrations.pydantic_ai", "pydantic-ai"),
):
    try:
        __import__(package)
    except ConfigError as exc:
        assert f"pip install 'tmem[{{extra}}]'" in str(exc), exc
    else:
        raise AssertionError(package + " imported without its extra")
print("ok")
"""


def test_the_library_and_cli_import_without_any_extra() -> None:
    blocked = sorted({m for modules in EXTRAS.values() for m in modules} | {"starlette"})
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run(
        [sys.executable, "-c", _BARE.format(blocked=blocked)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_tmem_imports_no_agent_framework() -> None:
    """With every framework installed, ``import tmem`` (and the integrations' shared core) loads none of them."""
    frameworks = ("langgraph", "langchain_core", "agents", "pydantic_ai")
    code = (
        "import sys, tmem, tmem.client, tmem.cli.main, tmem.integrations.core\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {frameworks!r}))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", (done.stdout, done.stderr[-2000:])
