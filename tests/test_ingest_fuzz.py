"""Fuzzing the importers (bounded, runs in CI): every hostile file ends in a documented InputError naming where, or
in a valid import after which ``show``, ``build`` (no LLM, hash embedder), ``search`` and ``check`` all work; a
rejected file never changes the store. Longer runs: bench/fuzz_import.py."""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.fuzz import hostile_file
from tmem.cli.main import cli
from tmem.errors import InputError
from tmem.ingest import import_file, read_file
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore

SEED = {"space": "seed", "sessions": [{"started_at": "2024-01-01", "turns": [{"speaker": "A", "text": "hi there"}]}]}
_FAST = settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _dump(path: Path) -> list[Any]:
    con = sqlite3.connect(path)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        return [(n, sorted(map(repr, con.execute(f'SELECT * FROM "{n}"')))) for n in names]
    finally:
        con.close()


def _version(monitor: sqlite3.Connection) -> int:
    """SQLite's data_version as seen by a second connection: it changes whenever another connection commits."""
    return int(monitor.execute("PRAGMA data_version").fetchone()[0])


def check_one(name: str, text: str, store: SQLiteStore, monitor: sqlite3.Connection, workdir: Path) -> str:
    """Import one file into ``store``: 'rejected' (InputError naming the file, nothing committed) or 'imported'."""
    src = workdir / name
    src.write_text(text, encoding="utf-8")
    before = _version(monitor)
    try:
        report = import_file(store, src)
    except InputError as exc:
        assert str(src) in str(exc), f"the message must name the file: {exc}"
        assert _version(monitor) == before, "a rejected file changed the store"
        return "rejected"
    for space in report.spaces:  # keep the store small: only the seed space stays
        if space.space != "seed":
            store.delete_space(Scope.local(space.space))
    return "imported"


@pytest.mark.parametrize("fmt", ["native", "locomo", "jsonl"])
def test_fuzz_readers_reject_cleanly_or_import(fmt: str) -> None:
    outcomes: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore.open(Path(tmp) / "tmem.db")
        seed = Path(tmp) / "seed.json"
        seed.write_text(json.dumps(SEED), encoding="utf-8")
        import_file(store, seed)
        snapshot = _dump(Path(tmp) / "tmem.db")
        monitor = sqlite3.connect(Path(tmp) / "tmem.db")

        @_FAST
        @given(hostile_file(fmt))
        def run(file: tuple[str, str]) -> None:
            outcome = check_one(*file, store, monitor, Path(tmp))
            outcomes[outcome] = outcomes.get(outcome, 0) + 1

        try:
            run()
        finally:
            monitor.close()
            store.close()
        assert _dump(Path(tmp) / "tmem.db") == snapshot  # only the seed space is left, as it was
    assert outcomes.get("rejected", 0) > 0 and outcomes.get("imported", 0) > 0, outcomes


def full_cycle(name: str, text: str, home: Path) -> str:
    """Through the CLI: import; when accepted, show, build (no LLM), search and check must succeed."""
    src = home.parent / name
    src.write_text(text, encoding="utf-8")
    env = {"TMEM_HOME": str(home), "TMEM_LLM": "none", "TMEM_EMBED_BACKEND": "hash"}
    runner = CliRunner()
    result = runner.invoke(cli, ["import", str(src), "--json"], env=env)
    if result.exit_code != 0:
        assert isinstance(result.exception, InputError), repr(result.exception)
        return "rejected"
    spaces = [s["space"] for s in json.loads(result.output)["spaces"]]
    for space in spaces:
        for args in (
            ["show", space, "--scenes", "--items"],
            ["build", space, "--no-progress"],
            ["show", space, "--scenes", "--topics", "--items", "--triggers", "--json"],
            ["search", space, "what happened yesterday?", "--explain"],
            ["check", space, "--json"],
        ):
            out = runner.invoke(cli, args, env=env)
            assert out.exit_code == 0, (args, out.output, repr(out.exception))
        report = json.loads(out.output)
        assert report.get("ok", True), report
    return "imported"


@pytest.mark.slow
def test_fuzz_accepted_files_show_build_search_and_check() -> None:
    outcomes: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        counter = iter(range(10**9))

        @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(st.sampled_from(["native", "locomo", "jsonl"]).flatmap(hostile_file))
        def run(file: tuple[str, str]) -> None:
            home = Path(tmp) / f"h{next(counter)}" / "home"
            home.parent.mkdir(parents=True)
            outcome = full_cycle(*file, home)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1

        run()
    assert outcomes.get("imported", 0) >= 5, outcomes


def test_every_reader_error_is_documented() -> None:
    # read_file raises only InputError / NotFoundError: a spot check on a file of every JSON type at top level.
    with tempfile.TemporaryDirectory() as tmp:
        for text in ["1", '"x"', "null", "true", "{}", "[]", "[1]", "1e999", "-0"]:
            path = Path(tmp) / "x.json"
            path.write_text(text, encoding="utf-8")
            with pytest.raises(InputError):
                read_file(path)
