"""One memory at a time: read, edit, delete and forget single items and turns (docs/agents.md).

:mod:`tmem.edit.items` reads and edits items (with their history); :mod:`tmem.edit.forget` forgets turns and items
with tombstones and leaves no copy of their text in the store.
"""

from tmem.edit.forget import ForgetReport, forget
from tmem.edit.items import ItemHistory, ItemVersion, get_item, item_history, update_item

__all__ = ["ForgetReport", "ItemHistory", "ItemVersion", "forget", "get_item", "item_history", "update_item"]
