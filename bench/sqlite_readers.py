"""Searches during a forget and during a build on one SQLite memory (issue 32, item 2): do writers stall readers?

One process, one ``Memory`` on a memory directory, as ``tmem serve`` holds it. The file is made large with a space
``big`` of --turns imported turns; a space ``search`` (--search-turns turns) is built and searched; a space ``build``
(--search-turns turns) is left unbuilt. Then N threads search ``search`` back to back (synthetic questions, round
robin) through three windows: no writer (baseline), a forget of one turn of ``big`` (deletion, erasure ledger and the
store's scrub), and the build of ``build``. For each window it reports the searches that ran in it: count,
p50 / p99 / max latency, and how long the writer took. Run it once per tree to compare (old tree: ``git archive``
of the commit into a folder, then PYTHONPATH=that/src).

Run (repository root, PYTHONPATH=src or an installed tmem):
    python bench/sqlite_readers.py --clients 16 --turns 60000 --out bench/results/sqlite_readers.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from tmem import Memory, Settings
from tmem.models import SessionInput, TurnInput

T0 = datetime(2023, 1, 2, 9, 0)
TOPICS = ["hiking trip", "new job", "sister's wedding", "pottery class", "dog training", "garden", "guitar", "move"]


def _sessions(prefix: str, turns: int, per_session: int = 20) -> list[SessionInput]:
    out: list[SessionInput] = []
    for s in range(0, turns, per_session):
        start = T0 + timedelta(days=s // per_session)
        out.append(
            SessionInput(
                id=f"{prefix}-{s // per_session}",
                started_at=start,
                turns=[
                    TurnInput(
                        id=f"{prefix}-{i}",
                        speaker="Ann" if i % 2 == 0 else "Bo",
                        text=f"About the {TOPICS[i % len(TOPICS)]}: note {i} of {prefix}, day {s // per_session}.",
                        time=start + timedelta(minutes=i - s),
                    )
                    for i in range(s, min(s + per_session, turns))
                ],
            )
        )
    return out


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _window(
    memory: Memory, clients: int, lead_s: float, writer: Callable[[], object] | None, tail_s: float
) -> dict[str, float]:
    """Searches of N clients from ``lead_s`` before ``writer`` starts until it ends (or ``tail_s`` without one);
    latencies of the searches that ran while the writer ran, for all or part of their time (a search the writer
    stalled counts however early it started)."""
    stop = threading.Event()
    started: list[tuple[float, float]] = []  # (start, seconds)
    lock = threading.Lock()

    def client(c: int) -> None:
        n = c
        while not stop.is_set():
            t = time.perf_counter()
            memory.search("search", f"what happened with the {TOPICS[n % len(TOPICS)]}?")
            with lock:
                started.append((t, time.perf_counter() - t))
            n += clients

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    time.sleep(lead_s)
    begin = time.perf_counter()
    done = None
    if writer is not None:
        done = writer()
    else:
        time.sleep(tail_s)
    end = time.perf_counter()
    stop.set()
    for t in threads:
        t.join()
    inside = [s for t, s in started if t <= end and t + s >= begin]  # ran while the writer ran, for any part
    erased = getattr(done, "erased", None)
    return {
        "erased": float("nan") if erased is None else float(bool(erased)),
        "writer_s": end - begin,
        "searches": len(inside),
        "p50_ms": 1000 * statistics.median(inside) if inside else float("nan"),
        "p99_ms": 1000 * _percentile(inside, 0.99) if inside else float("nan"),
        "max_ms": 1000 * max(inside) if inside else float("nan"),
    }


def run(clients: int, turns: int, search_turns: int, baseline_s: float) -> tuple[dict[str, dict[str, float]], float]:
    with tempfile.TemporaryDirectory(prefix="tmem-readers-") as tmp:
        settings = Settings(llm="none", embed_backend="hash", build_after_turns=1_000_000, build_idle_seconds=1e9)
        with Memory.open(Path(tmp), settings) as memory:
            memory.add_sessions("big", _sessions("big", turns))
            memory.add_sessions("search", _sessions("search", search_turns))
            memory.add_sessions("build", _sessions("build", search_turns))
            memory.build("search")
            memory.search("search", "warm up")
            size_mb = sum(p.stat().st_size for p in Path(tmp).glob("tmem.db*")) / 1e6
            out = {
                "no writer": _window(memory, clients, 1.0, None, baseline_s),
                "forget": _window(memory, clients, 1.0, lambda: memory.forget("big", turn_ids=["big-7"]), 0),
                "build": _window(memory, clients, 1.0, lambda: memory.build("build"), 0),
            }
    return out, size_mb


def _erased(flag: float) -> str:
    return "" if flag != flag else ("erased" if flag else "pending")  # NaN: not a forget


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--turns", type=int, default=60_000, help="turns of the space that makes the file large")
    parser.add_argument("--search-turns", type=int, default=400)
    parser.add_argument("--baseline-seconds", type=float, default=5.0)
    parser.add_argument("--label", default="", help="which tree ran (a column of the table)")
    parser.add_argument("--out", type=Path, default=None, help="append the table rows to this markdown file")
    args = parser.parse_args()
    results, size_mb = run(args.clients, args.turns, args.search_turns, args.baseline_seconds)
    stamp = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    rows = [
        f"| {stamp} UTC | {args.label} | {size_mb:.0f} MB | {name} | {r['writer_s']:.2f} | {_erased(r['erased'])} | "
        f"{r['searches']:.0f} | "
        f"{r['p50_ms']:.0f} | {r['p99_ms']:.0f} | {r['max_ms']:.0f} | {os.getloadavg()[0]:.1f} | "
        f"{platform.python_version()} |"
        for name, r in results.items()
    ]
    print("\n".join(rows))
    if args.out is not None:
        with args.out.open("a") as f:
            f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
