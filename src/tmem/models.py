"""Typed records of a tmem memory (paper §3.1) shared by every stage.

All timestamps are naive ``datetime`` values on the conversation's own wall clock: LoCoMo dates carry no zone, and
an ISO 8601 time with a zone is converted to UTC and stored without it (see docs/design-decisions.md). Dates always
come from the conversation, never from the machine's clock.

Identifiers are strings that are stable within a space: turn ids come from the data where it has them (LoCoMo's
``D3:7``); node ids are derived by the stage that makes them from their content, so that a rerun produces the same ids.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Record(BaseModel):
    """Base of all stored records: immutable, strict about unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


# --------------------------------------------------------------------------------------------- conversation input


class Space(Record):
    """One independent memory (one user's history, or one LoCoMo conversation)."""

    name: str
    speakers: list[str] = Field(default_factory=list, description="Speaker names in order of first appearance.")


MetaValue = str | int | float | bool  # a metadata value (tmem.ingest.metadata holds the limits)


class Turn(Record):
    """One utterance."""

    id: str = Field(description="Stable id within the space, e.g. LoCoMo's 'D3:7'.")
    session_id: str
    seq: int = Field(description="Global position of the turn in the space (0-based, arrival order).")
    speaker: str
    text: str
    time: datetime = Field(description="When the turn was said; the session start when the data has no turn time.")
    caption: str | None = Field(default=None, description="Caption of an image shared with the turn.")
    metadata: dict[str, MetaValue] = Field(
        default_factory=dict, description="The caller's labels of the message (docs/agents.md, metadata and filters)."
    )


class Session(Record):
    """A dated stretch of conversation as it arrived."""

    id: str = Field(description="Stable id within the space, e.g. 'session_3' for LoCoMo.")
    seq: int = Field(description="Position of the session in the space (0-based, by arrival).")
    started_at: datetime
    content_hash: str = Field(description="Hash of the session's turns; re-importing the same content is a no-op.")


class SessionInput(BaseModel):
    """A session as produced by an ingest reader, before it is stored."""

    model_config = ConfigDict(extra="forbid")

    id: str
    started_at: datetime
    turns: list[TurnInput]


class TurnInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    speaker: str
    text: str
    time: datetime | None = None
    caption: str | None = None


SessionInput.model_rebuild()


# --------------------------------------------------------------------------------------------- memory nodes


class BuildMode(StrEnum):
    LLM = "llm"
    EXTRACTIVE = "extractive"


class Scene(Record):
    """A cohesive, event-closed stretch of dialogue."""

    id: str
    seq: int = Field(description="Arrival order of the scene within the space.")
    title: str
    summary: str
    narrative: str = Field(description="Third-person narrative with absolute dates (empty in extractive mode).")
    turn_ids: list[str] = Field(min_length=1, description="The scene's turns in order; each turn is in one scene.")
    start: datetime
    end: datetime
    mode: BuildMode = BuildMode.LLM


class Topic(Record):
    """A topic label grown from the data; scopes item extraction and pre-filters scenes at retrieval."""

    id: str
    seq: int
    label: str
    description: str = ""


class TopicSceneLink(Record):
    topic_id: str
    scene_id: str


class ItemKind(StrEnum):
    ATOMIC = "atomic"
    CONNECTED = "connected"


class Item(Record):
    """A self-contained fact extracted from one (atomic) or several (connected) scenes."""

    id: str
    text: str = Field(description="Self-contained statement with speaker and absolute date.")
    kind: ItemKind
    scene_ids: list[str] = Field(min_length=1, description="Source scenes; exactly one for an atomic item.")
    topic_id: str | None = Field(default=None, description="Topic whose extraction call produced the item.")
    speaker: str | None = None
    date: str | None = Field(
        default=None, description="ISO date (YYYY-MM-DD) the fact refers to, when known: the first day of its period."
    )
    date_end: str | None = Field(
        default=None, description="Last day (ISO, inclusive) of the period the date names; None for a day."
    )
    date_precision: str | None = Field(
        default=None,
        description="What the date names: day, week, month, season, year or range (tmem.util.dates); None when "
        "the item has no date.",
    )
    conflicts_with: list[str] = Field(
        default_factory=list,
        description="Items that disagree with this one (both stay; neither replaces the other). Kept symmetric.",
    )
    slot: str | None = Field(
        default=None,
        description="What the fact is the current value of, as 'subject / attribute' (e.g. 'dana / employer'), "
        "normalised by tmem.construct.slots; None for an event or anything that can hold many times over. A newer "
        "item on the same slot supersedes the older one.",
    )
    supersedes: str | None = Field(default=None, description="Id of an older item this one updates.")
    superseded_by: str | None = None
    turn_ids: list[str] = Field(default_factory=list, description="Source turns, when the stage knows them.")
    seq: int = 0
    mode: BuildMode = BuildMode.LLM


