"""Item edits (correct, delete, forget) and an item's history, through the ``Memory`` item operations.

* correct: ``Memory.update_item`` - new text, triggers regenerated, the old text kept in the item's history;
* delete: ``Memory.delete_item`` - the item is removed for good (tombstoned, erased from disk); its turns stay;
* forget: ``Memory.forget`` with the item and its source turns - the item and the words it came from are erased,
  with every other record derived from those turns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tmem.edit import ItemHistory
from tmem.errors import InputError
from tmem.memory import Memory
from tmem.models import Item, Turn
from tmem.scope import Scope
from tmem.viewer.pages import Records

Action = Literal["correct", "delete", "forget"]
ACTIONS: tuple[Action, ...] = ("correct", "delete", "forget")
AVAILABLE = True
NOTE = ""
MAX_TEXT = 4000


def history(memory: Memory, key: Scope, item_id: str) -> ItemHistory:
    """The item's versions (extracted, then each edit) and its supersession chain."""
    return memory.history(key, item_id)


# What the page shown after an edit says: ``?done=`` names one of these (any other value shows nothing, so a link
# cannot make the viewer display text of its choosing).
DONE = {
    "corrected": "Corrected; the previous text is kept in its history. Its triggers were regenerated from the new "
    "text (by the construction LLM when one is configured, else none).",
    "deleted": "Deleted the item for good; its source turns stay.",
    "forgotten": "Forgotten: the item, the turns it came from and everything built from them were erased.",
    "forgotten-pending": "Forgotten: the item, the turns it came from and everything built from them were removed; "
    "erasure from the database file is pending (finished once another connection's open read ends).",
}
CONFIRMED: tuple[Action, ...] = ("delete", "forget")  # edits that erase: the viewer shows what goes and asks once


@dataclass(frozen=True)
class Erasure:
    """What a delete or forget will erase, shown before it is confirmed."""

    item: Item
    turns: list[Turn]
    other_items: list[Item]  # further items citing those turns: forgotten with them


def preview(records: Records, item: Item, action: Action) -> Erasure:
    """What ``action`` on ``item`` erases: the item; for forget also its source turns and every other item that
    cites one of them (scenes holding the turns are rewritten from their other turns)."""
    if action != "forget":
        return Erasure(item=item, turns=[], other_items=[])
    turns = set(item.turn_ids)
    return Erasure(
        item=item,
        turns=[records.turn[t] for t in item.turn_ids if t in records.turn],
        other_items=[i for i in records.export.items if i.id != item.id and turns.intersection(i.turn_ids)],
    )


def apply(memory: Memory, key: Scope, item_id: str, action: Action, text: str = "") -> tuple[str, bool]:
    """Run one edit; returns its :data:`DONE` code and whether the item still exists."""
    if action == "correct":
        text = text.strip()
        if not text:
            raise InputError("The corrected text is empty; write the fact as it should read, or delete the item.")
        if len(text) > MAX_TEXT:
            raise InputError(f"The corrected text is {len(text):,} characters; keep it under {MAX_TEXT:,}.")
        memory.update_item(key, item_id, text)
        return "corrected", True
    if action == "delete":
        memory.delete_item(key, item_id)
        return "deleted", False
    item = memory.get_item(key, item_id)
    report = memory.forget(key, turn_ids=item.turn_ids, item_ids=[item_id])
    return ("forgotten" if report.erased else "forgotten-pending"), False
