"""Replies that use what was recalled (issue 29): ``tmem eval replies SPACE --probes FILE``.

For each cue probe (the format of ``queries.json`` beside the LLM-built dev memories: ``key``, ``query`` = the
trigger message, ``gold_turn_ids`` = the cue turns) and each budget, two contexts of at most that many tokens are
built from the same built space: tmem's (``Memory.context``'s packing, persona left out, laid out as asked) and flat
dense's (every raw turn ranked by cosine, whole turns best first while they fit, one dated turn a line in rank
order: :mod:`tmem.eval.baselines`). From each, the reply model writes a reply in the LoCoMo-Plus reply setting
(``memory_reply.txt``: it speaks as the other person, to the trigger's speaker). With ``judge``, one judge request
per probe and budget sees the cue, the trigger and both replies, as A and B in an order drawn from the probe's key
(so the judge cannot learn which system wrote which), and labels each CORRECT (shows awareness of the cue) or WRONG.

Everything goes through the LLM layer, so the batch protocol works as for a build: in batch mode every reply request
that is not cached is stored as pending, then the run stops with one :class:`tmem.errors.BatchPending` (stage
``answer.reply``); once the replies are imported, the judge requests follow (stage ``judge``). A rerun answers every
request already answered from the space's call log.

Who speaks: the trigger's speaker is the probe's ``speaker``, else the speaker of its first cue turn; the listener the
probe's ``listener``, else the space's other speaker. When: the probe's ``date`` (ISO), else after the last session.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tmem.answer.answerer import STAGE_REPLY, QuestionTime, reply_messages
from tmem.answer.budget import Searcher, recall
from tmem.answer.context import AnswerContext, format_turn
from tmem.answer.prompting import load_template
from tmem.answer.schemas import MemoryReply
from tmem.errors import BatchPending, InputError
from tmem.eval.baselines import SpaceBaselines
from tmem.eval.judge import STAGE_JUDGE
from tmem.eval.judge_schema import Label, parse_label
from tmem.eval.position import context_position, summary
from tmem.llm.base import LLM, Message
from tmem.models import Turn
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.layout import ContextLayout
from tmem.scope import Scope
from tmem.store.base import Store
from tmem.util.text import text_hash

SYSTEMS = ("tmem", "flat dense")
T = TypeVar("T")


class ReplyProbe(BaseModel):
    """One cue probe: the trigger message and the turns of the cue it should bring back."""

    model_config = ConfigDict(extra="ignore")

    key: str
    query: str = Field(min_length=1, description="The trigger message, without its speaker.")
    gold_turn_ids: list[str] = Field(min_length=1, description="The cue turns.")
    relation_type: str = ""
    speaker: str | None = None
    listener: str | None = None
    date: str | None = Field(
        default=None, description="When the trigger is said (ISO); default after the last session."
    )


def load_probes(path: Path, space: str) -> list[ReplyProbe]:
    """The cue probes of ``space`` in ``path``: a JSON object of space name -> probes (queries.json), or a list of
    probes. Probes of another kind (``kind`` other than ``cue``, e.g. LoCoMo questions) are skipped."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"--probes {path}: cannot read it as JSON ({exc}).") from exc
    if isinstance(raw, dict):
        if space not in raw:
            names = ", ".join(sorted(raw)) or "none"
            raise InputError(f"--probes {path} has no probes for space {space!r} (it has: {names}).")
        raw = raw[space]
    if not isinstance(raw, list):
        raise InputError(f"--probes {path}: expected a list of probes (or an object of space -> list).")
    probes = []
    for n, entry in enumerate(raw):
        if not isinstance(entry, dict):
            raise InputError(f"--probes {path}: probe {n} is not an object.")
        if entry.get("kind", "cue") != "cue":
            continue
        try:
            probes.append(ReplyProbe.model_validate(entry))
        except ValidationError as exc:
            raise InputError(f"--probes {path}: probe {n} ({entry.get('key', '?')}): {exc}") from exc
    if not probes:
        raise InputError(f"--probes {path}: no cue probes for space {space!r}.")
    return probes


class RepliesVerdict(BaseModel):
    """The judge's labels for reply A and reply B."""

    model_config = ConfigDict(extra="ignore")

    reasoning: str = ""
    a: Label
    b: Label

    @field_validator("a", "b", mode="before")
    @classmethod
    def _parse(cls, value: Any) -> Label:
        return parse_label(value)


class SideReply(BaseModel):
    """One system's context and the reply written from it."""

    model_config = ConfigDict(frozen=True)

    tokens: int = Field(description="Tokens of the context (the baselines' counter).")
    cue_in_context: bool
    position: float | None = Field(description="Where the cue first appears in the context (tmem.eval.position).")
    reply: str
    connects: bool | None = Field(default=None, description="The judge's label (None: not judged).")


class ReplyRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    space: str
    key: str
    budget: int
    trigger: str
    speaker: str
    listener: str
    systems: dict[str, SideReply]
    judge_reasoning: str | None = None


def _first_a(key: str, budget: int) -> bool:
    """Whether tmem's reply is shown as reply A to the judge (drawn from the probe, the same on every rerun)."""
    return int(text_hash(f"{key}|{budget}")[:8], 16) % 2 == 0


def judge_messages(cue: str, trigger: str, reply_a: str, reply_b: str, relation: str) -> list[Message]:
    template = load_template("tmem.eval", "judge_replies.txt")
    return template.render(cue=cue, trigger=trigger, reply_a=reply_a, reply_b=reply_b, relation=relation or "narrative")


async def _collect(calls: Sequence[Awaitable[T]], stage: str) -> list[T]:
    """Run every call; when some were queued for the batch protocol, one BatchPending for all of them."""
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    for o in outcomes:
        if isinstance(o, BaseException) and not isinstance(o, BatchPending):
            raise o
    pending = [o for o in outcomes if isinstance(o, BatchPending)]
    if pending:
        raise BatchPending(
            f"{len(pending)} {stage} request(s) were stored for the batch protocol: export them, run them, import the "
            "results, then rerun this command.",
            count=len(pending),
            stage=stage,
        )
    return [o for o in outcomes if not isinstance(o, BaseException)]


@dataclass(frozen=True)
class _Prepared:
    probe: ReplyProbe
    budget: int
    speaker: str
    listener: str
    when: QuestionTime
    contexts: dict[str, AnswerContext]
    sides: dict[str, SideReply]


def _speakers(probe: ReplyProbe, turns: dict[str, Turn], people: list[str]) -> tuple[str, str]:
    first = next((turns[t] for t in probe.gold_turn_ids if t in turns), None)
    speaker = probe.speaker or (first.speaker if first is not None else "")
    if not speaker:
        raise InputError(f"probe {probe.key}: none of its cue turns is in the space; give it a 'speaker'.")
    listener = probe.listener or next((p for p in people if p != speaker), "")
    if not listener:
        raise InputError(f"probe {probe.key}: the space has no second speaker; give the probe a 'listener'.")
    return speaker, listener


def _when(probe: ReplyProbe, store: Store, scope: Scope) -> QuestionTime:
    if probe.date is not None:
        try:
            return QuestionTime(at=datetime.fromisoformat(probe.date))
        except ValueError:
            raise InputError(f"probe {probe.key}: date {probe.date!r} is not an ISO date such as 2023-05-08") from None
    return QuestionTime.after_sessions(s.started_at for s in store.sessions(scope))


def _prepare(
    store: Store,
    searcher: Searcher,
    baselines: SpaceBaselines,
    probe: ReplyProbe,
    budgets: Sequence[int],
    config: RetrievalConfig | None,
    layout: ContextLayout | None,
) -> list[_Prepared]:
    scope = baselines.space
    turns = {t.id: t for t in baselines.turns}
    speaker, listener = _speakers(probe, turns, store.get_space(scope).speakers)
    when = _when(probe, store, scope)
    gold = set(probe.gold_turn_ids)
    flat = baselines.packed_many(probe.query, probe.key, budgets)
    out = []
    for budget in budgets:
        result, ctx = recall(
            searcher,
            scope,
            probe.query,
            budget,
            config,
            include_persona=False,
            counter=baselines.counter,
            layout=layout,
        )
        packed = flat[budget]["dense"]
        flat_text = "\n".join(format_turn(turns[t], dated=True) for t in packed.turn_ids)
        contexts = {
            "tmem": ctx.as_answer_context(),
            "flat dense": AnswerContext(
                evidence=flat_text or "(no memories were retrieved)",
                persona="",
                evidence_tokens=packed.tokens,
                persona_tokens=0,
                scene_ids=[],
                item_ids=[],
                turn_ids=list(packed.turn_ids),
            ),
        }
        sides = {
            "tmem": SideReply(
                tokens=ctx.tokens,
                cue_in_context=bool(gold.intersection(ctx.turn_ids)),
                position=context_position(ctx, result, gold, baselines.counter),
                reply="",
            ),
            "flat dense": SideReply(
                tokens=packed.tokens,
                cue_in_context=bool(gold.intersection(packed.turn_ids)),
                position=baselines.positions(packed, sorted(gold))[0],
                reply="",
            ),
        }
        out.append(_Prepared(probe, budget, speaker, listener, when, contexts, sides))
    return out


