"""Item edits (correct, delete, forget) and an item's history, through the ``Memory`` item operations.

* correct: ``Memory.update_item`` - new text, triggers regenerated, the old text kept in the item's history;
* delete: ``Memory.delete_item`` - the item is removed for good (tombstoned, erased from disk); its turns stay;
* forget: ``Memory.forget`` with the item and its source turns - the item and the words it came from are erased,
  with every other record derived from those turns.
"""

from __future__ import annotations

from typing import Literal

from tmem.edit import ItemHistory
from tmem.errors import InputError
from tmem.memory import Memory

Action = Literal["correct", "delete", "forget"]
ACTIONS: tuple[Action, ...] = ("correct", "delete", "forget")
AVAILABLE = True
NOTE = ""
MAX_TEXT = 4000


def history(memory: Memory, key: str, item_id: str) -> ItemHistory:
    """The item's versions (extracted, then each edit) and its supersession chain."""
    return memory.history(key, item_id)


def apply(memory: Memory, key: str, item_id: str, action: Action, text: str = "") -> tuple[str, bool]:
    """Run one edit; returns what to tell the user and whether the item still exists."""
    if action == "correct":
        text = text.strip()
        if not text:
            raise InputError("The corrected text is empty; write the fact as it should read, or delete the item.")
        if len(text) > MAX_TEXT:
            raise InputError(f"The corrected text is {len(text):,} characters; keep it under {MAX_TEXT:,}.")
        memory.update_item(key, item_id, text)
        return (
            "Corrected; the previous text is kept in its history. Its triggers were regenerated from the new text "
            "(by the construction LLM when one is configured, else none).",
            True,
        )
    if action == "delete":
        report = memory.delete_item(key, item_id)
        return f"Deleted item {item_id} ({len(report.items_forgotten)} item removed); its source turns stay.", False
    item = memory.get_item(key, item_id)
    report = memory.forget(key, turn_ids=item.turn_ids, item_ids=[item_id])
    return (
        f"Forgotten: {len(report.items_forgotten)} items and {len(report.turns_forgotten)} turns erased "
        f"({len(report.scenes_rewritten)} scenes rewritten, {len(report.scenes_deleted)} deleted)"
        + ("." if report.erased else "; erasure pending (finished once another connection's open read ends)."),
        False,
    )
