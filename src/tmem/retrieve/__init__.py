"""Retrieval: the cascade of §3.4 (topic prefilter, scenes, items) with trigger bypass and explained routes."""

from tmem.retrieve.cascade import Retriever, run_cascade
from tmem.retrieve.config import PRESETS, SWITCHES, RetrievalConfig
from tmem.retrieve.fusion import Fused, Ranked, fuse, gate, nanmax, rrf
from tmem.retrieve.layout import ContextLayout
from tmem.retrieve.rerank import CrossEncoderReranker, Reranker
from tmem.retrieve.routes import ROUTES, RouteName, RouteSpec
from tmem.retrieve.types import ItemHit, Route, SceneHit, SearchResult

__all__ = [
    "PRESETS",
    "ROUTES",
    "SWITCHES",
    "ContextLayout",
    "CrossEncoderReranker",
    "Fused",
    "ItemHit",
    "Ranked",
    "Reranker",
    "RetrievalConfig",
    "Retriever",
    "Route",
    "RouteName",
    "RouteSpec",
    "SceneHit",
    "SearchResult",
    "fuse",
    "gate",
    "nanmax",
    "rrf",
    "run_cascade",
]
