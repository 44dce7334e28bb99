"""Facts that change: does the context show the current value, and does a stale value come before it?

Dev set (written from scratch for tmem, issue 21): bench/data/updates.json (nine made-up conversations in tmem's
native format, 3-4 sessions each) and bench/data/updates_probes.json (45 probes: a move, a job, a relationship, a
preference, a changed plan, a possession sold or bought, a health change, a count; explicit and implicit changes).
Each probe names the strings of its current value and of its stale value(s).

For each probe and budget, three contexts are read:

* ``tmem``: ``Memory.context`` (recall_context, the default preset, persona left out) of the built space;
* ``flat dense`` / ``flat hybrid``: every raw turn ranked by cosine (all-MiniLM-L6-v2) or by RRF of BM25 and cosine,
  packed best first to the budget (tmem.eval.baselines: first fit, so a turn that would overflow is skipped and a
  later, shorter one may still fill the rest) and rendered in rank order, one dated turn a line.

Every system's budget is counted by one tokenizer, cl100k (:mod:`tmem.util.tokens`, the counter of ``Memory.context``):
tmem's context and the flat packings are handed the same counter, every text is counted again by it after rendering,
and a text over its budget stops the bench. The report gives each system's mean tokens per budget, so that a system
left short of its budget shows.

Two measures, on the context's lines (a line: one fact, or one turn):

* ``current``: some line holds a current value;
* ``stale first``: a line holds a stale value and no current value, and comes before the first line that holds a
  current value (or no line holds one). A line that states the change ("I sold the Canon and bought a Fujifilm")
  holds the current value.

Builds: ``extractive`` (offline, no LLM) and ``scripted LLM``: the LLM-mode pipeline with the scripted replies of
tests/support/stage_replies.py, whose items reply is replaced here by one that extracts one atomic item per turn of
the new scenes (six words or more) and labels the turns the probe file names with the slot written there (labels
vary on purpose: "Dana / employer" then "Dana / job"). It measures the pipeline around the model (slot matching in
code, supersession, packing) given a model that labels slots, not a model's quality. ``--match`` chooses how slots
are compared in that build (``normalised``: tmem's rule, normalised labels and the synonym table; ``no-synonyms``:
normalised labels only; ``none``: no slot links, as before issue 21).

Run (from the repository root; a module, since it reuses the test suite's scripted replies):
    python -m bench.updates --out bench/results/updates.md
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# tests.support (the scripted replies): run as a module from the repository root (`python -m bench.updates`)
from tests.support.stage_replies import iso, reply_for

from tmem.answer.budget import recall_context
from tmem.answer.context import format_turn
from tmem.construct import slots
from tmem.construct.extractive import build_extractive
from tmem.construct.pipeline import build_space
from tmem.embed.sentence import SentenceTransformerEmbedder
from tmem.eval.baselines import SpaceBaselines
from tmem.index.space import cached_vectorizer
from tmem.ingest import import_file
from tmem.llm.base import ChatRequest
from tmem.llm.scripted import scripted_llm
from tmem.retrieve.cascade import Retriever
from tmem.retrieve.layout import ContextLayout, placement
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore
from tmem.util.tokens import TokenCounter, token_counter

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data" / "updates.json"
PROBES = ROOT / "bench" / "data" / "updates_probes.json"
BUDGETS = (500, 1000)
SYSTEMS = ("tmem", "flat dense", "flat hybrid")


@dataclass(frozen=True)
class Probe:
    space: str
    question: str
    kind: str
    change: str
    current: list[str]
    stale: list[str]


def score(text: str, probe: Probe) -> tuple[bool, bool]:
    """(current value in the context, stale value first), by lines (see the module docstring)."""
    first_current = first_stale = None
    for n, line in enumerate(text.casefold().splitlines()):
        has_current = any(v.casefold() in line for v in probe.current)
        if has_current and first_current is None:
            first_current = n
        if not has_current and any(v.casefold() in line for v in probe.stale) and first_stale is None:
            first_stale = n
    stale_first = first_stale is not None and (first_current is None or first_stale < first_current)
    return first_current is not None, stale_first


# ------------------------------------------------------------------------------------------ the scripted model


_TURN = re.compile(r"^\[(?P<id>[^\]]+)\] (?P<date>\d{1,2} \w+ \d{4}), \d\d:\d\d · (?P<speaker>[^:]+): (?P<text>.*)$")


def items_reply(user: str, labels: dict[str, str]) -> dict[str, Any]:
    """One atomic item per turn of six words or more in the new scenes; the labelled turns carry their slot."""
    body = user.split("<scenes>", 1)[1].split("</scenes>", 1)[0]
    atomic = []
    for block in re.split(r"^(?=\[S\d+\] \(new\))", body.strip(), flags=re.M):
        head = re.match(r"^\[(S\d+)\] \(new\)", block)
        if head is None:
            continue
        for line in block.splitlines():
            m = _TURN.match(line.strip())
            if m is None or len(m["text"].split()) < 6:
                continue
            text = m["text"].replace("&lt;", "<").replace("&gt;", ">")
            atomic.append(
                {
                    "text": f'On {m["date"]}, {m["speaker"]} said: "{text}"',
                    "speaker": m["speaker"],
                    "date": iso(m["date"]),
                    "scene": head[1],
                    "turns": [m["id"]],
                    "updates": None,
                    "slot": labels.get(m["id"]),
                }
            )
    return {"atomic_items": atomic, "connected_items": []}


def scripted(labels: dict[str, str]) -> Callable[[ChatRequest], str]:
    def reply(request: ChatRequest) -> str:
        system, user = request.messages[0].content, request.messages[1].content
        if "extract the memory items" in system:
            return json.dumps(items_reply(user, labels))
        return reply_for(system, user)

    return reply


@contextmanager
def slot_rule(match: str) -> Iterator[None]:
    """The slot comparison of a build: tmem's (normalised), normalised labels without synonyms, or none."""
    saved_norm, saved_key = slots.normalise_slot, slots.slot_key
    if match == "no-synonyms":
        slots.slot_key = lambda slot: (slot, "")  # type: ignore[assignment]
    elif match == "none":
        fresh = itertools.count()  # every item its own slot: nothing is linked
        slots.slot_key = lambda slot: (slot, str(next(fresh)))  # type: ignore[assignment]
    try:
        yield
    finally:
        slots.normalise_slot, slots.slot_key = saved_norm, saved_key


