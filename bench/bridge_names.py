"""Should a Bridge trigger name people and places? Recall of the Bridge views of the LLM-built dev memories, as the
model wrote them, with their proper names removed, and with the item's proper names added.

The item-trigger prompt asked for bridges "sharing no words with the item", which pushed the model to write
"Massachusetts" for Boston or "her" for Caroline. This measures which way helps recall: each item is scored by the
best cosine (MiniLM) between a query and its Bridge views, items are ranked, and a query is hit at k when one of the
top k items has a gold turn among its source turns. Queries are those of ``queries.json``: the LoCoMo-Plus cue probes
(``cue``: the trigger query, gold = the cue turns) and the LoCoMo questions whose evidence lies in the kept sessions
(``locomo``). Proper names: :func:`tmem.construct.names.proper_names` (capitalised words that do not start a
sentence, plus the speakers' names). Since this measurement the build adds the item's names to its Bridge view (the
third variant); run this on memories built before that to compare.

The samples are small (30 cues, 72 questions): one query is 3.3 (cue) or 1.4 (locomo) points. The shipped files are
copied first, never opened in place.

Run (from the repository root):
    python bench/bridge_names.py --data /work/shared/data/llm-built --out bench/results/bridge_names.md
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np

from tmem.construct.names import proper_names, with_names, without_names
from tmem.embed.sentence import SentenceTransformerEmbedder
from tmem.models import TriggerFamily
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore

KS = (1, 3, 5, 10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/llm-built"))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2")
    queries = json.loads((args.data / "queries.json").read_text())
    variants = ("as written", "names removed", "item's names added")
    hits: dict[tuple[str, str], list[int]] = {}
    totals: dict[str, int] = {}
    named_share: list[str] = []
    for db in sorted(args.data.glob("*.db")):
        space = db.name.removesuffix(".db")
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "tmem.db"
            shutil.copyfile(db, copy)
            store = SQLiteStore.open(copy)
            items = {it.id: it for it in store.items(Scope.local(space))}
            bridges = store.triggers(Scope.local(space), family=TriggerFamily.BRIDGE)
            speakers = list(store.get_space(Scope.local(space)).speakers)
            store.close()
        named = sum(1 for b in bridges if proper_names(b.fields["bridge"], speakers))
        named_share.append(f"{space}: {named} of {len(bridges)} bridges name a person or place")
        hosts = [b.host_id for b in bridges]
        texts = {
            "as written": [b.fields["bridge"] for b in bridges],
            "names removed": [without_names(b.fields["bridge"], speakers) for b in bridges],
            "item's names added": [with_names(b.fields["bridge"], items[b.host_id].text, speakers) for b in bridges],
        }
        mine = queries[space]
        qvec = embedder.embed([q["query"] for q in mine]).vectors
        host_ids = sorted(set(hosts))
        column = {h: n for n, h in enumerate(host_ids)}
        for variant in variants:
            vectors = embedder.embed(texts[variant]).vectors
            sims = qvec @ vectors.T  # (queries, bridges)
            best = np.full((len(mine), len(host_ids)), -1.0, dtype=np.float32)
            for j, host in enumerate(hosts):
                best[:, column[host]] = np.maximum(best[:, column[host]], sims[:, j])
            for qi, q in enumerate(mine):
                order = np.argsort(-best[qi], kind="stable")
                gold = set(q["gold_turn_ids"])
                ranked = [items[host_ids[c]] for c in order[: max(KS)]]
                first = next((r for r, it in enumerate(ranked, start=1) if gold & set(it.turn_ids)), None)
                key = (variant, q["kind"])
                hits.setdefault(key, [0] * len(KS))
                for n, k in enumerate(KS):
                    hits[key][n] += int(first is not None and first <= k)
        for q in mine:
            totals[q["kind"]] = totals.get(q["kind"], 0) + 1
    rows = ["| queries | Bridge views | " + " | ".join(f"hit@{k}" for k in KS) + " |", "| --- | --- |" + " ---: |" * 4]
    for kind in ("cue", "locomo"):
        n = totals.get(kind, 0)
        for variant in variants:
            got = hits.get((variant, kind), [0] * len(KS))
            rows.append(f"| {kind} ({n}) | {variant} | " + " | ".join(f"{100 * h / n:.1f}" for h in got) + " |")
    text = "\n".join(
        [
            "# Proper names in Bridge triggers: recall of Bridge views alone (MiniLM)",
            "",
            "Command: `python bench/bridge_names.py --data /work/shared/data/llm-built --out "
            "bench/results/bridge_names.md`",
            "",
            *[f"- {line}" for line in named_share],
            "",
            *rows,
            "",
        ]
    )
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
