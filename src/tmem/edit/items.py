"""Reading and editing single items.

* ``update_item`` replaces an item's text, keeps the old text in the item's history (an :class:`ItemEdit` with the
  wall-clock time of the edit, bookkeeping only) and regenerates the item's triggers from the new text: Entity
  triggers extractively for a memory built without an LLM; with an LLM, the item-trigger stage (Entity + Bridge) for
  that one item. A memory built with an LLM but edited without one loses the item's triggers until the next build,
  whose item-trigger stage regenerates them (it sends every item without triggers).
* Edits outlive builds: after every build, each edited item still present gets its latest edited text back
  (:func:`reapply_edits`), so neither an incremental build that re-extracts a scene nor a rebuild undoes an edit.
* ``item_history`` returns the item's versions (extracted text, then each edit) and its supersession chain (older
  items it replaces and newer ones replacing it), each with its conversation date.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field

from tmem.construct.extractive.items import entity_triggers
from tmem.construct.options import BuildOptions
from tmem.construct.triggers import ITEM_STAGE, item_messages, item_reply_model, item_trigger_records
from tmem.errors import InputError, NotFoundError
from tmem.ingest.limits import MAX_TURN_CHARS, check_text
from tmem.llm.base import LLM
from tmem.models import BuildMode, Item, ItemEdit, Trigger, Turn
from tmem.scope import Scope
from tmem.store.base import Store
from tmem.util.state import STATE_EDITS, STATE_MODE


class ItemVersion(BaseModel):
    model_config = ConfigDict(frozen=True)

    version: int = Field(description="0: the text construction extracted; 1, 2, ...: edits.")
    text: str
    change: str = Field(description="'extracted' or 'edited'.")
    at: datetime | None = Field(default=None, description="Wall-clock time of an edit (None for the extraction).")


class ItemHistory(BaseModel):
    model_config = ConfigDict(frozen=True)

    item: Item
    versions: list[ItemVersion]
    supersedes: list[Item] = Field(description="Older items this one replaces, nearest first (each has its date).")
    superseded_by: list[Item] = Field(description="Newer items replacing this one, nearest first.")


def storable(ids: Sequence[str]) -> list[str]:
    """The ids that can name a stored record: one holding a NUL names nothing (every input refuses NUL, and
    PostgreSQL cannot even compare one), so it is not looked up: NotFound on every backend (issue 33)."""
    return [i for i in ids if i and "\x00" not in i]


def get_item(store: Store, space: Scope, item_id: str) -> Item:
    store.get_space(space)
    found = store.items(space, [item_id]) if storable([item_id]) else []
    if not found:
        raise NotFoundError(
            "Space {space!r} has no item {name!r}; list items with `tmem show {space} --items`.",
            agent="Space {space!r} has no item {name!r}; the list_memories tool lists its items with their ids.",
            kind="item",
            name=item_id,
            space=space,
        )
    return found[0]


def bump_edits(store: Store, space: Scope) -> None:
    """Change a state key so every process's cached search index of the space is rebuilt."""
    store.set_state(space, STATE_EDITS, str(int(store.get_state(space, STATE_EDITS) or 0) + 1))


async def regenerate_triggers(store: Store, space: Scope, item: Item, llm: LLM | None) -> list[Trigger]:
    """Replace the item's triggers by ones made from its current text (see the module docstring)."""
    llm_mode = store.get_state(space, STATE_MODE) == BuildMode.LLM.value or item.mode is BuildMode.LLM
    triggers: list[Trigger] = []
    if llm_mode and llm is not None:
        n = BuildOptions().item_triggers_n
        result = await llm.complete(
            item_messages([item], ["I1"], n), item_reply_model(["I1"], n), stage=ITEM_STAGE, space=space
        )
        triggers = item_trigger_records(item, result.output.items[0].triggers)
    elif not llm_mode:
        speakers = store.get_space(space).speakers
        text_turn = Turn(
            id=item.turn_ids[0] if item.turn_ids else item.id, session_id="-", seq=0, speaker=item.speaker or "-",
            text=item.text, time=datetime(2000, 1, 1),  # only the text is read
        )  # fmt: skip
        triggers = entity_triggers(item, text_turn, {}, speakers)
    with store.transaction():
        store.delete_triggers(space, [item.id])
        store.put_triggers(space, triggers)
    return triggers


async def update_item(
    store: Store, space: Scope, item_id: str, text: str, *, llm: LLM | None, at: datetime | None = None
) -> Item:
    """Replace the text of ``item_id``; returns the updated item."""
    new_text = " ".join(text.split())
    if not new_text:
        raise InputError("The new item text is empty; send the corrected fact (use delete_item to remove it).")
    problem = check_text(new_text, "an item", MAX_TURN_CHARS)
    if problem:
        raise InputError(f"The new item text {problem}")
    item = get_item(store, space, item_id)
    if new_text == item.text:
        return item
    edits = store.item_edits(space, [item_id])
    edit = ItemEdit(
        item_id=item_id,
        version=len(edits) + 1,
        old_text=item.text,
        new_text=new_text,
        at=at or datetime.now(UTC).replace(tzinfo=None),  # bookkeeping time of the edit, never a memory date
    )
    updated = item.model_copy(update={"text": new_text})
    with store.transaction():
        store.add_item_edit(space, edit)
        store.put_items(space, [updated])
    try:
        await regenerate_triggers(store, space, updated, llm)
    finally:  # after the triggers: an index rebuilt on this signal sees the whole edit (or the text alone)
        bump_edits(store, space)
    return updated


async def reapply_edits(store: Store, space: Scope, *, llm: LLM | None) -> int:
    """Give every edited item still present its latest edited text (after a build). Returns the items changed."""
    latest: dict[str, str] = {}
    for edit in store.item_edits(space):
        latest[edit.item_id] = edit.new_text
    if not latest:
        return 0
    changed = 0
    for item in store.items(space, sorted(latest)):
        if item.text != latest[item.id]:
            updated = item.model_copy(update={"text": latest[item.id]})
            store.put_items(space, [updated])
            await regenerate_triggers(store, space, updated, llm)
            changed += 1
    if changed:
        bump_edits(store, space)
    return changed


def _chain(store: Store, space: Scope, start: str | None, attr: str) -> list[Item]:
    out: list[Item] = []
    seen: set[str] = set()
    current = start
    while current is not None and current not in seen:
        seen.add(current)
        found = store.items(space, [current])
        if not found:
            break
        out.append(found[0])
        current = getattr(found[0], attr)
    return out


def item_history(store: Store, space: Scope, item_id: str) -> ItemHistory:
    item = get_item(store, space, item_id)
    edits = store.item_edits(space, [item_id])
    versions = [ItemVersion(version=0, text=edits[0].old_text if edits else item.text, change="extracted")]
    versions += [ItemVersion(version=e.version, text=e.new_text, change="edited", at=e.at) for e in edits]
    return ItemHistory(
        item=item,
        versions=versions,
        supersedes=_chain(store, space, item.supersedes, "supersedes"),
        superseded_by=_chain(store, space, item.superseded_by, "superseded_by"),
    )
