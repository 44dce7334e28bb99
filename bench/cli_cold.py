"""Cold CLI calls: the wall time of one fresh ``tmem`` process per call, on a built conversation.

Each round runs, each in a new process and in this order: ``tmem spaces``; ``tmem search SPACE QUERY`` and
``tmem search SPACE QUERY --max-tokens 500`` with the torch-free query encoder (the default,
TMEM_EMBED_NUMPY_QUERIES=1); the same two with TMEM_EMBED_NUMPY_QUERIES=0 (queries encoded by sentence-transformers,
which loads torch: the code path before issue 19 part 5). Alternating keeps the variants under the same machine load;
the ratio of each to ``tmem spaces`` (a process that imports tmem and reads the store, nothing more) is the figure that
survives a loaded machine. The queries are LoCoMo-Plus cue probes of the space (queries.json), one per round.

The memory is a copy of an LLM-built dev memory (default d41-plus from /work/shared/data/llm-built), so nothing is
built here; its vectors are in the store's embedding cache, as after any build.

Bytecode: each call runs with Python's bytecode cache, as an installed tmem does (pip compiles it at install), written
by the uncounted round 0; the development environment sets PYTHONDONTWRITEBYTECODE=1, under which every call compiled
tmem's sources again (the runs before 2026-12-01 18:00 UTC). --no-bytecode measures that way (it removes the src
folders' __pycache__ before each call: site-packages keep theirs, as they did). --before SRC adds the
same calls on another checkout's src folder (e.g. the commit before a change), alternated with the others, so both
see the same load; --no-torch leaves out the two sentence-transformers variants (30 s each on a loaded machine).

Run (from the repository root):
    python bench/cli_cold.py --rounds 10 --out bench/results/cli_cold.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

BUILT = Path(__file__).resolve().parents[2] / "shared" / "data" / "llm-built"
SRC = str(Path(__file__).resolve().parents[1] / "src")


def _queries(space: str, rounds: int) -> list[str]:
    probes = json.loads((BUILT / "queries.json").read_text())[space]
    found = [p["query"] for p in probes if p.get("query")]
    return [found[n % len(found)] for n in range(rounds)]


def _drop_bytecode(src: str) -> None:
    """Remove the bytecode cache of a src folder (Python reads a cache that exists even when it may not write one)."""
    for folder in list(Path(src).rglob("__pycache__")):
        shutil.rmtree(folder, ignore_errors=True)


def _time(args: list[str], env: dict[str, str], no_bytecode: bool) -> float:
    if no_bytecode:
        _drop_bytecode(env["PYTHONPATH"])
    start = time.perf_counter()
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--space", default="d41-plus")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--out", type=Path, default=None, help="Append the result table to this markdown file.")
    parser.add_argument("--no-bytecode", action="store_true", help="Compile tmem's sources in every call.")
    parser.add_argument("--no-torch", action="store_true", help="Leave out the sentence-transformers query variants.")
    parser.add_argument("--before", type=Path, default=None, help="Also time these calls on this src folder.")
    args = parser.parse_args()
    start_load = os.getloadavg()

    home = Path(tempfile.mkdtemp(prefix="tmem-cli-cold-"))
    try:
        shutil.copy(BUILT / f"{args.space}.db", home / "tmem.db")
        (home / "tmem.db").chmod(0o644)
        env = {**os.environ, "PYTHONPATH": SRC, "TMEM_HOME": str(home), "TMEM_LLM": "none"}
        if args.no_bytecode:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        else:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        tmem = [sys.executable, "-c", "from tmem.cli.main import main; main()"]
        variants: dict[str, tuple[list[str], dict[str, str]]] = {}
        samples: dict[str, list[float]] = {}
        queries = _queries(args.space, args.rounds + 1)
        for n in range(args.rounds + 1):  # round 0 warms the page cache and is not counted
            q = queries[n]
            variants = {
                "tmem spaces": (["spaces"], {}),
                "tmem search (numpy query encoder)": (["search", args.space, q], {"TMEM_EMBED_NUMPY_QUERIES": "1"}),
                "tmem search --max-tokens 500 (numpy)": (
                    ["search", args.space, q, "--max-tokens", "500"],
                    {"TMEM_EMBED_NUMPY_QUERIES": "1"},
                ),
            }
            if args.before is not None:
                old = {"PYTHONPATH": str(args.before.resolve())}
                variants["tmem spaces (--before)"] = (["spaces"], old)
                variants["tmem search (--before)"] = (["search", args.space, q], old)
                variants["tmem search --max-tokens 500 (--before)"] = (
                    ["search", args.space, q, "--max-tokens", "500"],
                    old,
                )
            torch = {
                "tmem search (torch query encoder, before)": (
                    ["search", args.space, q],
                    {"TMEM_EMBED_NUMPY_QUERIES": "0"},
                ),
                "tmem search --max-tokens 500 (torch, before)": (
                    ["search", args.space, q, "--max-tokens", "500"],
                    {"TMEM_EMBED_NUMPY_QUERIES": "0"},
                ),
            }
            if not args.no_torch:
                variants.update(torch)
            for name, (argv, extra) in variants.items():
                took = _time([*tmem, *argv], {**env, **extra}, args.no_bytecode)
                if n:
                    samples.setdefault(name, []).append(took)
            print(
                f"round {n}: " + ", ".join(f"{k.split(' (')[0]} {v[-1]:.2f}s" for k, v in samples.items()), flush=True
            )
    finally:
        shutil.rmtree(home, ignore_errors=True)

    base = statistics.median(samples["tmem spaces"])
    load = os.getloadavg()
    flags = "".join(
        f" {flag}" for flag, on in (("--no-bytecode", args.no_bytecode), ("--no-torch", args.no_torch)) if on
    ) + (f" --before {args.before}" if args.before is not None else "")
    lines = [
        "",
        f"## {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, space {args.space}, {args.rounds} rounds",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average (1 / 5 / 15 min) {start_load[0]:.1f} / "
        f"{start_load[1]:.1f} / {start_load[2]:.1f} at the start, {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the "
        f"end. Bytecode: {'compiled in every call' if args.no_bytecode else 'cached, as installed'}. "
        f"Command: `python bench/cli_cold.py --space {args.space} --rounds {args.rounds}{flags}`.",
        "",
        "| call | median s | min s | max s | ratio to `tmem spaces` (medians) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, values in samples.items():
        med = statistics.median(values)
        lines.append(f"| {name} | {med:.2f} | {min(values):.2f} | {max(values):.2f} | {med / base:.2f} |")
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out is not None:
        with args.out.open("a") as fh:
            fh.write(table)


if __name__ == "__main__":
    main()
