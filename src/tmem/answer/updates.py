"""The current value first: a context never shows a changed fact's older statement before its newer one.

Among the hits of one context, statements *on one slot* (tmem.construct.slots) made on different days form a group:

* an item with a stored slot (an LLM build) is on that slot;
* an item of an extractive build, and any raw turn, is on each attribute family its cue words name
  (:func:`tmem.construct.slots.attributes_of`), for its speaker.

In a group the newest statement (latest date, then latest turn) takes the place of the group's best-ranked member,
and every member enters the context as a fact line (a raw turn as ``- [date] Speaker: text``), so the current value
is read first. The older members follow it, each marked ``(earlier, until DATE)`` with the date of the newest one;
they enter only while the budget allows, like any hit, and never instead of the current one. A statement that is the
newest of one group is never marked earlier (``I ride my new bike to the office`` is current for the vehicle even
when the office is older news). docs/retrieval.md gives the rule, bench/results/updates.md what it measured.
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


def _expanded(order: Sequence[_Unit]) -> list[tuple[_Unit, bool]]:
    """The units, each scene excerpt preceded by its turns as turn units (flagged: they stay only if they state a
    changed fact; the excerpt then no longer repeats them)."""
    out: list[tuple[_Unit, bool]] = []
    for unit in order:
        if unit.kind == "scene":
            out.extend((dataclasses.replace(unit, kind="turn", id=t.id, turns=[t]), True) for t in unit.turns)
        out.append((unit, False))
    return out


def current_first(order: Sequence[_Unit]) -> list[_Unit]:
    """``order`` with each slot group's newest statement at the group's best place and its members as fact lines,
    the older ones marked earlier (see the module docstring)."""
    units = _expanded(order)
    names = sorted(
        {t.speaker for unit, _ in units for t in unit.turns}
        | {u.item.speaker for u, _ in units if u.item and u.item.speaker}
    )
    facts = {n: s for n, (unit, _) in enumerate(units) if (s := _statement(unit, names)) is not None}
    groups: dict[Slot, list[int]] = {}
    for n, (slots, _, _) in facts.items():
        for slot in slots:
            groups.setdefault(slot, []).append(n)
    place = list(range(len(units)))  # where each unit goes
    newest: set[int] = set()
    until: dict[int, date] = {}
    members: set[int] = set()
    for group in groups.values():
        if len({facts[n][1] for n in group}) < 2:
            continue  # one day's statements: nothing changed in between
        top = max(group, key=lambda n: (facts[n][1], facts[n][2], -n))
        newest.add(top)
        place[top] = min(place[top], min(group))
        latest = facts[top][1]
        for n in group:
            members.add(n)
            if facts[n][1] < latest:
                until[n] = max(until.get(n, latest), latest)
    out = []
    for n, (unit, derived) in enumerate(units):
        if n in members:
            unit = _as_fact(unit, None if n in newest else until.get(n))
        elif derived:
            continue  # a scene's turn that states no changed fact stays in its excerpt
        out.append((place[n], 0 if n in newest else 1, n, unit))
    out.sort(key=lambda entry: entry[:3])
    return [entry[3] for entry in out]
