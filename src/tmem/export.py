"""A whole space as plain records: ``Memory.export`` (a complete, readable backup)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tmem.models import (
    Item,
    ItemEdit,
    Persona,
    Scene,
    Session,
    Space,
    Topic,
    TopicSceneLink,
    Trigger,
    Turn,
)
from tmem.scope import Scope
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


def export_space(store: Store, space: Scope) -> SpaceExport:
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
