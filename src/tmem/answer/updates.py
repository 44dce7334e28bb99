"""The current value first: a context never shows a changed fact's older statement before its newer one.

Among the hits of one context, statements *on one slot* (tmem.construct.slots) made on different days form a group:

* an item with a stored slot (an LLM build) is on that slot;
* an item of an extractive build, and a raw turn hit, when it is a first-person statement, is on each attribute
  family its cue words name (:func:`tmem.construct.slots.attributes_of`), for its speaker.

Measured and left out (bench/results/updates.md): also grouping by shared content words ("my Canon camera", "I sold
the Canon") and splitting scene excerpts into their turns halved stale-first contexts on the update dev set, but
cost 7-10 points of LoCoMo evidence coverage at 500 and 1000 tokens on conv-26 (every shared word made a group).

In a group the members trade places, newest first: the newest statement (latest date, then latest turn) takes the
place of the group's best-ranked member, the next newest the second place, and so on, so that the context spends its
budget where it would have; every member enters the context as a fact line (a raw turn as ``- [date] Speaker:
text``), so the current value is read first. The older members follow it, each marked ``(earlier, until DATE)``
with the day of the newest one; they enter only while the budget allows, like any hit, and never instead of the
current one. A statement on several slots is placed by its best-ranked group only. docs/retrieval.md gives the rule, bench/results/updates.md what it measured.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import date
from typing import TYPE_CHECKING

from tmem.answer.context import format_turn
from tmem.construct.slots import attributes_of, slot_key, subject_of
from tmem.models import BuildMode
from tmem.util.dates import format_day

if TYPE_CHECKING:
    from tmem.answer.budget import _Unit

__all__ = ["current_first"]

Slot = tuple[str, str]


def _quoted(text: str) -> str:
    """What an extractive item quotes (``On 8 May 2023, Dana said: "..."``), without the frame."""
    _, sep, rest = text.partition(' said: "')
    return rest if sep else text


def _statement(unit: _Unit, names: Sequence[str]) -> tuple[set[Slot], date, int] | None:
    """The slots a hit states, its date and its position in the conversation; None when it is no statement."""
    if unit.kind == "item" and unit.item is not None:
        item = unit.item
        if item.slot is not None:
            slots = {slot_key(item.slot)}
        elif item.mode is BuildMode.EXTRACTIVE and item.speaker:
            slots = {(subject_of(item.speaker), a) for a in attributes_of(_quoted(item.text), names)}
        else:
            return None  # an LLM item without a slot: the model said it is not a value that changes
        if not item.date or not slots:
            return None
        try:
            when = date.fromisoformat(item.date)
        except ValueError:
            return None
        return slots, when, item.seq
    if unit.kind == "turn" and unit.turns:
        turn = unit.turns[0]
        slots = {(subject_of(turn.speaker), a) for a in attributes_of(turn.text, names)}
        return (slots, turn.time.date(), turn.seq) if slots else None
    return None


def _as_fact(unit: _Unit, until: date | None) -> _Unit:
    mark = f" (earlier, until {format_day(until)})" if until is not None else ""
    if unit.kind == "item":
        assert unit.fact is not None
        return dataclasses.replace(unit, fact=unit.fact + mark)
    turn = unit.turns[0]
    return dataclasses.replace(unit, fact=f"- {format_turn(turn, dated=True)}{mark}", fact_turns=[turn.id])


def current_first(order: Sequence[_Unit]) -> list[_Unit]:
    """``order`` with each slot group's newest statement at the group's best place and its members as fact lines,
    the older ones marked earlier (see the module docstring)."""
    units = list(order)
    names = sorted(
        {t.speaker for unit in units for t in unit.turns} | {u.item.speaker for u in units if u.item and u.item.speaker}
    )
    facts = {n: s for n, unit in enumerate(units) if (s := _statement(unit, names)) is not None}
    groups: dict[Slot, list[int]] = {}
    for n, (slots, _, _) in facts.items():
        for slot in sorted(slots):  # a fixed order: groups that tie on their best member keep it (no hash order)
            groups.setdefault(slot, []).append(n)
    place = list(range(len(units)))  # where each unit goes
    newest: set[int] = set()
    until: dict[int, date] = {}
    members: set[int] = set()
    for group in sorted(groups.values(), key=min):
        group = [n for n in group if n not in members]  # a statement is placed by its best-ranked group only
        if len({facts[n][1] for n in group}) < 2:
            continue  # one day's statements: nothing changed in between
        by_age = sorted(group, key=lambda n: (facts[n][1], facts[n][2], -n), reverse=True)
        top = by_age[0]
        newest.add(top)
        latest = facts[top][1]
        # the members trade places: the newest takes the best-ranked member's place, and so on down by age, so the
        # context spends its budget where it would have, only in a newest-first order
        for n, at in zip(by_age, sorted(group), strict=True):
            place[n] = at
            members.add(n)
            if facts[n][1] < latest:
                until[n] = latest
    out = []
    for n, unit in enumerate(units):
        if n in members:
            unit = _as_fact(unit, None if n in newest else until.get(n))
        out.append((place[n], 0 if n in newest else 1, n, unit))
    out.sort(key=lambda entry: entry[:3])
    return [entry[3] for entry in out]
