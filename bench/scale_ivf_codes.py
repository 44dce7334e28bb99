"""Which codes the in-process IVF stores (tmem.index.ivf): 8-bit scalar quantisation vs float16, recall@k against
exact search and latency per nprobe, on the Entity views of bench/scale_vectors.py's synthetic corpus.

Run (from the repository root):
    python bench/scale_ivf_codes.py --views 1000000 --out bench/results/scale.md
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import datetime
from pathlib import Path

import faiss
import numpy as np
from scale_vectors import DIM, ENTITY, corpus, emit, queries  # a sibling script: bench/ is first on sys.path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--views", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    entries, vectors = corpus(args.views)
    x = np.ascontiguousarray(vectors[np.array([e.part == ENTITY for e in entries])])
    del vectors
    qs = queries(x, args.queries)
    exact = [set(np.argsort(-(x @ q))[: args.k].tolist()) for q in qs]
    nlist = round(2 * np.sqrt(len(x)))
    rng = np.random.default_rng(0)
    sample = x[np.sort(rng.choice(len(x), min(len(x), 50 * nlist), replace=False))]
    lines = [
        f"\n## IVF codes: 8-bit vs float16, {len(x):,} Entity views, run of {datetime.now():%Y-%m-%d %H:%M}\n",
        f"Command: `python bench/scale_ivf_codes.py {' '.join(sys.argv[1:])}`; nlist {nlist}; cpus {os.cpu_count()}; "
        f"load {os.getloadavg()[0]:.1f}\n",
        "| codes | train + add s | nprobe | p50 ms | recall@k vs exact |",
        "|---|---|---|---|---|",
    ]
    for name, qt in (("8-bit", faiss.ScalarQuantizer.QT_8bit), ("float16", faiss.ScalarQuantizer.QT_fp16)):
        index = faiss.IndexIVFScalarQuantizer(faiss.IndexFlatIP(DIM), DIM, nlist, qt, faiss.METRIC_INNER_PRODUCT)
        index.cp.niter = 10
        t0 = time.perf_counter()
        index.train(sample)
        index.add(x)
        build_s = time.perf_counter() - t0
        for nprobe in (32, 64, 128):
            params = faiss.SearchParametersIVF(nprobe=nprobe)
            times, got = [], []
            for q in qs:
                t0 = time.perf_counter()
                got.append(set(index.search(q[None, :], args.k, params=params)[1][0].tolist()))
                times.append((time.perf_counter() - t0) * 1000)
            rec = float(np.mean([len(g & e) / args.k for g, e in zip(got, exact, strict=True)]))
            lines.append(f"| {name} | {build_s:.0f} | {nprobe} | {float(np.median(times)):.1f} | {rec:.3f} |")
            print(lines[-1], flush=True)
    emit(lines, args.out)


if __name__ == "__main__":
    main()
