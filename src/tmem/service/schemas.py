"""Request and response bodies of the HTTP service (``/v1``). Limits are part of the contract (docs/service.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from tmem.construct.report import BuildReport
from tmem.models import MetaValue, SpaceSummary
from tmem.store.control import JobState

MAX_MESSAGES = 500
MAX_TEXT = 20_000
MAX_QUERY = 2_000
MAX_TOKENS = 32_000
MAX_IDS = 1_000
ID_PATTERN = r"^[^\x00-\x1f/]{1,200}$"


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError(f"holds a NUL character (\\x00) at position {value.index(chr(0))}; remove it")
    return value


Text = AfterValidator(_no_nul)  # one input rule for every backend: PostgreSQL cannot store a NUL, so no text holds one
Id = Annotated[str, Field(min_length=1, max_length=200), Text]


class Problem(BaseModel):
    """An RFC 9457 problem detail (``application/problem+json``)."""

    type: str = Field(description="URI naming the kind of problem.")
    title: str
    status: int
    detail: str = Field(description="What went wrong and what to do about it.")
    instance: str | None = None
    errors: list[dict[str, Any]] | None = Field(default=None, description="Each invalid field of the request.")


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    speaker: Annotated[str, Text] = Field(min_length=1, max_length=200, description="Who said it.")
    text: Annotated[str, Text] = Field(min_length=1, max_length=MAX_TEXT)
    time: datetime | None = Field(default=None, description="ISO 8601; a time with a zone is stored in UTC.")
    id: str | None = Field(
        default=None, min_length=1, max_length=200, pattern=ID_PATTERN, description="Makes the add idempotent."
    )
    caption: Annotated[str, Text] | None = Field(
        default=None, max_length=MAX_TEXT, description="Caption of a shared image."
    )
    metadata: dict[str, MetaValue] | None = Field(
        default=None,
        description="Labels of the message: at most 32 keys (64 characters each), string values of at most 256 "
        "characters, numbers or booleans. Filters (`where`) select by them (docs/agents.md).",
    )


class MessagesIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    messages: list[MessageIn] = Field(min_length=1, max_length=MAX_MESSAGES)


class BuildIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rebuild: bool = Field(default=False, description="Drop the memory (not the conversation) and build it again.")


class JobRef(BaseModel):
    job: str


LAYOUT_DOC = (
    'The context layout as a JSON object of ContextLayout fields, e.g. {"excerpt_neighbours": true}; fields not '
    'given take the recipe\'s values (docs/retrieval.md, "Context layout").'
)


class SearchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    q: Annotated[str, Text] = Field(min_length=1, max_length=MAX_QUERY, description="The query.")
    config: str | dict[str, Any] | None = Field(
        default=None,
        description="A preset name (docs/retrieval.md) or RetrievalConfig fields, e.g. {'kS': 3, 'disabled': ['HT']}.",
    )
    explain: bool = Field(default=False, description="Keep each hit's routes (which lists reached it and how).")
    where: dict[str, Any] | None = Field(
        default=None,
        description='Only memory from matching turns: {"metadata": {"key": value or [values]}, "speaker": name or '
        '[names], "since": date, "until": date} (docs/agents.md).',
    )


class AskIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: Annotated[str, Text] = Field(min_length=1, max_length=MAX_QUERY)
    at: datetime | None = Field(default=None, description="When the question is asked (default: after the last one).")
    variant: Literal["short", "cot"] = "short"
    config: str | dict[str, Any] | None = None
    max_tokens: int = Field(default=2000, ge=0, le=MAX_TOKENS, description="Token budget of the answer's context.")
    layout: dict[str, Any] | None = Field(default=None, description=LAYOUT_DOC)


class ItemPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: Annotated[str, Text] = Field(min_length=1, max_length=MAX_TEXT, description="The item's new text.")


class ForgetIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    turn_ids: list[Id] = Field(default_factory=list, max_length=MAX_IDS, description="Turns to forget.")
    item_ids: list[Id] = Field(default_factory=list, max_length=MAX_IDS, description="Items to forget.")

    @model_validator(mode="after")
    def _something(self) -> ForgetIn:
        if not self.turn_ids and not self.item_ids:
            raise ValueError("name at least one id in turn_ids or item_ids")
        return self


class SpacesOut(BaseModel):
    spaces: list[SpaceSummary]


class Deleted(BaseModel):
    deleted: str
    failed_jobs: int = Field(default=0, description="Queued builds of the space that were failed.")
    erasure: int = Field(description="The deletion's entry in the erasure ledger: GET /v1/erasures/{erasure}.")
    erased: bool = Field(
        description="The freed bytes are erased (see scope). False: deleted, erasure pending (another connection's "
        "open read keeps them); the server finishes it by itself within seconds of that read ending."
    )
    status: str = Field(description="'deleted' or 'deleted, erasure pending'.")
    scope: str = Field(description="What erased means on this server's database.")


class ErasureOut(BaseModel):
    erasure: int
    space: str
    kind: str = Field(description="'forget' or 'delete'.")
    erased: bool
    status: str = Field(description="'erased' or 'erasure pending'.")


class JobParams(BaseModel):
    rebuild: bool = Field(default=False, description="The build drops the memory first (POST .../build with rebuild).")
    auto: bool = Field(default=False, description="The build policy started the job (no request did).")


class JobProgress(BaseModel):
    stage: str | None = Field(default=None, description="queued, building, done or failed.")
    fraction: float | None = Field(default=None, ge=0.0, le=1.0)
    note: str | None = Field(default=None, description="Why a job waits again (e.g. requeued after a restart).")


class JobOut(BaseModel):
    """A build job of one space, as its tenant sees it (fields the job does not record are left out, e.g.
    ``params.auto`` of a requested build)."""

    id: str
    space: str = Field(description="The tenant's space name.")
    kind: Literal["build"] = "build"
    params: JobParams
    state: JobState
    progress: JobProgress
    error: str | None = Field(default=None, description="Why the job failed, and what to do.")
    result: BuildReport | None = Field(default=None, description="The build report of a succeeded job.")
    attempts: int = Field(default=0, description="How many times a worker started the job.")
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None
