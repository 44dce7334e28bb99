"""The scale benches copy a synthetic space from SQLite into PostgreSQL with COPY (bench/store_copy.py) instead of
writing it through the PostgreSQL Store API: the copy must hold exactly the rows the Store API writes."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tmem.scope import Scope
from tmem.store import open_store
from tmem.store.postgres import PostgresStore

BENCH = Path(__file__).resolve().parents[1] / "bench"
pytestmark = pytest.mark.postgres


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fill(store: Any, bench: ModuleType) -> None:
    bench.write_space(store, 200)
    rng = np.random.default_rng(1)
    store.put_embeddings(
        Scope.local(bench.SPACE), "m", {f"h{i}": rng.standard_normal(8).astype(np.float32) for i in range(30)}
    )


def _table(store: PostgresStore, table: str) -> list[tuple[Any, ...]]:
    rows = store._rows(f"SELECT * FROM {table}")
    return sorted(rows, key=lambda r: repr([v.tolist() if isinstance(v, np.ndarray) else v for v in r]))


def test_copy_holds_the_rows_the_store_api_writes(pg_server: Any, tmp_path: Path) -> None:
    bench, copier = _load("scale_cold_load"), _load("store_copy")
    lite_path = str(tmp_path / "tmem.db")
    lite = open_store(f"sqlite:///{lite_path}")
    _fill(lite, bench)
    lite.close()
    api, copied = open_store(pg_server.fresh_database()), open_store(pg_server.fresh_database())
    assert isinstance(api, PostgresStore) and isinstance(copied, PostgresStore)
    try:
        _fill(api, bench)
        counts = copier.copy_space(lite_path, copied, bench.SPACE)
        assert counts["turns"] == 200 and counts["trigger_views"] == 200 and counts["embeddings"] == 30
        for table in copier.TABLES:
            want, got = _table(api, table), _table(copied, table)
            assert len(want) == len(got) == counts[table], table
            for a, b in zip(want, got, strict=True):
                assert [v.tolist() if isinstance(v, np.ndarray) else v for v in a] == [
                    v.tolist() if isinstance(v, np.ndarray) else v for v in b
                ], table
        assert copied.scenes(Scope.local(bench.SPACE)) == api.scenes(Scope.local(bench.SPACE))
        assert copied.items(Scope.local(bench.SPACE)) == api.items(Scope.local(bench.SPACE))
        assert copied.triggers(Scope.local(bench.SPACE)) == api.triggers(Scope.local(bench.SPACE))
    finally:
        api.close()
        copied.close()
