"""What a build that adds one session costs the searching process's index: an incremental update of the cached index
(vectors of unchanged entries taken over, only new entries read from the embedding cache) against loading the whole
index afresh, on a synthetic space written through the Store API (bench/scale_cold_load.py's generator: sessions of
20 turns, a scene per 8 turns, an item with an Entity trigger of two views per 2 turns; hashing embedder, 384
dimensions).

Each round: a new session of 20 turns with its scenes, items and triggers is written, every new text embedded into
the store's cache (as a build does), and the build's state key moved. Then, timed separately: ``Retriever.index``
on a retriever that holds the previous index (incremental), and on a fresh retriever (full load); both indices must
answer a query identically.

Run (from the repository root; bounded, low priority):
    nice python bench/scale_incremental.py --turns 20000 --rounds 3 --out bench/results/scale.md
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from tmem.scope import Scope

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("scale_cold_load", HERE / "scale_cold_load.py")
assert _spec is not None and _spec.loader is not None
cold = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cold)


def add_session(store: object, n: int, words: list[str], rng: np.random.Generator) -> None:
    from tmem.models import BuildMode, Item, ItemKind, Scene, Session, Trigger, TriggerFamily, TriggerView, Turn

    def sentence(k: int) -> str:
        return " ".join(words[i] for i in rng.integers(0, len(words), k))

    space = cold.SPACE
    when = datetime(2030, 1, 1) + timedelta(days=n)
    turns = [
        Turn(id=f"N{n}:{i}", session_id=f"n{n}", seq=10_000_000 + n * 20 + i, speaker="A" if i % 2 else "B",
             text=sentence(14), time=when + timedelta(minutes=i))
        for i in range(20)
    ]  # fmt: skip
    store.add_session(
        Scope.local(space), Session(id=f"n{n}", seq=1_000_000 + n, started_at=when, content_hash=f"n{n}"), turns
    )  # type: ignore[attr-defined]
    ids = [t.id for t in turns]
    scenes = [
        Scene(id=f"nsc{n}-{k}", seq=1_000_000 + n * 3 + k, title=sentence(4), summary=sentence(20), narrative="",
              turn_ids=ids[k * 8 : k * 8 + 8], start=when, end=when, mode=BuildMode.EXTRACTIVE)
        for k in range(3)
    ]  # fmt: skip
    items = [
        Item(id=f"nit{n}-{k}", text=sentence(16), kind=ItemKind.ATOMIC, scene_ids=[f"nsc{n}-{k // 4}"],
             seq=1_000_000 + n * 10 + k, mode=BuildMode.EXTRACTIVE)
        for k in range(10)
    ]  # fmt: skip
    triggers = [
        Trigger(id=f"ntr{n}-{k}", family=TriggerFamily.ENTITY, host_kind="item", host_id=f"nit{n}-{k}",
                views=[TriggerView(name="concept", text=sentence(3)), TriggerView(name="joint", text=sentence(6))])
        for k in range(10)
    ]  # fmt: skip
    store.put_scenes(Scope.local(space), scenes)  # type: ignore[attr-defined]
    store.put_items(Scope.local(space), items)  # type: ignore[attr-defined]
    store.put_triggers(Scope.local(space), triggers)  # type: ignore[attr-defined]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    from tmem.embed.hashing import HashEmbedder
    from tmem.index.factory import refresh_space
    from tmem.retrieve.cascade import Retriever
    from tmem.retrieve.config import RetrievalConfig
    from tmem.store import open_store

    url = f"sqlite:///{Path(tempfile.mkdtemp(prefix='tmem-incr-')) / 'tmem.db'}"
    t0 = time.perf_counter()
    cold.populate(url, args.turns)
    print(f"populated {args.turns:,} turns in {time.perf_counter() - t0:.0f} s", flush=True)
    store = open_store(url)
    embedder = HashEmbedder(cold.DIM)
    kept = Retriever(store, embedder)
    t0 = time.perf_counter()
    first = kept.index(Scope.local(cold.SPACE))
    first_s = time.perf_counter() - t0
    cfg = RetrievalConfig.preset("paper").replace(gate=None)
    rng = np.random.default_rng(1)
    words = cold._words()
    incr, full, written, entries = [], [], [], 0
    for n in range(args.rounds):
        add_session(store, n, words, rng)
        refresh_space(store, Scope.local(cold.SPACE), embedder)  # the build embeds its new texts into the cache
        store.set_state(Scope.local(cold.SPACE), "build.sessions", str(args.turns // 20 + n + 1))
        t0 = time.perf_counter()
        updated = kept.index(Scope.local(cold.SPACE))
        incr.append(time.perf_counter() - t0)
        assert updated.synced is not None
        written.append(updated.synced.written)
        entries = len(updated.entries)
        t0 = time.perf_counter()
        fresh = Retriever(store, embedder)
        fresh.index(cold.SPACE)
        full.append(time.perf_counter() - t0)
        query = "what did she say about the trip to the lake"
        assert kept.search(Scope.local(cold.SPACE), query, cfg) == fresh.search(cold.SPACE, query, cfg)
    store.close()
    stamp = datetime.now().strftime("%Y-%m-%d %H:%M")  # bookkeeping date, not a memory date
    lines = [
        f"\n## Incremental index update after a one-session build, {args.turns:,}-turn space, run of {stamp}\n",
        f"Command: `nice python bench/scale_incremental.py {' '.join(sys.argv[1:])}`\n",
        f"Machine: python {platform.python_version()}; cpus {os.cpu_count()}; load {os.getloadavg()[0]:.1f}; "
        f"SQLite, in-process vectors, hashing embedder ({cold.DIM} dimensions); {entries:,} index entries; first "
        f"load of the space {first_s:.1f} s ({len(first.entries):,} entries)\n",
        "| update | median s | rounds | vectors written per update | answers |",
        "|---|---|---|---|---|",
        f"| incremental (Retriever holding the previous index) | {statistics.median(incr):.2f} | {args.rounds} | "
        f"{statistics.median(written):.0f} | identical to a full load |",
        f"| full load (fresh Retriever) | {statistics.median(full):.2f} | {args.rounds} | {entries:,} | |",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with args.out.open("a", encoding="utf-8") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
