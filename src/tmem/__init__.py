"""tmem: long-term conversational memory for LLM agents that anticipates, not archives (T-Mem).

The public surface is deliberately small and pinned by ``tests/test_public_api.py``: the :class:`Memory` facade,
its typed results, the settings and the error tree. Everything else is importable from its module but may change.
"""

from __future__ import annotations

from tmem.answer import Answer, QuestionTime
from tmem.construct.options import BuildOptions
from tmem.construct.policy import Staleness
from tmem.construct.report import BuildReport
from tmem.edit import ForgetReport, ItemHistory
from tmem.errors import (
    BatchPending,
    BuildBusy,
    BuildError,
    ConfigError,
    EmbeddingError,
    InputError,
    IntegrityError,
    LLMError,
    LLMOutputError,
    LLMTransientError,
    NotFoundError,
    StoreError,
    TmemError,
)
from tmem.ingest.messages import MessageInput, MessagesReport
from tmem.memory import AsyncMemory, Memory, SpaceExport
from tmem.models import Item, Persona, Scene, SessionInput, Topic, Trigger, TurnInput
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.layout import ContextLayout
from tmem.retrieve.types import ItemHit, Route, SceneHit, SearchResult
from tmem.settings import Settings

__version__ = "0.1.0"

__all__ = [
    "Answer",
    "AsyncMemory",
    "BatchPending",
    "BuildBusy",
    "BuildError",
    "BuildOptions",
    "BuildReport",
    "ConfigError",
    "ContextLayout",
    "EmbeddingError",
    "ForgetReport",
    "InputError",
    "IntegrityError",
    "Item",
    "ItemHistory",
    "ItemHit",
    "LLMError",
    "LLMOutputError",
    "LLMTransientError",
    "Memory",
    "MessageInput",
    "MessagesReport",
    "NotFoundError",
    "Persona",
    "QuestionTime",
    "RetrievalConfig",
    "Route",
    "Scene",
    "SceneHit",
    "SearchResult",
    "SessionInput",
    "Settings",
    "SpaceExport",
    "Staleness",
    "StoreError",
    "TmemError",
    "Topic",
    "Trigger",
    "TurnInput",
    "__version__",
]
