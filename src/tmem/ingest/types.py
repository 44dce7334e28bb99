"""Typed results of the ingest readers and the importer."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tmem.models import SessionInput


class SpaceInput(BaseModel):
    """One space as read from a file, before it is stored.

    ``speakers`` lists the speakers the file declares (LoCoMo's ``speaker_a`` and ``speaker_b``; the native format's
    optional ``speakers``); the importer adds any other speaker in order of first appearance.
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    speakers: list[str] = Field(default_factory=list)
    sessions: list[SessionInput]
    state: dict[str, str] = Field(
        default_factory=dict,
        description="Space state the import writes (the LongMemEval reader keeps the benchmark's evaluation metadata "
        "here); retrieval never reads it.",
    )


class SpaceImportReport(BaseModel):
    """What one import did to one space."""

    model_config = ConfigDict(extra="forbid")

    space: str
    created: bool = Field(description="True when the space did not exist before this import.")
    sessions_added: list[str] = Field(default_factory=list, description="Ids of the sessions stored, in order.")
    sessions_skipped: list[str] = Field(
        default_factory=list, description="Ids of sessions whose content was already stored (nothing written)."
    )
    turns_added: int = 0
    speakers: list[str] = Field(default_factory=list, description="The space's speakers after the import.")


class ImportReport(BaseModel):
    """What one import (one file, or one call of ``import_sessions``) did, per space in input order."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(description="The file imported, or a short description of the caller's input.")
    spaces: list[SpaceImportReport] = Field(default_factory=list)

    @property
    def sessions_added(self) -> int:
        return sum(len(s.sessions_added) for s in self.spaces)

    @property
    def sessions_skipped(self) -> int:
        return sum(len(s.sessions_skipped) for s in self.spaces)

    @property
    def turns_added(self) -> int:
        return sum(s.turns_added for s in self.spaces)
