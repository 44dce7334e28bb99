"""No import cycle between tmem's subpackages (issue 24 part 7).

The graph is read from the source with ``ast``, not by importing: every ``import`` and ``from ... import`` anywhere
in a file counts - at module level, inside functions (the lazy imports that keep commands fast) and under
``if TYPE_CHECKING:``. A lazy import still makes its package depend on the other at run time, and a type-only one
at check time, so a cycle through either is a layering fault, only a deferred one.

A node is a subpackage (``tmem.index``, ``tmem.construct``, ...), a top-level module (``tmem.core``,
``tmem.models``, ...) or the root package ``tmem`` itself when a module imports it by name (``import tmem``,
``from tmem import Memory``: that takes names from ``tmem/__init__``, which imports most of the library). Python runs
``tmem/__init__`` before any ``tmem.x``, as it runs every parent package; that is not an edge, or every module would
be in a cycle with the root. Imports inside one subpackage are not edges. docs/design-decisions.md, "No import
cycles between subpackages", gives the layers.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "tmem"


def _module_name(path: Path) -> tuple[str, str]:
    """(module name, the package relative imports resolve against)."""
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        name = ".".join(parts[:-1])
        return name, name
    name = ".".join(parts)
    return name, name.rsplit(".", 1)[0]


def _exists(dotted: str) -> bool:
    p = ROOT.parent.joinpath(*dotted.split("."))
    return p.is_dir() or p.with_suffix(".py").is_file()


def _node(dotted: str) -> str:
    """The graph node of a module that exists: ``tmem`` or ``tmem.<first part>``."""
    parts = dotted.split(".")
    return "tmem" if len(parts) == 1 else f"tmem.{parts[1]}"


def _imported(tree: ast.AST, package: str) -> list[tuple[int, str]]:
    """(line, module) for every tmem module an import statement in ``tree`` runs, at any depth."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "tmem"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            if module.split(".")[0] != "tmem":
                continue
            subs = [f"{module}.{a.name}" for a in node.names]
            found += [(node.lineno, s) for s in subs if _exists(s)]  # ``from tmem.x import y`` where y is a module
            if not all(_exists(s) for s in subs) or module != "tmem":
                found.append((node.lineno, module))  # the names come from ``module`` itself, which runs first
    return found


def import_graph() -> dict[tuple[str, str], list[str]]:
    """Edges between nodes, each with the ``file:line`` statements that make it."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(ROOT.rglob("*.py")):
        name, package = _module_name(path)
        source = "tmem" if name == "tmem" else _node(name)
        for line, module in _imported(ast.parse(path.read_text(encoding="utf-8")), package):
            if not _exists(module):
                raise AssertionError(f"{path}:{line} imports {module}, which is no module of src/tmem")
            target = _node(module)
            if target != source:
                edges[(source, target)].append(f"{path.relative_to(ROOT.parent)}:{line} imports {module}")
    return edges


def cycles(edges: dict[tuple[str, str], list[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
        graph.setdefault(b, set())  # every node gets an entry
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _explain(component: list[str], edges: dict[tuple[str, str], list[str]]) -> str:
    lines = [" <-> ".join(component)]
    for (a, b), where in sorted(edges.items()):
        if a in component and b in component:
            lines.append(f"  {a} -> {b}: " + "; ".join(where[:3]) + (f" (+{len(where) - 3})" if len(where) > 3 else ""))
    return "\n".join(lines)


def test_no_import_cycle_between_subpackages() -> None:
    edges = import_graph()
    assert len(edges) > 50, "the graph is implausibly small: the parser lost imports"
    found = cycles(edges)
    assert not found, "import cycles between tmem subpackages; move what both sides need below them:\n" + "\n".join(
        _explain(c, edges) for c in found
    )


def test_the_checker_sees_lazy_type_only_and_relative_imports(tmp_path: Path) -> None:
    """The parser on a small tree: each kind of import statement is an edge, so none can hide a cycle."""
    source = """
from typing import TYPE_CHECKING
import tmem.index.space
from tmem.construct import pipeline
from . import sibling
if TYPE_CHECKING:
    from tmem.store.base import Store
def f():
    from tmem.embed.texts import turn_embedding_text
    import tmem
"""
    found = {m for _, m in _imported(ast.parse(source), "tmem.retrieve")}
    assert {"tmem.index.space", "tmem.construct.pipeline", "tmem.store.base", "tmem.embed.texts", "tmem"} <= found
    assert "tmem.retrieve.sibling" in found or "tmem.retrieve" in found


def test_a_cycle_is_reported_with_the_statements_that_make_it() -> None:
    edges = {
        ("tmem.index", "tmem.construct"): ["index/space.py:23 imports tmem.construct.extractive.builder"],
        ("tmem.construct", "tmem.index"): ["construct/pipeline.py:37 imports tmem.index.factory"],
        ("tmem.construct", "tmem.models"): ["construct/x.py:1 imports tmem.models"],
    }
    found = cycles(edges)
    assert found == [["tmem.construct", "tmem.index"]]
    assert "index/space.py:23" in _explain(found[0], edges)


FRAMEWORKS = ("langgraph", "langchain_core", "agents", "pydantic_ai")


def test_the_integrations_are_the_top_layer_and_keep_their_frameworks_to_themselves() -> None:
    """Nothing of tmem imports ``tmem.integrations``; a framework is imported by its adapter module only (so ``import
    tmem`` and the adapters' shared core load none)."""
    edges = import_graph()
    assert not [where for (a, b), where in edges.items() if b == "tmem.integrations"]
    adapters = {"langgraph.py", "openai_agents.py", "pydantic_ai.py"}
    for path in sorted(ROOT.rglob("*.py")):
        if path.parent.name == "integrations" and path.name in adapters:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            found = [n for n in names if n.split(".")[0] in FRAMEWORKS]
            assert not found, f"{path.relative_to(ROOT.parent)}:{node.lineno} imports {found}"  # type: ignore[attr-defined]
