"""The HTTP service (``tmem serve``): FastAPI over :class:`tmem.Memory`, with tenants, API keys and build jobs."""

from __future__ import annotations

from tmem.util.extras import require_extra

require_extra("server", "tmem.service (the HTTP service)")

from tmem.service.app import create_app  # noqa: E402 - after the check, which names the extra to install

__all__ = ["create_app"]
