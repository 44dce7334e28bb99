"""No private SQLAlchemy name anywhere in src/ (issue 32, item 1): tmem uses only SQLAlchemy's documented API, so
that the versions pyproject.toml allows (and CI tests) behave as documented. A private name is an attribute, keyword
argument or import whose name starts with one underscore and that SQLAlchemy's own source defines, where tmem does
not define it itself."""

from __future__ import annotations

import ast
from pathlib import Path

import sqlalchemy

SRC = Path(__file__).resolve().parents[1] / "src"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _trees(root: Path) -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text(encoding="utf-8"))) for p in sorted(root.rglob("*.py"))]


def _defined(trees: list[tuple[Path, ast.Module]]) -> set[str]:
    """Private names a tree defines: functions, classes, assigned names and attributes, parameters."""
    names: set[str] = set()
    for _, tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
    return {n for n in names if _private(n)}


def _used(trees: list[tuple[Path, ast.Module]]) -> dict[str, list[str]]:
    """Private attributes, keyword arguments and imported names a tree uses -> where."""
    used: dict[str, list[str]] = {}
    for path, tree in trees:
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Attribute):
                names = [node.attr]
            elif isinstance(node, ast.keyword) and node.arg:
                names = [node.arg]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy"):
                names = [a.name for a in node.names] + (node.module or "").split(".")
            elif isinstance(node, ast.Import):
                names = [part for a in node.names if a.name.startswith("sqlalchemy") for part in a.name.split(".")]
            for name in names:
                if _private(name):
                    used.setdefault(name, []).append(f"{path.relative_to(SRC)}:{getattr(node, 'lineno', 0)}")
    return used


def test_src_uses_no_private_sqlalchemy_name() -> None:
    ours = _trees(SRC)
    theirs = _defined(_trees(Path(sqlalchemy.__file__).parent))
    assert {"_compile_w_cache", "_generate_cache_key", "_check"} <= theirs  # the check sees SQLAlchemy's own names
    foreign = {name: where for name, where in _used(ours).items() if name in theirs and name not in _defined(ours)}
    assert foreign == {}


def test_the_known_private_calls_are_gone() -> None:
    text = "\n".join(p.read_text(encoding="utf-8") for p in SRC.rglob("*.py"))
    for name in ("_compile_w_cache", "_check=", "construct_expanded_state", "threading.local"):
        assert name not in text
