"""A message, then a read of the same space: ``add_messages`` of one message followed by ``context``, against
``context`` alone on the built space (issue 21: no build wall; target p50 of the pair <= 2x p50 of context alone).

For each size N a synthetic built space is written through the Store API on a SQLite file (bench/scale_cold_load.py's
``write_space``: sessions of 20 turns, a scene per 8 turns, an item per 2 turns with an Entity trigger, a topic per 10
scenes, words drawn from the LoCoMo dev turns; the build watermark set as a build would), and its index loaded once
(every text embedded into the store's cache). Then, on one ``Memory`` (hashing embedder, 384 dimensions: the figures
are about the index, not about a model; ``--embedder minilm`` for the shipped MiniLM):

- ``context alone``: ``Memory.context(q, max_tokens=1000)`` on the built space, ``--calls`` queries;
- ``add + context (lazy)``: ``add_messages`` of one message (appended to the open session), then ``context`` of a
  query naming it; the new turn is embedded at that read (the default);
- ``add + context (eager)``: the same, with the message's turn embedded into the store's cache right after
  ``add_messages`` (what embedding at add time would cost the writer), so the read finds its vector cached.

Every pair checks that the new message is in the context (the bench fails otherwise).

Run (from the repository root; bounded, low priority):
    nice python bench/add_then_context.py --sizes 10000,100000 --calls 30 --out bench/results/add_then_context.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from scale_cold_load import SPACE, write_space  # a sibling script: bench/ is first on sys.path

from tmem import Memory, MessageInput, Settings
from tmem.embed.base import Embedder
from tmem.embed.cached import CachedEmbedder
from tmem.embed.texts import turn_embedding_text
from tmem.scope import Scope
from tmem.store import open_store
from tmem.util.state import STATE_TURN_SEQ

BUDGET = 1000
WORDS = ["garden", "trip", "painting", "concert", "recipe", "violin", "marathon", "camping", "novel", "puppy"]


def _embedder(name: str) -> Embedder:
    if name == "hash":
        from tmem.embed.hashing import HashEmbedder

        return HashEmbedder(384)
    from tmem.embed import make_embedder

    return make_embedder(Settings(llm="none"))


def _ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def run(n: int, calls: int, embedder_name: str) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(prefix="tmem-add-ctx-"))
    store = open_store(f"sqlite:///{folder / 'tmem.db'}")
    t0 = time.perf_counter()
    write_space(store, n)
    last = store.last_turn(Scope.local(SPACE))
    assert last is not None
    store.set_state(Scope.local(SPACE), STATE_TURN_SEQ, str(last.seq))  # as the build that wrote these scenes would
    write_s = time.perf_counter() - t0
    settings = Settings(home=folder, llm="none", session_gap_minutes=10**6)
    embedder = _embedder(embedder_name)
    mem = Memory(store, settings, embedder=embedder)
    t0 = time.perf_counter()
    mem.context(SPACE, "warm up", max_tokens=BUDGET)  # the first load embeds every text into the cache
    load_s = time.perf_counter() - t0
    figures: dict[str, float] = {"write_s": write_s, "first_load_s": load_s}

    alone = []
    for k in range(calls):
        t0 = time.perf_counter()
        mem.context(SPACE, f"what about the {WORDS[k % len(WORDS)]} {k}", max_tokens=BUDGET)
        alone.append(time.perf_counter() - t0)
    figures["context alone"] = _ms(alone)

    when = last.time + timedelta(minutes=1)
    for mode in ("lazy", "eager"):
        pairs, adds, reads = [], [], []
        for k in range(calls):
            word = f"{WORDS[k % len(WORDS)]}{mode}{k}"
            text = f"I just booked the {word} for next weekend"
            t0 = time.perf_counter()
            report = mem.add_messages(SPACE, [MessageInput(speaker="A", text=text, time=when)])
            if mode == "eager":
                (turn,) = store.find_turns(Scope.local(SPACE), report.added)
                CachedEmbedder(embedder, store, Scope.local(SPACE)).embed([turn_embedding_text(turn)])
            t1 = time.perf_counter()
            ctx = mem.context(SPACE, f"when is the {word}?", max_tokens=BUDGET)
            t2 = time.perf_counter()
            if text not in ctx.text:
                raise SystemExit(f"the message just added is not in the context ({mode}, call {k}, {n} turns)")
            adds.append(t1 - t0)
            reads.append(t2 - t1)
            pairs.append(t2 - t0)
            when += timedelta(seconds=30)
        figures[f"add ({mode})"] = _ms(adds)
        figures[f"context after add ({mode})"] = _ms(reads)
        figures[f"add + context ({mode})"] = _ms(pairs)
    mem.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--embedder", choices=["hash", "minilm"], default="hash")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    lines = [
        "# A message, then a read: add_messages + context against context alone",
        "",
        f"Command: `python bench/add_then_context.py --sizes {args.sizes} --calls {args.calls} "
        f"--embedder {args.embedder}`",
        "",
        f"Machine: {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs shared with "
        f"other jobs (load average {os.getloadavg()[0]:.1f} at the start). SQLite file store; embedder "
        f"{args.embedder}; context budget {BUDGET} tokens; p50 over {args.calls} calls each.",
        "",
        "| turns | context alone ms | add + context ms (lazy) | ratio | add ms | context after add ms "
        "| add + context ms (eager) | ratio | add+embed ms | context after add ms |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sizes:
        f = run(n, args.calls, args.embedder)
        base = f["context alone"]
        lines.append(
            f"| {n:,} | {base:.1f} | {f['add + context (lazy)']:.1f} | {f['add + context (lazy)'] / base:.2f} "
            f"| {f['add (lazy)']:.1f} | {f['context after add (lazy)']:.1f} | {f['add + context (eager)']:.1f} "
            f"| {f['add + context (eager)'] / base:.2f} | {f['add (eager)']:.1f} | {f['context after add (eager)']:.1f} |"
        )
        print(lines[-1], f"(write {f['write_s']:.0f} s, first load {f['first_load_s']:.0f} s)", flush=True)
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
