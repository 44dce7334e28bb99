"""Context assembly (paper §3.1): scenes as dated raw turns, then items, then the persona after the evidence.

The evidence part (scenes and items) is what the retrieval budget buys; the persona is ambient context appended
after it and counted separately. Scenes are written in chronological order (dates matter more to a reader than
retrieval ranks), items in rank order. Every count uses :func:`tmem.util.text.count_tokens`, the one measure all
reports and baselines share.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from tmem.models import Item, Persona, Turn
from tmem.retrieve.types import SearchResult
from tmem.util.dates import format_day, period
from tmem.util.text import count_tokens


def format_date(value: datetime) -> str:
    """``8 May 2023`` (no leading zero, English month; never locale dependent): the extractive items' format."""
    return format_day(value.date())


def format_turn(turn: Turn, *, dated: bool) -> str:
    """One raw turn as the QA model reads it, e.g. ``[8 May 2023] Caroline: text (shared an image: caption)``."""
    line = f"{turn.speaker}: {turn.text}"
    if turn.caption:
        line += f" (shared an image: {turn.caption})"
    return f"[{format_date(turn.time)}] {line}" if dated else line


def format_scene(title: str, turns: Sequence[Turn]) -> str:
    """A scene block: a header with its first date, then its turns, re-dated whenever the day changes."""
    if not turns:
        return f"Scene: {title}"
    lines = [f"Scene ({format_date(turns[0].time)}): {title}"]
    day = turns[0].time.date()
    for turn in turns:
        if turn.time.date() != day:
            day = turn.time.date()
            lines.append(f"-- {format_date(turn.time)} --")
        lines.append(format_turn(turn, dated=False))
    return "\n".join(lines)


def format_persona(persona: Persona) -> str:
    lines = [f"{persona.speaker}:"]
    if persona.summary:
        lines.append(f"  {persona.summary}")
    lines.extend(f"  - {t.category}: {t.value}" for t in persona.traits)
    return "\n".join(lines)


class AnswerContext(BaseModel):
    """The text handed to the QA model and what it is made of."""

    model_config = ConfigDict(frozen=True)

    evidence: str = Field(description="Scenes then items.")
    persona: str = Field(description="Persona notes, appended after the evidence (empty when none).")
    evidence_tokens: int
    persona_tokens: int
    scene_ids: list[str]
    item_ids: list[str]
    turn_ids: list[str] = Field(description="Turns whose raw text or distilled fact is in the evidence.")

    @property
    def text(self) -> str:
        if not self.persona:
            return self.evidence
        return f"{self.evidence}\n\nPersona notes (standing traits of the speakers):\n{self.persona}"

    @property
    def tokens(self) -> int:
        return self.evidence_tokens + self.persona_tokens


def format_item(item: Item, shown: dict[str, Item] | None = None) -> str:
    """An item as a reader sees it: its text, its date with its precision when the text does not already say it
    ("(when: summer 2022)", "(when: the week of 1-7 May 2023)", "(2023-05-07)" for a day whose year the text lacks),
    and a note when another fact disagrees with it (quoting the start of that fact when it is shown too)."""
    line = item.text
    if item.date and item.date_precision not in (None, "day"):
        when = period(item.date, item.date_end, item.date_precision)
        label = when.label if when is not None else f"{item.date} to {item.date_end or item.date}"
        if label not in line:
            line += f" (when: {label})"
    elif item.date and item.date[:4] not in line:
        line += f" ({item.date})"
    if item.conflicts_with:
        others = [shown[i] for i in item.conflicts_with if shown and i in shown]
        if others:
            quoted = "; ".join(f'"{" ".join(o.text.split()[:10])} ..."' for o in others)
            line += f" [disagrees with: {quoted}]"
        else:
            line += " [another statement in the conversation disagrees]"
    return line


def assemble_context(result: SearchResult, *, include_persona: bool = True) -> AnswerContext:
    """Build the QA context of a search result (scenes chronologically, then raw turn hits outside them in conversation
    order, then items by rank, then persona)."""
    scene_hits = sorted(result.scenes, key=lambda h: (h.scene.start, h.scene.seq))
    blocks = [format_scene(h.scene.title, h.turns) for h in scene_hits]
    shown_turns = {t.id for h in result.scenes for t in h.turns}
    raw = sorted((h.turn for h in result.turns if h.turn.id not in shown_turns), key=lambda t: t.seq)
    if raw:  # turn hits outside the scenes shown: turns no build holds yet, or the turn route's
        blocks.append("\n".join(["Turns:", *(format_turn(t, dated=True) for t in raw)]))
    if result.items:
        facts = ["Facts:"]
        shown = {hit.item.id: hit.item for hit in result.items}
        for hit in result.items:
            facts.append(f"- {format_item(hit.item, shown)}")
        blocks.append("\n".join(facts))
    evidence = "\n\n".join(blocks) if blocks else "(no memories were retrieved)"
    persona = ""
    if include_persona and result.personas:
        persona = "\n".join(format_persona(p) for p in result.personas)
    return AnswerContext(
        evidence=evidence,
        persona=persona,
        evidence_tokens=count_tokens(evidence),
        persona_tokens=count_tokens(persona),
        scene_ids=[h.scene.id for h in result.scenes],
        item_ids=[h.item.id for h in result.items],
        turn_ids=result.turn_ids(),
    )
