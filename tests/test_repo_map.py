"""The map for newcomers holds (issue 32 item 5): every repository path a doc or a docstring names exists, every bench
script is in bench/README.md's index and none edits ``sys.path``, and docs/contributing.md maps every package."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A path into the repository: under src/tmem (also written tmem/...), tests, bench or docs.
PATH = re.compile(r"(?<![\w./-])((?:src/tmem|tmem|tests|bench|docs)/[\w./-]*[\w/])")
PLACEHOLDER = re.compile(r"[A-Z]{3,}")  # bench/NAME.py, tests/test_FILE.py, rNNNN_what.py: a pattern, not a path
OUTPUT = re.compile(r"(--out|--record|--dump|>)\s*$")  # a command's output file: written when the command runs


def _texts() -> Iterator[tuple[Path, str]]:
    """Every doc, and every docstring of the library, the tests and the bench scripts."""
    for doc in (ROOT / "README.md", *ROOT.glob("docs/**/*.md"), *ROOT.glob("bench/**/*.md")):
        yield doc, doc.read_text(encoding="utf-8")
    for source in (*ROOT.glob("src/tmem/**/*.py"), *ROOT.glob("tests/**/*.py"), *ROOT.glob("bench/**/*.py")):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                docstring = ast.get_docstring(node, clean=False)
                if docstring:
                    yield source, docstring


def _exists(name: str) -> bool:
    """The path as written, under src/ for tmem/..., as a module (``.py`` left off) or a module's attribute."""
    tried = [name, f"src/{name}"] if name.startswith("tmem/") else [name]
    for path in list(tried):
        tried.append(f"{path}.py")
        module, dot, _ = path.rpartition(".")
        if dot and "/" not in path[len(module) :]:
            tried.append(f"{module}.py")
    return any((ROOT / p).exists() for p in tried)


def named_paths() -> dict[str, set[str]]:
    """Each path the texts name, with where it is named."""
    found: dict[str, set[str]] = {}
    for where, text in _texts():
        for match in PATH.finditer(text):
            name = match.group(1).rstrip(".")
            following = text[match.end() : match.end() + 1]
            if following in ("*", "<", "{") or PLACEHOLDER.search(name) or OUTPUT.search(text[: match.start()]):
                continue
            found.setdefault(name, set()).add(str(where.relative_to(ROOT)))
    return found


def test_every_path_a_doc_or_docstring_names_exists() -> None:
    named = named_paths()
    assert len(named) > 100  # the docs name many paths: the scan reads them
    missing = {name: sorted(where) for name, where in named.items() if not _exists(name)}
    assert not missing, missing


def test_the_scan_catches_a_missing_path() -> None:
    assert _exists("tests/test_repo_map.py") and _exists("tmem/retrieve/recipe.py") and _exists("tmem/__init__")
    assert _exists("bench/scale_cold_load._words") and _exists("docs/results/")
    assert not _exists("tests/test_public_api.py") and not _exists("tmem/retrieve/nothing.py")
    text = "pinned by ``tests/test_nowhere.py``; run python bench/x.py --out bench/results/new.md; bench/NAME.py"
    assert next(m.group(1) for m in PATH.finditer(text)) == "tests/test_nowhere.py"
    assert OUTPUT.search(text[: text.index("bench/results/new.md")]) is not None


def test_every_bench_script_is_indexed_and_none_edits_sys_path() -> None:
    index = (ROOT / "bench" / "README.md").read_text(encoding="utf-8")
    for script in sorted(ROOT.glob("bench/*.py")):
        if script.name == "__init__.py":
            continue
        assert f"`{script.name}`" in index, f"{script.name} is missing from bench/README.md's index"
        source = script.read_text(encoding="utf-8")
        assert "sys.path.insert" not in source and "sys.path.append" not in source, script.name


def test_the_contributing_map_names_every_package() -> None:
    guide = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    packages = sorted(p.parent.name for p in (ROOT / "src" / "tmem").glob("*/__init__.py"))
    assert packages and all(f"`{name}/`" in guide for name in packages), packages
    for loop in ('-m "not slow and not postgres"', "python -m pytest -q"):
        assert loop in guide and loop in (ROOT / "README.md").read_text(encoding="utf-8"), loop