class TriggerFamily(StrEnum):
    ENTITY = "entity"  # Q I   item x descriptive
    BRIDGE = "bridge"  # Q II  item x associative
    HORIZON = "horizon"  # Q III scene x associative
    SCENE = "scene"  # Q IV  scene x descriptive


ITEM_FAMILIES = (TriggerFamily.ENTITY, TriggerFamily.BRIDGE)
SCENE_FAMILIES = (TriggerFamily.SCENE, TriggerFamily.HORIZON)


class TriggerView(Record):
    """One independently indexed text of a trigger.

    View names: item triggers expose ``concept`` (Entity), ``bridge`` and ``joint`` (Bridge; joint is
    concept | bridge | rationale); Scene triggers expose ``situation``, ``object``, ``event``, ``emotion``; Horizon
    triggers expose ``horizon:0`` .. ``horizon:n``.
    """

    name: str
    text: str


class Trigger(Record):
    """A write-time rehearsal attached to a host item or scene."""

    id: str
    family: TriggerFamily
    host_kind: Literal["item", "scene"]
    host_id: str
    group: int = Field(default=0, description="Index of the generated tuple this record came from (Entity+Bridge).")
    fields: dict[str, str] = Field(default_factory=dict, description="The structured content as generated.")
    views: list[TriggerView] = Field(min_length=1)


class PersonaTrait(Record):
    category: str = Field(
        description="identity, occupation, relationships, preferences, hobbies, values, health, goals"
    )
    value: str
    item_ids: list[str] = Field(default_factory=list, description="Items supporting the trait.")


class Persona(Record):
    """Standing traits of one speaker, aggregated over the whole conversation."""

    speaker: str
    traits: list[PersonaTrait]
    summary: str = ""


class ItemEdit(Record):
    """One user edit of an item's text (``Memory.update_item``); the history keeps every version."""

    item_id: str
    version: int = Field(ge=1, description="1 for the first edit, then 2, 3, ...")
    old_text: str
    new_text: str
    at: datetime = Field(description="Wall-clock time of the edit (bookkeeping only, never a memory date).")


TombstoneKind = Literal["turn", "item"]
ErasureKind = Literal["forget", "delete"]


class Erasure(Record):
    """One entry of the store's erasure ledger: ``space`` lost content (a forget or the whole space) at ``seq``. The
    ledger holds no content, only the space's name, and outlives a deleted space. ``erased`` turns true once a scrub
    that started after the deletion committed has completed (docs/reliability.md, "Erasure")."""

    seq: int = Field(ge=1, description="Increasing across the store, in commit order.")
    space: str
    kind: ErasureKind
    erased: bool = False


# --------------------------------------------------------------------------------------------- bookkeeping


class SpaceSummary(Record):
    name: str
    sessions: int
    turns: int
    first_date: datetime | None
    last_date: datetime | None
    build_state: str = Field(description="'empty', 'not built', 'built', 'stale' (new sessions since last build).")
    build_mode: str | None = None


class LLMCall(Record):
    """One logged LLM request (doubles as the response cache, keyed by request_hash)."""

    space: str
    stage: str
    model: str
    request_hash: str
    tokens_in: int
    tokens_out: int
    latency_ms: float
    attempts: int
    outcome: Literal["ok", "error", "cached", "batch"]
    created_at: datetime = Field(description="Wall-clock time of the call (bookkeeping only, never a memory date).")
    response: str | None = Field(default=None, description="Validated JSON response (None unless outcome is ok).")
    error: str | None = None


class PendingRequest(Record):
    """A request written for the batch protocol, waiting for its result."""

    space: str
    stage: str
    request_hash: str
    body: str = Field(description="The chat-completions request body as JSON.")
