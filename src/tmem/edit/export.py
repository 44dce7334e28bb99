"""A space as plain records (``Memory.export``), and the item filters of ``Memory.list_items``' keyword arguments."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tmem.edit.listing import ItemFilters
from tmem.errors import InputError
from tmem.models import Item, ItemEdit, Persona, Scene, Session, Space, Topic, TopicSceneLink, Trigger, Turn
from tmem.store.base import Store


class SpaceExport(BaseModel):
    """Everything one space holds, as plain records (``Memory.export``)."""

    model_config = ConfigDict(frozen=True)

    format: str = "tmem-space-export/1"
    space: Space
    sessions: list[Session]
    turns: list[Turn]
    scenes: list[Scene]
    topics: list[Topic]
    topic_links: list[TopicSceneLink]
    items: list[Item]
    triggers: list[Trigger]
    personas: list[Persona]
    build_state: dict[str, str]
    item_edits: list[ItemEdit] = Field(default_factory=list)


def export_space(store: Store, space: str) -> SpaceExport:
    return SpaceExport(
        space=store.get_space(space),
        sessions=store.sessions(space),
        turns=store.turns(space),
        scenes=store.scenes(space),
        topics=store.topics(space),
        topic_links=store.topic_links(space),
        items=store.items(space),
        triggers=store.triggers(space),
        personas=store.personas(space),
        build_state=store.state_keys(space),
        item_edits=store.item_edits(space),
    )


def item_filters(**fields: object) -> ItemFilters:
    """``ItemFilters`` from keyword arguments; a malformed one is an InputError naming the argument."""
    try:
        return ItemFilters.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "filters"
        raise InputError(f"Invalid item filter {where}: {first['msg']}.") from None