async def run_replies(
    store: Store,
    searcher: Searcher,
    baselines: SpaceBaselines,
    probes: Sequence[ReplyProbe],
    budgets: Sequence[int],
    reply_llm: LLM,
    judge_llm: LLM | None = None,
    *,
    config: RetrievalConfig | None = None,
    layout: ContextLayout | None = None,
) -> list[ReplyRecord]:
    """Both replies of every (probe, budget), judged when ``judge_llm`` is given (see the module docstring)."""
    scope = baselines.space
    turns = {t.id: t for t in baselines.turns}
    prepared = [p for probe in probes for p in _prepare(store, searcher, baselines, probe, budgets, config, layout)]

    async def write(p: _Prepared, system: str) -> str:
        messages = reply_messages(p.probe.query, p.contexts[system], p.when, speaker=p.speaker, listener=p.listener)
        out = await reply_llm.complete(messages, MemoryReply, stage=STAGE_REPLY, space=scope)
        return out.output.reply.strip()

    texts = await _collect([write(p, s) for p in prepared for s in SYSTEMS], STAGE_REPLY)
    replies = {(n, s): texts[n * len(SYSTEMS) + k] for n in range(len(prepared)) for k, s in enumerate(SYSTEMS)}
    verdicts: list[RepliesVerdict | None] = [None] * len(prepared)
    if judge_llm is not None:

        async def judge(n: int, p: _Prepared) -> RepliesVerdict:
            cue = "\n".join(format_turn(turns[t], dated=True) for t in p.probe.gold_turn_ids if t in turns)
            tmem, flat = replies[n, "tmem"], replies[n, "flat dense"]
            a, b = (tmem, flat) if _first_a(p.probe.key, p.budget) else (flat, tmem)
            messages = judge_messages(cue, p.probe.query, a, b, p.probe.relation_type)
            out = await judge_llm.complete(messages, RepliesVerdict, stage=STAGE_JUDGE, space=scope, temperature=0.0)
            return out.output

        judged = await _collect([judge(n, p) for n, p in enumerate(prepared)], STAGE_JUDGE)
        verdicts = list(judged)
    records = []
    for n, p in enumerate(prepared):
        verdict = verdicts[n]
        labels: dict[str, bool | None] = {s: None for s in SYSTEMS}
        if verdict is not None:
            first, second = (verdict.a, verdict.b) if _first_a(p.probe.key, p.budget) else (verdict.b, verdict.a)
            labels = {"tmem": first == "CORRECT", "flat dense": second == "CORRECT"}
        sides = {s: p.sides[s].model_copy(update={"reply": replies[n, s], "connects": labels[s]}) for s in SYSTEMS}
        records.append(
            ReplyRecord(
                space=scope.space,
                key=p.probe.key,
                budget=p.budget,
                trigger=p.probe.query,
                speaker=p.speaker,
                listener=p.listener,
                systems=sides,
                judge_reasoning=verdict.reasoning if verdict is not None else None,
            )
        )
    return records


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}" if whole else "-"


def report(records: Sequence[ReplyRecord]) -> str:
    """Per memory and budget: the cue in the context, replies that connect to it, and among the probes whose context
    holds the cue, the share whose reply connects (tmem / flat dense); with the cue's median position."""
    lines = [
        "| memory | budget | probes | cue in the context | reply connects to the cue | connects, given the cue in "
        "the context | cue's median position |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    keys = dict.fromkeys((r.space, r.budget) for r in records)
    for space, budget in keys:
        rows = [r for r in records if r.space == space and r.budget == budget]
        cells = []
        inside = {s: [r for r in rows if r.systems[s].cue_in_context] for s in SYSTEMS}
        cells.append(" / ".join(_pct(len(inside[s]), len(rows)) for s in SYSTEMS))
        judged = all(r.systems[s].connects is not None for r in rows for s in SYSTEMS)
        if judged:
            cells.append(" / ".join(_pct(sum(bool(r.systems[s].connects) for r in rows), len(rows)) for s in SYSTEMS))
            cells.append(
                " / ".join(_pct(sum(bool(r.systems[s].connects) for r in inside[s]), len(inside[s])) for s in SYSTEMS)
            )
        else:
            cells += ["not judged", "not judged"]
        meds = [summary(r.systems[s].position for r in rows)[0] for s in SYSTEMS]
        cells.append(" / ".join("-" if m is None else f"{m:.2f}" for m in meds))
        lines.append(f"| {space} | {budget} | {len(rows)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\nEach cell: tmem / flat dense (rank order), at equal tokens.\n"
