"""The current value first: a context never shows a changed fact's older statement before its newer one.

Among the hits of one context, items *on one slot* (tmem.construct.slots) stated on different days form a group. A
statement is on a slot only when a model labelled it (an LLM build's item with a stored slot): extractive items and
raw turn hits carry no label and are never grouped, on any space (built offline, by a model, or never built).

Measured and left out (docs/retrieval.md, bench/results/updates.md): grouping unlabelled statements by the attribute
families their cue words name (``attributes_of`` of ``tmem/construct/slots.py`` at 66c9d49, removed since) put the offline LoCoMo and LoCoMo-Plus
budgeted tables under the flat baselines on extractive spaces (e5c4bc2), and on never-built spaces cost 1.9 / 2.2 /
3.3 / 7.3 points of LoCoMo evidence coverage at 500 / 1000 / 2000 / 4000 tokens (3 dev conversations); requiring
also that the group's newest statement say that something changed (a cue such as "now", "moved", "quit", "sold",
"switched", "no longer") still put LoCoMo-Plus under flat dense at 500 tokens (34.1 against 34.5) and narrowed the
LoCoMo margin over flat hybrid at 500 and 4000 tokens; grouping by shared content words cost more.

In a group the members trade places, newest first: the newest statement (latest date, then latest turn) takes the
place of the group's best-ranked member, the next newest the second place, and so on, so that the context spends its
budget where it would have; the older members are marked ``(earlier, until DATE)`` with the day of the newest one;
they enter only while the budget allows, like any hit, and never instead of the current one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import date
from typing import TYPE_CHECKING

from tmem.construct.slots import slot_key
from tmem.util.dates import format_day

if TYPE_CHECKING:
    from tmem.answer.budget import _Unit

__all__ = ["current_first"]

Slot = tuple[str, str]


def _statement(unit: _Unit) -> tuple[set[Slot], date, int] | None:
    """The slots a hit states, its date and its position in the conversation; None when it is no statement."""
    item = unit.item if unit.kind == "item" else None
    if item is None or item.slot is None or not item.date:
        return None  # no slot a model labelled: a raw turn, an extractive item, an item the model left unlabelled
    try:
        when = date.fromisoformat(item.date)
    except ValueError:
        return None
    return {slot_key(item.slot)}, when, item.seq


def _as_fact(unit: _Unit, until: date | None) -> _Unit:
    assert unit.fact is not None  # an item: its fact line
    mark = f" (earlier, until {format_day(until)})" if until is not None else ""
    return dataclasses.replace(unit, fact=unit.fact + mark)


def current_first(order: Sequence[_Unit]) -> list[_Unit]:
    """``order`` with each slot group's newest statement at the group's best place and its members as fact lines,
    the older ones marked earlier (see the module docstring)."""
    units = list(order)
    facts = {n: s for n, unit in enumerate(units) if (s := _statement(unit)) is not None}
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
