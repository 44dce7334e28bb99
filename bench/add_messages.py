"""Cost of adding one message to a space, by space size: ``Memory.add_messages`` against the session import path.

For each size N, a SQLite memory (file, WAL) gets N turns in sessions of 500 (written straight through the store, no
build), then:
  * ``add_messages``: one new message per call, appended to the open session (``--calls`` calls, each timed);
  * ``add_sessions``: one new one-turn session per call (the import path, which reads every stored session and turn
    to check ids and hashes; ``--import-calls`` calls).
Also timed: ``staleness`` (what a search adds to report unbuilt turns) on the same space, before any build (it then
counts every turn) and as after a build (it counts the turns past the build's watermark).

Run (from the repository root):
    python bench/add_messages.py --sizes 1000,10000,100000 --calls 200 --out bench/results/add_messages.md
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

from tmem import Memory, Settings
from tmem.models import Session, SessionInput, Turn, TurnInput
from tmem.scope import Scope
from tmem.store import open_store
from tmem.util.state import STATE_MODE, STATE_TURN_SEQ

T0 = datetime(2024, 1, 1, 8, 0)
SESSION = 500


def _fill(mem: Memory, space: str, n: int) -> None:
    store = mem.store
    store.ensure_space(Scope.local(space))
    seq = 0
    with store.transaction():
        for s in range(0, n, SESSION):
            sid = f"s{s // SESSION}"
            start = T0 + timedelta(days=s // SESSION)
            turns = [
                Turn(id=f"{sid}:{k}", session_id=sid, seq=seq + k, speaker=("ann", "bo")[k % 2],
                     text=f"turn {seq + k} about the garden, the weather and a trip", time=start)
                for k in range(min(SESSION, n - s))
            ]  # fmt: skip
            store.add_session(
                Scope.local(space), Session(id=sid, seq=s // SESSION, started_at=start, content_hash=sid), turns
            )
            seq += len(turns)
    store.set_speakers(Scope.local(space), ["ann", "bo"])


def _ms(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1000


def run(sizes: list[int], calls: int, import_calls: int) -> list[tuple[int, str, int, float, float]]:
    rows = []
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            with Memory(open_store(home / "tmem.db"), Settings(home=home, llm="none")) as mem:
                _fill(mem, "big", n)
                last = T0 + timedelta(days=n // SESSION + 1)
                mem.add_messages("big", [{"speaker": "ann", "text": "warm-up", "time": last}])
                samples = []
                for k in range(calls):
                    msg = {"speaker": "bo", "text": f"new message {k}", "time": last + timedelta(seconds=k + 1)}
                    t = time.perf_counter()
                    mem.add_messages("big", [msg])
                    samples.append(time.perf_counter() - t)
                rows.append((n, "add_messages (1 message)", calls, *_ms(samples)))
                stale = []
                for _ in range(calls):
                    t = time.perf_counter()
                    mem.staleness("big")
                    stale.append(time.perf_counter() - t)
                rows.append((n, "staleness, never built (counts every turn)", calls, *_ms(stale)))
                # as after a build that covered the first n turns (the watermark a build records)
                mem.store.set_state(Scope.local("big"), STATE_MODE, "extractive")
                mem.store.set_state(Scope.local("big"), STATE_TURN_SEQ, str(n - 1))
                built = []
                for _ in range(calls):
                    t = time.perf_counter()
                    assert mem.staleness("big").stale_turns == calls + 1
                    built.append(time.perf_counter() - t)
                rows.append((n, f"staleness, built ({calls + 1} new turns)", calls, *_ms(built)))
                imports = []
                for k in range(import_calls):
                    session = SessionInput(
                        id=f"imp{k}",
                        started_at=last + timedelta(days=k + 1),
                        turns=[TurnInput(id=f"imp{k}:0", speaker="ann", text=f"imported {k}")],
                    )
                    t = time.perf_counter()
                    mem.add_sessions("big", [session])
                    imports.append(time.perf_counter() - t)
                rows.append((n, "add_sessions (1 one-turn session)", import_calls, *_ms(imports)))
            print(f"size {n} done", file=sys.stderr)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--import-calls", type=int, default=10)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = run(sizes, args.calls, args.import_calls)
    lines = [
        "| turns in space | operation | calls | p50 ms | p95 ms |",
        "|---:|---|---:|---:|---:|",
        *(f"| {n:,} | {op} | {c} | {p50:.2f} | {p95:.2f} |" for n, op, c, p50, p95 in rows),
    ]
    table = "\n".join(lines)
    print(table)
    if args.out is not None:
        args.out.write_text(
            "# Adding a message: cost by space size\n\n"
            f"Command: `python bench/add_messages.py --sizes {args.sizes} --calls {args.calls} "
            f"--import-calls {args.import_calls} --out {args.out}`\n\n"
            f"Machine: {platform.platform()}, Python {platform.python_version()}, {platform.processor() or '?'}; "
            "a 2-core box shared with other jobs (figures are noisy, compare within a row set).\n"
            "SQLite file store (WAL, synchronous=NORMAL); every call is its own transaction.\n\n"
            f"{table}\n"
        )


if __name__ == "__main__":
    main()
