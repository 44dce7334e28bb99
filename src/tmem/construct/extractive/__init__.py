"""The extractive (no-LLM) construction mode: the descriptive half of T-Mem built without any model.

Scenes from session breaks plus embedding topic shifts, topics by online clustering of scene vectors, atomic items
from substantive turns (speaker attributed, relative dates resolved), Entity triggers from keyphrases and names. No
Bridge, Horizon or Scene triggers and no persona. See docs/extractive.md.
"""

from __future__ import annotations

from tmem.construct.extractive.builder import STATE_CURSOR, build_extractive
from tmem.construct.extractive.dates import Granularity, ResolvedDate, resolve_relative_dates

__all__ = ["STATE_CURSOR", "Granularity", "ResolvedDate", "build_extractive", "resolve_relative_dates"]
