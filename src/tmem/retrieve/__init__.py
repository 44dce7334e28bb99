"""Retrieval: the cascade of §3.4 (topic prefilter, scenes, items) with trigger bypass and explained routes."""

from tmem.retrieve.fusion import Fused, Ranked, fuse, gate, nanmax, rrf

__all__ = ["Fused", "Ranked", "fuse", "gate", "nanmax", "rrf"]