# ------------------------------------------------------------------------------------------ running


def flat_text(baselines: SpaceBaselines, turn_ids: Sequence[str]) -> str:
    by_id = {t.id: t for t in baselines.turns}
    return "\n".join(format_turn(by_id[t], dated=True) for t in turn_ids)


def evaluate(
    store: SQLiteStore,
    embedder: SentenceTransformerEmbedder,
    probes: list[Probe],
    counter: TokenCounter,
    layout: ContextLayout | None = None,
) -> dict[str, Any]:
    retriever = Retriever(store, embedder)
    counts: dict[tuple[str, int], list[int]] = {(s, b): [0, 0] for s in SYSTEMS for b in BUDGETS}
    tokens: dict[tuple[str, int], list[int]] = {(s, b): [] for s in SYSTEMS for b in BUDGETS}
    per_space: dict[tuple[str, str, int], list[int]] = {}
    misses: list[str] = []
    for space in dict.fromkeys(p.space for p in probes):
        baselines = SpaceBaselines(
            store, Scope.local(space), cached_vectorizer(store, Scope.local(space), embedder), counter
        )
        for probe in (p for p in probes if p.space == space):
            flat = baselines.packed_many(probe.question, probe.question, BUDGETS)
            for budget in BUDGETS:
                ctx = recall_context(
                    retriever,
                    Scope.local(space),
                    probe.question,
                    budget,
                    include_persona=False,
                    counter=counter,
                    layout=layout,
                )
                texts = {
                    "tmem": ctx.text,
                    "flat dense": flat_text(baselines, flat[budget]["dense"].turn_ids),
                    "flat hybrid": flat_text(baselines, flat[budget]["hybrid"].turn_ids),
                }
                for system, text in texts.items():
                    used = counter.count(text)
                    if used > budget:
                        raise SystemExit(f"{system}'s context for {probe.question!r} is {used} > {budget} tokens")
                    tokens[system, budget].append(used)
                    current, stale_first = score(text, probe)
                    counts[system, budget][0] += current
                    counts[system, budget][1] += stale_first
                    cell = per_space.setdefault((space, system, budget), [0, 0, 0])
                    cell[0] += 1
                    cell[1] += current
                    cell[2] += stale_first
                    if system == "tmem" and (stale_first or not current):
                        misses.append(
                            f"{budget} {space}: {probe.question} (current {current}, stale first {stale_first})"
                        )
    return {"counts": counts, "tokens": tokens, "per_space": per_space, "misses": misses}


