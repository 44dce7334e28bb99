"""Does a smaller vector storage pay for in-process exact search? One query's cosines against N stored vectors
(384 dimensions) with numpy, for each storage: float32 (what MemoryVectorIndex holds), float16 (half the memory),
float16 widened to float32 block by block (half the memory, float32 arithmetic), int8 (a quarter).

Run (from the repository root; bounded, low priority):
    nice python bench/scale_storage.py --rows 400000 --out bench/results/scale.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt

DIM = 384


def timed(fn: Callable[[], object], repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    m = rng.standard_normal((args.rows, DIM), dtype=np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    q = m[5].copy()
    half = m.astype(np.float16)
    q_half = q.astype(np.float16)
    i8 = np.round(m * 127).astype(np.int8)
    q8 = np.round(q * 127).astype(np.int32)  # int8 @ int8 would accumulate (and overflow) in int8
    block = np.empty((65_536, DIM), dtype=np.float32)

    def widened() -> npt.NDArray[np.float32]:
        out = np.empty(args.rows, dtype=np.float32)
        for lo in range(0, args.rows, block.shape[0]):
            hi = min(args.rows, lo + block.shape[0])
            part = block[: hi - lo]
            part[...] = half[lo:hi]
            np.dot(part, q, out=out[lo:hi])
        return out

    exact = m @ q
    rows = [
        ("float32", m.nbytes, timed(lambda: m @ q, args.repeat), 0.0),
        ("float16", half.nbytes, timed(lambda: half @ q_half, max(1, args.repeat // 2)),
         float(np.max(np.abs((half @ q_half).astype(np.float32) - exact)))),
        ("float16 widened to float32 per 64k rows", half.nbytes, timed(widened, args.repeat),
         float(np.max(np.abs(widened() - exact)))),
        ("int8 (x127), int32 products", i8.nbytes, timed(lambda: i8 @ q8, max(1, args.repeat // 2)),
         float(np.max(np.abs((i8 @ q8).astype(np.float32) / 127**2 - exact)))),
    ]  # fmt: skip
    stamp = datetime.now().strftime("%Y-%m-%d %H:%M")  # bookkeeping date, not a memory date
    lines = [
        f"\n## Vector storage for exact in-process search, {args.rows:,} x {DIM}, run of {stamp}\n",
        f"Command: `nice python bench/scale_storage.py {' '.join(sys.argv[1:])}`\n",
        f"Machine: python {platform.python_version()}; numpy {np.__version__}; cpus {os.cpu_count()}; "
        f"load {os.getloadavg()[0]:.1f}\n",
        "| storage | MiB | one query, ms (median) | max abs cosine error |",
        "|---|---|---|---|",
        *[f"| {name} | {nbytes / 2**20:.0f} | {ms:.1f} | {err:.1e} |" for name, nbytes, ms, err in rows],
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with args.out.open("a", encoding="utf-8") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
