"""bench/scale_pg1m.py builds a pgvector index once in a directory and measures searches on it later: on a tiny
corpus the measured table must show every configuration, with the recall an HNSW scan gets on a few hundred vectors."""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
pytestmark = pytest.mark.postgres


def _load() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("bench_scale_pg1m", BENCH / "scale_pg1m.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_build_then_measure_on_the_built_index(tmp_path: Path) -> None:
    bench = _load()
    # the server runs as another system user when the tests run as root: a directory it can traverse
    root = Path(tempfile.mkdtemp(prefix="tmem-pg1m-")) / "db"
    root.parent.chmod(0o755)
    try:
        _build_and_measure(bench, root, tmp_path / "scale.md")
    finally:
        shutil.rmtree(root.parent)


def _build_and_measure(bench: ModuleType, root: Path, out: Path) -> None:
    bench.build(argparse.Namespace(dir=root, views=600, maintenance_work_mem="64MB"))
    assert (root / "build.json").exists()
    args = argparse.Namespace(
        dir=root, queries=8, k=10, ef_search="100,10", iterative="relaxed_order,off", rounds=1,
        shared_buffers="160MB", os_warm=True, warm_rounds=1, explain=3, out=out,
    )  # fmt: skip
    bench.measure(args)
    rows = [line.split("|")[1:-1] for line in out.read_text().splitlines() if line.startswith("| 1")]
    got = {(r[0].strip(), r[1].strip()): (float(r[4]), r[8]) for r in rows}  # -> (recall@k, views scan)
    assert set(got) == {("100", "relaxed_order"), ("100", "off"), ("10", "relaxed_order"), ("10", "off")}
    assert all(recall >= 0.9 for recall, _ in got.values())
    # at ef_search 10 the planner takes the joint view graph (at 100 it scans 600 views exactly instead)
    assert "views h384_views_bridge_views_entity: hit" in got[("10", "relaxed_order")][1]
    assert "shared_buffers 160MB" in out.read_text()