async def build(
    mode: str, match: str, embedder: SentenceTransformerEmbedder, labels: dict[str, Any], tmp: Path
) -> SQLiteStore:
    store = SQLiteStore.open(tmp / f"{mode}-{match}.db")
    import_file(store, DATA)
    for space in json.loads(DATA.read_text(encoding="utf-8")):
        name = space["space"]
        if mode == "extractive":
            await build_extractive(store, Scope.local(name), embedder=embedder)
        else:
            with slot_rule(match):
                await build_space(
                    store,
                    Scope.local(name),
                    llm=scripted_llm(store, fn=scripted(labels.get(name, {}))),
                    embedder=embedder,
                )
    return store


def table(title: str, n: int, result: dict[str, Any]) -> list[str]:
    counts, tokens = result["counts"], result["tokens"]
    lines = [f"**{title}** ({n} probes): current value in the context / stale value first / mean cl100k tokens", ""]
    lines.append("| system | " + " | ".join(f"current @{b} | stale first @{b} | tokens @{b}" for b in BUDGETS) + " |")
    lines.append("|---|" + "---:|---:|---:|" * len(BUDGETS))
    for system in SYSTEMS:
        cells = []
        for b in BUDGETS:
            cur, stale = counts[system, b]
            mean = sum(tokens[system, b]) / max(1, len(tokens[system, b]))
            cells.append(f"{cur} ({100 * cur / n:.1f} %) | {stale} ({100 * stale / n:.1f} %) | {mean:.0f}")
        lines.append(f"| {system} | " + " | ".join(cells) + " |")
    per_space = result["per_space"]
    lines += ["", "Per conversation, current / stale first (probes): " + ", ".join(SYSTEMS), ""]
    lines.append("| conversation (probes) | " + " | ".join(f"@{b}" for b in BUDGETS) + " |")
    lines.append("|---|" + "---|" * len(BUDGETS))
    for space in dict.fromkeys(key[0] for key in per_space):
        size = per_space[space, SYSTEMS[0], BUDGETS[0]][0]
        cells = [
            " · ".join(f"{per_space[space, s, b][1]}/{per_space[space, s, b][2]}" for s in SYSTEMS) for b in BUDGETS
        ]
        lines.append(f"| {space} ({size}) | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the Markdown tables here (default: print them)")
    parser.add_argument("--modes", default="extractive,llm", help="builds to run: extractive, llm (comma-separated)")
    parser.add_argument("--match", default="normalised,no-synonyms,none", help="slot rules for the llm build")
    parser.add_argument("--misses", action="store_true", help="list tmem's misses under each table")
    parser.add_argument("--layout", default=None, help="tmem's context layout: date, rank or leadN (default: auto)")
    args = parser.parse_args()
    raw = json.loads(PROBES.read_text(encoding="utf-8"))
    probes = [Probe(**p) for p in raw["probes"]]
    labels = raw["slot_labels"]
    embedder = SentenceTransformerEmbedder()
    counter = token_counter("cl100k")
    out = [
        f"Update probes: {len(probes)} (bench/data/updates_probes.json), budgets {list(BUDGETS)} tokens "
        f"({counter.name}, tmem.util.tokens: the same counter for every system); tmem's layout `{args.layout or 'auto'}`.",
        "",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for mode in args.modes.split(","):
            for match in args.match.split(",") if mode == "llm" else ["-"]:
                store = asyncio.run(build(mode, match, embedder, labels, Path(tmp)))
                superseded = sum(
                    1 for s in store.list_spaces() for it in store.items(Scope.local(s.name)) if it.superseded_by
                )
                result = evaluate(
                    store, embedder, probes, counter, ContextLayout(**placement(args.layout)) if args.layout else None
                )
                title = "extractive build (offline)" if mode == "extractive" else f"scripted LLM build, slots {match}"
                out += [*table(f"{title}, {superseded} items superseded", len(probes), result), ""]
                if args.misses:
                    out += [f"- {m}" for m in result["misses"]] + [""]
                store.close()
                print("\n".join(out), flush=True)
    if args.out:
        args.out.write_text("\n".join(out) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
