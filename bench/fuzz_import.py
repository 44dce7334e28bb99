"""A longer fuzz run of the importers than CI's (tests/test_fuzz_import.py), with its figures.

For each format (native JSON, LoCoMo JSON, native JSONL) it draws N hostile files from tests/support/fuzz.py and
imports each into a store holding a seed space: the outcome is "rejected" (InputError naming the file, nothing
committed), "imported", or a failure (any other exception, or a rejection that changed the store). Then M files
drawn from all three formats go through the whole CLI cycle: import; when accepted, show, build (no LLM, hash
embedder), search and check. Failures are counted by exception type with one example each; the run never stops at
the first.

Run (from the repository root):
    python -m bench.fuzz_import --examples 3000 --cycle 300 --out bench/results/fuzz_import.md
"""

from __future__ import annotations

import argparse
import collections
import json
import platform
import sqlite3
import tempfile
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# the test suite's fixtures: run as a module from the repository root (`python -m bench.fuzz_import`, bench/README.md)
from tests.support.fuzz import hostile_file
from tests.test_fuzz_import import SEED, check_one, full_cycle

from tmem.ingest import import_file
from tmem.store.sqlite import SQLiteStore


def _settings(n: int) -> settings:
    return settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def fuzz_format(fmt: str, n: int) -> tuple[collections.Counter[str], dict[str, str], float]:
    outcomes: collections.Counter[str] = collections.Counter()
    examples: dict[str, str] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore.open(Path(tmp) / "tmem.db")
        seed = Path(tmp) / "seed.json"
        seed.write_text(json.dumps(SEED), encoding="utf-8")
        import_file(store, seed)
        monitor = sqlite3.connect(Path(tmp) / "tmem.db")

        @_settings(n)
        @given(hostile_file(fmt))
        def run(file: tuple[str, str]) -> None:
            try:
                outcomes[check_one(*file, store, monitor, Path(tmp))] += 1
            except Exception as exc:  # noqa: BLE001 - counted: the bench reports every kind of failure
                key = f"FAILURE {type(exc).__name__}"
                outcomes[key] += 1
                examples.setdefault(key, "".join(traceback.format_exception_only(exc)).strip()[:300])

        run()
        monitor.close()
        store.close()
    return outcomes, examples, time.perf_counter() - started


def fuzz_cycle(n: int) -> tuple[collections.Counter[str], dict[str, str], float]:
    outcomes: collections.Counter[str] = collections.Counter()
    examples: dict[str, str] = {}
    started = time.perf_counter()
    counter = iter(range(10**9))
    with tempfile.TemporaryDirectory() as tmp:

        @_settings(n)
        @given(st.sampled_from(["native", "locomo", "jsonl"]).flatmap(hostile_file))
        def run(file: tuple[str, str]) -> None:
            home = Path(tmp) / f"h{next(counter)}" / "home"
            home.parent.mkdir(parents=True)
            try:
                outcomes[full_cycle(*file, home)] += 1
            except Exception as exc:  # noqa: BLE001 - counted, not raised
                key = f"FAILURE {type(exc).__name__}"
                outcomes[key] += 1
                examples.setdefault(key, "".join(traceback.format_exception_only(exc)).strip()[:300])

        run()
    return outcomes, examples, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=3000, help="files per format")
    parser.add_argument("--cycle", type=int, default=300, help="files through the full CLI cycle")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    failures: dict[str, str] = {}
    for fmt in ("native", "locomo", "jsonl"):
        outcomes, examples, seconds = fuzz_format(fmt, args.examples)
        rows.append((f"import ({fmt})", outcomes, seconds))
        failures.update({f"{fmt}: {k}": v for k, v in examples.items()})
    outcomes, examples, seconds = fuzz_cycle(args.cycle)
    rows.append(("import, show, build, search, check (all formats)", outcomes, seconds))
    failures.update({f"cycle: {k}": v for k, v in examples.items()})
    lines = [
        f"# Importer fuzzing ({datetime.now(UTC):%Y-%m-%d})",
        "",
        f"Command: `python -m bench.fuzz_import --examples {args.examples} --cycle {args.cycle}"
        + (f" --out {args.out}`" if args.out else "`"),
        f"Machine: {platform.machine()}, Python {platform.python_version()} (shared, loaded CPU: wall times are upper "
        "bounds).",
        "",
        "| Run | Files | Rejected (InputError, store unchanged) | Imported (and cycle passed) | Failures | Wall s |",
        "|---|---|---|---|---|---|",
    ]
    for name, outcome, seconds in rows:
        fails = sum(v for k, v in outcome.items() if k.startswith("FAILURE"))
        total = sum(outcome.values())
        lines.append(f"| {name} | {total} | {outcome['rejected']} | {outcome['imported']} | {fails} | {seconds:.0f} |")
    lines += ["", "Failures: " + ("none." if not failures else "")]
    lines += [f"- {k}: `{v}`" for k, v in failures.items()]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
