"""LongMemEval on a GENERATED file (tmem.eval.longmemeval.synth), not the official data: the pipeline's figures.

Writes an S-like file, runs ``tmem eval longmemeval --retrieval-only`` in code (extractive build, the configured
embedder, budgets 500-4000 cl100k tokens) and prints the report, the wall time of build + evaluation, the size of
one history in cl100k tokens, and the LLM-build estimate of one history (``tmem llm cost SPACE --estimate``'s
estimator) scaled to the official S file (500 histories of about 115k tokens). The generated chats are templated:
every figure here describes this generated data only, never LongMemEval itself.

    PYTHONPATH=src python bench/longmemeval_generated.py --instances 14 --sessions 30 --out /tmp/lme-bench
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from tmem.construct.estimate import estimate_build
from tmem.embed import make_embedder
from tmem.eval.longmemeval.report import render_summary
from tmem.eval.longmemeval.run import eval_longmemeval
from tmem.eval.longmemeval.synth import generate, write_file
from tmem.eval.runs import EvalOptions, Models
from tmem.ingest import import_spaces, read_file
from tmem.scope import Scope
from tmem.settings import Settings
from tmem.store.sqlite import SQLiteStore
from tmem.util.tokens import token_counter

OFFICIAL_S_HISTORIES = 500
OFFICIAL_S_TOKENS = 115_000  # the official README: about 115k tokens per S history


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=14)
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    data = generate("s", instances=args.instances, sessions=args.sessions, seed=args.seed)
    path = write_file(args.out / "generated_s.json", data)
    settings = Settings()
    counter = token_counter(settings.tokenizer)
    history = sum(counter.count(t["content"]) for s in data[0]["haystack_sessions"] for t in s)
    # the estimate reads the turns no scene holds yet: estimate instance 1 in a store of its own, before any build
    scratch = SQLiteStore.open(args.out / "estimate.db")
    first = read_file(path, "longmemeval")[0]
    import_spaces(scratch, [first], source=str(path))
    estimate = estimate_build(scratch, Scope.local(first.name))
    scratch.close()
    store = SQLiteStore.open(args.out / "memory" / "tmem.db")
    opts = EvalOptions(
        data=path, out=args.out, retrieval_only=True, budgets=[500, 1000, 2000, 4000], command="bench", concurrency=1
    )
    started = time.perf_counter()
    summary = asyncio.run(
        eval_longmemeval(store, settings, opts, Models(build=None, answer=None, judge=None), make_embedder(settings))
    )
    elapsed = time.perf_counter() - started
    store.close()
    print(render_summary(summary))
    print(f"embedder: {settings.embed_backend} {settings.embed_model}; {args.instances} histories of {args.sessions}")
    print(f"build + retrieval-only evaluation: {elapsed:.0f} s wall")
    print(f"history of instance 1: {history:,} {counter.name} tokens of turn text")
    scale = OFFICIAL_S_TOKENS / max(history, 1) * OFFICIAL_S_HISTORIES
    total = estimate.total
    print(
        f"LLM build estimate, instance 1: {total.requests:,} requests, {total.input_tokens:,} input and "
        f"{total.output_tokens:,} output tokens; scaled to the S file ({OFFICIAL_S_HISTORIES} x "
        f"{OFFICIAL_S_TOKENS:,} tokens): {total.requests * scale:,.0f} requests, {total.input_tokens * scale:,.0f} "
        f"input and {total.output_tokens * scale:,.0f} output tokens"
    )


if __name__ == "__main__":
    main()
