"""Golden check for refactors of the cascade and the packer: byte-identical searches and budgeted contexts.

For each memory below (a fresh copy of its store every run, so the originals are never touched) and each recipe,
~20 queries are searched (the whole SearchResult: ids, scores, routes, gate misses, topics, anchor) and packed at
500 and 1000 tokens (the whole Context). Each is reduced to a sha256 of its JSON; ``--record`` writes the digests,
``--check`` compares and names every case that differs (with ``--dump`` the full JSON of every case is written too,
to diff two runs).

Memories: the shipped LLM-built d41-plus (triggers, persona, Bridge/Horizon routes) and two extractive builds of
LoCoMo dev conversations, made once with

    tmem --llm none --dir DIR import data/locomo10.dev.json --space conv-30   (and conv-26)
    tmem --llm none --dir DIR build conv-30                                    (and conv-26)

After the first searches of each memory a session of three new messages is added, so that the later searches also
cover unbuilt turns searched as the index's tail (the unbuilt-turn routes). Run from the repository root:

    python bench/routes_golden.py --extractive DIR --record bench/results/routes_golden.json
    python bench/routes_golden.py --extractive DIR --check bench/results/routes_golden.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from tmem.memory import Memory
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.layout import ContextLayout
from tmem.scope import Scope
from tmem.settings import Settings

SHARED = Path("/work/shared/data")
BUDGETS = (500, 1000)
# Every route of the cascade is on in at least one recipe: the presets, plus a custom recipe that turns on the
# extensions (split item triggers, direct items, scenes via items, the turn route, a gate on the scene triggers).
EVERY_ROUTE = RetrievalConfig.preset("paper").replace(
    name="every-route",
    gate=0.5,
    split_item_triggers=True,
    item_direct_top=10,
    scene_via_items_top=10,
    turn_top=10,
    scene_trigger_gate=0.3,
)
LAYOUTS = {  # recipes whose context layout is not the one their name resolves to
    "every-route": ContextLayout(
        lexical_floor=0.25, anchorless_routes=frozenset({"turn.dense", "scene.trigger.scene", "item.trigger.bridge"})
    )
}
# Fields added to results after the digests were recorded: left out of the digest (the whole JSON is dumped).
ADDED = {"search": ("layout",)}
RECIPES: dict[str, RetrievalConfig | str] = {
    "auto": "auto",
    "associative": "associative",
    "paper": "paper",
    "extractive": "extractive",
    "no-filter": "no-filter",
    "every-route": EVERY_ROUTE,
}
NEW_MESSAGES = [
    {"speaker": "A", "text": "I just adopted a puppy named Biscuit, she loves the beach."},
    {"speaker": "B", "text": "That is wonderful news! Is she keeping you up at night?"},
    {"speaker": "A", "text": "A little, but my new job at the bakery starts early anyway."},
]


def _questions(space: str, n: int) -> list[str]:
    if space.startswith("conv-"):
        conv = next(c for c in json.loads((SHARED / "locomo10.dev.json").read_text()) if c["sample_id"] == space)
        return [str(q["question"]) for q in conv["qa"] if q.get("category") != 5][:n]
    probes = json.loads((SHARED / "llm-built" / "queries.json").read_text())[space]
    cues = [str(p["query"]) for p in probes if p["kind"] == "cue"][: n // 2]
    return cues + [str(p["query"]) for p in probes if p["kind"] == "locomo"][: n - len(cues)]


def _cases(mem: Memory, space: str, queries: list[str], tag: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for recipe, cfg in RECIPES.items():
        for n, query in enumerate(queries):
            key = f"{space}|{tag}|{recipe}|{n:02d}"
            out[f"{key}|search"] = json.loads(mem.search(space, query, cfg).model_dump_json())
            for budget in BUDGETS:
                ctx = mem.context(space, query, budget, cfg, layout=LAYOUTS.get(recipe))
                out[f"{key}|context{budget}"] = json.loads(ctx.model_dump_json())
    return out


def _memory_cases(store: Path, space: str, work: Path) -> dict[str, Any]:
    folder = work / space
    folder.mkdir()
    shutil.copy(store, folder / "tmem.db")
    queries = _questions(space, 20)
    with Memory.open(folder, Settings(home=folder, llm="none")) as mem:
        out = _cases(mem, space, queries, "built")
        speakers = sorted({t.speaker for t in mem.core.store.turns(Scope.local(space))})[:2]
        when = datetime(2099, 1, 1, 10, 0)
        msgs = [
            {**m, "speaker": speakers[0] if m["speaker"] == "A" else speakers[-1], "time": when.replace(minute=k)}
            for k, m in enumerate(NEW_MESSAGES)
        ]
        mem.add_messages(space, msgs)
        out |= _cases(mem, space, [*queries[:6], "new puppy Biscuit", "bakery job"], "tail")
    return out


def collect(extractive: Path) -> dict[str, Any]:
    memories = [
        (SHARED / "llm-built" / "d41-plus.db", "d41-plus"),
        (extractive / "tmem.db", "conv-30"),
        (extractive / "tmem.db", "conv-26"),
    ]
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="routes-golden-") as tmp:
        for store, space in memories:
            out |= _memory_cases(store, space, Path(tmp))
    return out


def digest(key: str, value: Any) -> str:
    left_out = ADDED.get(key.rsplit("|", 1)[-1], ())
    kept = {k: v for k, v in value.items() if k not in left_out}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--extractive", type=Path, required=True, help="memory directory holding conv-30 and conv-26")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", type=Path)
    mode.add_argument("--check", type=Path)
    ap.add_argument("--dump", type=Path, help="also write every case's full JSON here")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    cases = collect(args.extractive)
    if args.dump:
        args.dump.write_text(json.dumps(cases, indent=1, sort_keys=True))
    digests = {k: digest(k, v) for k, v in sorted(cases.items())}
    print(f"{len(digests)} cases in {time.perf_counter() - start:.0f}s")
    if args.record:
        args.record.write_text(json.dumps(digests, indent=0, sort_keys=True) + "\n")
        return 0
    golden = json.loads(args.check.read_text())
    differ = sorted(k for k in golden.keys() | digests.keys() if golden.get(k) != digests.get(k))
    for key in differ[:40]:
        print(f"DIFFERS {key}")
    print(f"{len(differ)} of {len(golden)} cases differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
