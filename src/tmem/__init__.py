"""tmem: long-term conversational memory for LLM agents that anticipates, not archives (T-Mem)."""

from __future__ import annotations

__version__ = "0.1.0"
