"""Listing a space's items a page at a time, with filters (``Memory.list_items``; ``GET .../items`` over HTTP).

Filters combine with AND: ``kind``; ``speaker`` (exact); a date range on the item's own date (``since`` /
``until``, inclusive, over the period ``date``..``date_end`` the item names: an item is kept when its period overlaps
the range; an undated item is left out as soon as a bound is given); ``text`` (case-insensitive substring of the
text, or the item's id); ``live`` (leave out items a newer item superseded); ``metadata`` (the item's source turns'
metadata, ``{"key": value}`` or ``{"key": [values]}``: the rule of :mod:`tmem.retrieve.filters`, a condition holds
when any source turn's value matches). Each page gives every item's inherited metadata (``ItemPage.metadata``). Items come in arrival order
(``Item.seq``); ``offset`` and ``limit`` select the page and ``total`` counts every match.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from pydantic import BaseModel, ConfigDict, Field, ValidationError, computed_field, model_validator

from tmem.errors import InputError
from tmem.models import Item, ItemKind, MetaValue, Turn
from tmem.retrieve.filters import MemoryFilter, inherited_metadata, lookup_turns
from tmem.scope import Scope
from tmem.store.base import Store

MAX_PAGE = 500


class ItemFilters(BaseModel):
    """What ``list_items`` keeps: every field optional, all of them must hold."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ItemKind | None = Field(default=None, description="atomic or connected.")
    speaker: str | None = Field(default=None, description="The item's speaker, exactly.")
    since: date | None = Field(default=None, description="Items whose period ends on or after this day.")
    until: date | None = Field(default=None, description="Items whose period starts on or before this day.")
    text: str | None = Field(default=None, description="Case-insensitive substring of the text, or the item's id.")
    live: bool = Field(default=False, description="Leave out items that a newer item superseded.")
    metadata: dict[str, MetaValue | list[MetaValue]] | None = Field(
        default=None, description='Source turns\' metadata: {"key": value} or {"key": [values]} (any source turn).'
    )

    @model_validator(mode="after")
    def _ordered(self) -> ItemFilters:
        if self.since is not None and self.until is not None and self.since > self.until:
            raise ValueError(f"since ({self.since}) is after until ({self.until}); swap them")
        return self

    def keep(self, item: Item) -> bool:
        if self.kind is not None and item.kind != self.kind:
            return False
        if self.speaker is not None and item.speaker != self.speaker:
            return False
        if self.live and item.superseded_by is not None:
            return False
        if self.text:
            needle = self.text.casefold()
            if needle not in item.text.casefold() and self.text != item.id:
                return False
        if self.since is None and self.until is None:
            return True
        start = _day(item.date)
        if start is None:
            return False
        end = _day(item.date_end) or start
        return (self.since is None or end >= self.since) and (self.until is None or start <= self.until)


class ItemPage(BaseModel):
    """One page of a space's items."""

    model_config = ConfigDict(frozen=True)

    space: str
    items: list[Item]
    total: int = Field(ge=0, description="How many items match the filters (on every page).")
    offset: int = Field(ge=0)
    limit: int = Field(ge=1)
    metadata: dict[str, dict[str, MetaValue]] = Field(
        default_factory=dict,
        description="Each item's metadata inherited from its source turns (latest turn wins a conflicting key).",
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def next_offset(self) -> int | None:
        """The offset of the next page, None on the last one."""
        following = self.offset + len(self.items)
        return following if following < self.total else None


def _day(value: str | None) -> date | None:
    if not value:
        return None
    try:
        return date.fromisoformat(value[:10])
    except ValueError:
        return None


def list_items(store: Store, space: Scope, filters: ItemFilters, *, offset: int = 0, limit: int = 50) -> ItemPage:
    """The page ``offset:offset+limit`` of the items of ``space`` that ``filters`` keeps, in arrival order."""
    if offset < 0 or not 1 <= limit <= MAX_PAGE:
        raise InputError(f"Page with offset >= 0 and limit between 1 and {MAX_PAGE} (got offset={offset}, {limit=}).")
    store.get_space(space)
    kept = [i for i in sorted(store.items(space), key=lambda i: (i.seq, i.id)) if filters.keep(i)]
    if filters.metadata:
        where = MemoryFilter(metadata=filters.metadata)
        sources = source_turns(store, space, kept)
        kept = [i for i in kept if where.keeps_sources(sources[i.id])]
    page = kept[offset : offset + limit]
    inherited = {item_id: inherited_metadata(turns) for item_id, turns in source_turns(store, space, page).items()}
    return ItemPage(
        space=space.space,
        items=page,
        total=len(kept),
        offset=offset,
        limit=limit,
        metadata={k: v for k, v in inherited.items() if v},
    )


def source_turns(store: Store, space: Scope, items: Sequence[Item]) -> dict[str, list[Turn]]:
    """Each item's stored source turns (its own turn ids, else its scenes' turns), by item id in ``items``' order."""
    scene_ids = sorted({s for i in items if not i.turn_ids for s in i.scene_ids})
    scene_turns = {s.id: s.turn_ids for s in store.scenes(space, scene_ids)} if scene_ids else {}
    ids = {i.id: list(i.turn_ids) or [t for s in i.scene_ids for t in scene_turns.get(s, [])] for i in items}
    turns = lookup_turns(store, space, (t for tids in ids.values() for t in tids))
    return {item_id: [turns[t] for t in tids if t in turns] for item_id, tids in ids.items()}


def item_filters(**fields: object) -> ItemFilters:
    """``ItemFilters`` from keyword arguments (``Memory.list_items``'); a malformed one is an InputError naming the
    argument."""
    try:
        return ItemFilters.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "filters"
        raise InputError(f"Invalid item filter {where}: {first['msg']}.") from None
