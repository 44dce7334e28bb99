"""Duplicated items in the LLM-built dev memories, before and after the near-duplicate filter of tmem.construct.dedup.

No model is available to rebuild the memories, so "after" is the filter applied to the items the model produced, in
their build order (``seq``) - what ``run_items`` now does while it stores them. Each memory is copied into a
temporary directory first (the shipped files are never opened in place).

Figures per memory:
- rule pairs: item pairs the filter calls near-duplicates (same kind, speaker and source scenes; content-word overlap);
- dense pairs: an independent measure - pairs of items with the same speaker and source scenes whose MiniLM
  embeddings have cosine >= 0.9 (the filter never looks at embeddings);
- cross-topic: the part of the rule pairs whose two items came from different topics;
- triggers saved: the Entity + Bridge triggers the dropped items carry (what their trigger calls produced).
The dropped items are listed with the item each repeats, so the merges can be judged by eye.

Run (from the repository root):
    python bench/item_duplicates.py --data /work/shared/data/llm-built --out bench/results/item_duplicates.md
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from tmem.construct.dedup import dedup, near_duplicate
from tmem.embed.base import Embedder
from tmem.embed.hashing import HashEmbedder
from tmem.embed.sentence import SentenceTransformerEmbedder
from tmem.models import Item, TriggerFamily
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore

DENSE = 0.9


def _pairs(items: list[Item], vectors: dict[str, np.ndarray]) -> tuple[int, int, int]:
    rule = dense = cross = 0
    for a, b in itertools.combinations(items, 2):
        if a.speaker != b.speaker or sorted(set(a.scene_ids)) != sorted(set(b.scene_ids)):
            continue
        if near_duplicate(a, b):
            rule += 1
            cross += int(a.topic_id != b.topic_id)
        if float(vectors[a.id] @ vectors[b.id]) >= DENSE:
            dense += 1
    return rule, dense, cross


def measure(db: Path, embedder: Embedder) -> tuple[list[str], list[str]]:
    space = db.name.removesuffix(".db")
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "tmem.db"
        shutil.copyfile(db, copy)
        store = SQLiteStore.open(copy)
        items = sorted(store.items(Scope.local(space)), key=lambda it: it.seq)
        triggers = store.triggers(Scope.local(space))
        store.close()
    vectors = dict(zip([it.id for it in items], embedder.embed([it.text for it in items]).vectors, strict=True))
    kept, dropped = dedup(items)
    per_item = {it.id: 0 for it in items}
    for trig in triggers:
        if trig.family in (TriggerFamily.ENTITY, TriggerFamily.BRIDGE) and trig.host_id in per_item:
            per_item[trig.host_id] += 1
    rows = []
    for label, group in (("before", items), ("after", kept)):
        rule, dense, cross = _pairs(group, vectors)
        saved = sum(per_item[i] for i in dropped) if label == "after" else 0
        rows.append(
            f"| {space} | {label} | {len(group)} | {rule} | {cross} | {dense} | "
            + (f"{len(dropped)} | {saved} |" if label == "after" else "- | - |")
        )
    by_id = {it.id: it for it in items}
    listing = [f"- {space}: **{by_id[d].text}**  \n  repeats: {by_id[k].text}" for d, k in dropped.items()]
    return rows, listing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/llm-built"))
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--embedder", default="all-MiniLM-L6-v2", help="'hash' for a quick run without the model")
    args = parser.parse_args()
    embedder: Embedder = HashEmbedder() if args.embedder == "hash" else SentenceTransformerEmbedder(args.embedder)
    rows = [
        "| memory | items | count | rule pairs | of them cross-topic | dense pairs (cos >= 0.9) | dropped | "
        "Entity+Bridge triggers of dropped items |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    listing: list[str] = []
    for db in sorted(args.data.glob("*.db")):
        got, dropped = measure(db, embedder)
        rows += got
        listing += dropped
    text = "\n".join(
        [
            "# Duplicated items in the LLM-built dev memories",
            "",
            "Command: `python bench/item_duplicates.py --data /work/shared/data/llm-built "
            "--out bench/results/item_duplicates.md`",
            f"(embedder for the independent dense measure: {args.embedder}; Python {sys.version.split()[0]}).",
            "",
            *rows,
            "",
            "## Dropped items (each with the item it repeats)",
            "",
            *listing,
            "",
        ]
    )
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
