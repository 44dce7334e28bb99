"""Item edits (correct, delete, forget) and an item's history, through the ``Memory`` item operations.

The operations (``Memory.update_item``, ``delete_item``, ``forget``, ``history``) are being added to the facade on
another branch; until they are on main the viewer shows the forms disabled with :data:`NOTE`, and a submitted form
is refused with the same words (never a silent no-op).
"""

from __future__ import annotations

from typing import Literal

from tmem.errors import ConfigError
from tmem.memory import Memory

Action = Literal["correct", "delete", "forget"]
ACTIONS: tuple[Action, ...] = ("correct", "delete", "forget")
AVAILABLE = False
NOTE = (
    "Editing is not available in this version: correct, delete and forget arrive with the Memory item operations "
    "(update_item, delete_item, forget, history). Until then the forms are shown but disabled."
)


def history(memory: Memory, key: str, item_id: str) -> list[dict[str, str]] | None:
    """The item's recorded changes, oldest first; None while the facade keeps no history."""
    del memory, key, item_id
    return None


def apply(memory: Memory, key: str, item_id: str, action: Action, text: str = "") -> str:
    """Run one edit and return what to tell the user; ConfigError with :data:`NOTE` while edits are unavailable."""
    del memory, key, item_id, action, text
    raise ConfigError(NOTE)
