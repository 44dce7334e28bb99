"""The HTTP service (``tmem serve``): FastAPI over :class:`tmem.Memory`, with tenants, API keys and build jobs."""

from __future__ import annotations

from tmem.service.app import create_app

__all__ = ["create_app"]
