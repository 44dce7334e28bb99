"""tmem: long-term conversational memory for LLM agents that anticipates, not archives (T-Mem).

The public surface is deliberately small and pinned by ``tests/test_public_api.py``: the :class:`Memory` facade,
its typed results, the settings and the error tree. Everything else is importable from its module but may change.
"""

from __future__ import annotations

from tmem.answer import Answer, QuestionTime
from tmem.construct.options import BuildOptions
from tmem.construct.report import BuildReport
from tmem.errors import (
    BatchPending,
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
from tmem.memory import Memory, SpaceExport
from tmem.models import Item, Persona, Scene, SessionInput, Topic, Trigger, TurnInput
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.types import ItemHit, Route, SceneHit, SearchResult
from tmem.settings import Settings

__version__ = "0.1.0"

__all__ = [
    "Answer",
    "BatchPending",
    "BuildError",
    "BuildOptions",
    "BuildReport",
    "ConfigError",
    "EmbeddingError",
    "InputError",
    "IntegrityError",
    "Item",
    "ItemHit",
    "LLMError",
    "LLMOutputError",
    "LLMTransientError",
    "Memory",
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
    "StoreError",
    "TmemError",
    "Topic",
    "Trigger",
    "TurnInput",
    "__version__",
]
