"""Persona per speaker (paper §3.1): standing traits aggregated over the whole conversation, each citing items.

The persona is recomputed from the speaker's current items (superseded ones left out) whenever a build runs; the
request is then identical when nothing changed, so the LLM layer's cache answers it at no cost. A speaker with more
than ``persona_items_per_call`` items is folded chunk by chunk: each later call sees the traits so far (``P1`` ..)
and returns the complete updated list, citing items (``I1`` ..) or earlier traits (whose items it inherits).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial
from typing import Literal

from pydantic import BaseModel, Field

from tmem.construct.common import StageRun, checked, chunks, render
from tmem.construct.options import BuildOptions
from tmem.llm.base import Message
from tmem.models import Item, Persona, PersonaTrait
from tmem.scope import Scope
from tmem.store.base import Store
from tmem.util.fence import Fenced, Trusted, fence, fence_inline

STAGE = "persona"
Category = Literal["identity", "occupation", "relationships", "preferences", "hobbies", "values", "health", "goals"]


class TraitOut(BaseModel):
    category: Category = Field(description="The trait's category.")
    value: str = Field(description="One short third-person statement of the standing trait.")
    support: list[str] = Field(description="References of the supporting items ('I3') or earlier traits ('P2').")


class PersonaReply(BaseModel):
    summary: str = Field(description="Two or three sentences profiling the speaker.")
    traits: list[TraitOut] = Field(description="The speaker's standing traits, each with its support.")


def _ref(value: str) -> str:
    return value.strip().strip("[]").upper()


def check_reply(reply: PersonaReply, items: dict[str, Item], prior: dict[str, PersonaTrait]) -> list[PersonaTrait]:
    """Validate against the request; returns traits with resolved item ids. Raises ValueError for the model."""
    if not reply.summary.strip():
        raise ValueError("summary is empty")
    out: list[PersonaTrait] = []
    for n, trait in enumerate(reply.traits):
        if not trait.value.strip():
            raise ValueError(f"traits[{n}].value is empty")
        if not trait.support:
            raise ValueError(f"traits[{n}] ({trait.value!r}) cites no support: add the item references it rests on")
        ids: list[str] = []
        for ref in trait.support:
            key = _ref(ref)
            if key in items:
                ids.append(items[key].id)
            elif key in prior:
                ids.extend(prior[key].item_ids)
            else:
                known = sorted([*items, *prior], key=lambda r: (r[0], int(r[1:])))
                raise ValueError(f"traits[{n}].support: {ref!r} is not a given reference ({', '.join(known[:8])}, ...)")
        out.append(
            PersonaTrait(
                category=trait.category, value=" ".join(trait.value.split()), item_ids=list(dict.fromkeys(ids))
            )
        )
    return out


def reply_model(items: dict[str, Item], prior: dict[str, PersonaTrait]) -> type[PersonaReply]:
    return checked(PersonaReply, lambda reply: check_reply(reply, items, prior))


def messages_for(speaker: str, items: dict[str, Item], prior: dict[str, PersonaTrait]) -> list[Message]:
    ref_of = {it.id: ref for ref, it in items.items()}

    def line(ref: str, it: Item) -> str:
        others = [ref_of[o] for o in it.conflicts_with if o in ref_of]
        return f"[{ref}] {it.text}" + (f" [conflicts with {', '.join(others)}]" if others else "")

    facts = "\n".join(line(ref, it) for ref, it in items.items())
    current: Fenced | Trusted
    if prior:
        current = Fenced(
            "Current persona (update it with the new facts and return the complete list):\n"
            + fence("current_persona", "\n".join(f"[{ref}] {t.category}: {t.value}" for ref, t in prior.items()))
        )
        fold_rule = Trusted(', or of current traits (e.g. "P2") that it keeps or refines')
    else:
        current, fold_rule = Trusted("Current persona: none yet."), Trusted("")
    return render(
        "persona.md",
        speaker=fence_inline("speaker", speaker),
        current=current,
        facts=fence("facts", facts),
        fold_rule=fold_rule,
    )


def speaker_items(items: Sequence[Item], speaker: str) -> list[Item]:
    return [it for it in items if it.superseded_by is None and it.speaker == speaker]


async def _persona_of(run: StageRun, speaker: str, items: list[Item], options: BuildOptions) -> Persona | None:
    """The speaker's persona; None when a call's replies stayed invalid (a failed unit: the stored persona stays as
    it was until a rerun). Chunks are folded in order (sequential plan), or read in parallel and then folded by one
    call over their traits (few-rounds plan: two rounds whatever the number of items)."""

    async def fold(part: list[Item], traits: list[PersonaTrait]) -> tuple[list[PersonaTrait], str]:
        refs = {f"I{k + 1}": it for k, it in enumerate(part)}
        prior = {f"P{k + 1}": t for k, t in enumerate(traits)}
        result = await run.ask(messages_for(speaker, refs, prior), reply_model(refs, prior))
        return check_reply(result.output, refs, prior), " ".join(result.output.summary.split())

    async def build() -> Persona:
        parts = chunks(items, options.persona_items_per_call)
        traits: list[PersonaTrait] = []
        summary = ""
        if options.plan_few_rounds and len(parts) > 1:
            outcomes = await asyncio.gather(*(fold(p, []) for p in parts), return_exceptions=True)
            errors = [o for o in outcomes if isinstance(o, BaseException)]
            if errors:
                raise errors[0]
            merged = [t for o in outcomes if not isinstance(o, BaseException) for t in o[0]]
            traits, summary = await fold([], merged)
        else:
            for part in parts:
                traits, summary = await fold(part, traits)
        return Persona(speaker=speaker, traits=traits, summary=summary)

    return await run.attempt(f"persona:{speaker}", [speaker], build)


async def run_persona(store: Store, space: Scope, run: StageRun, options: BuildOptions) -> None:
    items = store.items(space)
    speakers = list(store.get_space(space).speakers) or sorted({t.speaker for t in store.turns(space)})
    todo = [(s, speaker_items(items, s)) for s in speakers]
    todo = [(s, its) for s, its in todo if its]
    run.start(total=len(todo))
    personas = await run.gather([partial(_persona_of, run, s, its, options) for s, its in todo])
    with store.transaction():
        for persona in personas:
            if persona is None:
                continue
            store.put_persona(space, persona)
    run.report.updated += len(personas)
    run.close()
