"""The LoCoMo retrieval-only evaluation gives the same figures and records on PostgreSQL (every dense lookup served by
pgvector) as on SQLite (the in-process index): same slice of dev data, same extractive memory, same hash embedder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_eval_runs import _lines, _opts, locomo_slice  # noqa: F401 - the fixture is used by name
from tmem.embed.hashing import HashEmbedder
from tmem.eval.runs import Models, eval_locomo
from tmem.settings import Settings
from tmem.store import open_store


@pytest.mark.postgres
async def test_retrieval_only_figures_are_the_same_on_both_backends(
    locomo_slice: Path,  # noqa: F811 - the imported fixture
    tmp_path: Path,
    pg_url: str,
) -> None:
    reports, records = [], []
    for name, url in (("sqlite", f"sqlite:///{tmp_path / 'lite' / 'tmem.db'}"), ("postgres", pg_url)):
        store = open_store(url)
        out = tmp_path / name
        opts = _opts(locomo_slice, out, retrieval_only=True, limit=8)
        reports.append(await eval_locomo(store, Settings(), opts, Models(build=None, answer=None, judge=None),
                                         HashEmbedder()))  # fmt: skip
        records.append(_lines(out / "locomo" / "records.jsonl"))
        store.close()
    assert reports[0].rows == reports[1].rows and reports[0].rows[0].n == 8
    assert json.dumps(records[0], sort_keys=True) == json.dumps(records[1], sort_keys=True)
