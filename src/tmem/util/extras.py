"""Optional extras: what ``pip install tmem`` leaves out, and the one error that says which extra to install.

A bare ``pip install tmem`` is the library, the SQLite store, the MiniLM embeddings and the CLI. Each part below needs
an extra (pyproject.toml, ``[project.optional-dependencies]``; docs/install.md); every module that needs one calls
:func:`require_extra` before it imports the extra's packages, so a missing package is a :class:`ConfigError` naming
the extra, never a bare ``ModuleNotFoundError`` from deep inside an import.
"""

from __future__ import annotations

import importlib.util

from tmem.errors import ConfigError

# extra -> the top-level modules it installs that tmem imports (tests/test_util_extras.py keeps this and pyproject.toml
# in step). The service mounts the viewer at /ui, so the server extra holds the viewer's packages too.
EXTRAS: dict[str, tuple[str, ...]] = {
    "server": ("fastapi", "uvicorn", "jinja2", "python_multipart"),
    "viewer": ("fastapi", "uvicorn", "jinja2", "python_multipart"),
    "mcp": ("mcp",),
    "postgres": ("psycopg", "psycopg_pool"),
    "eval": ("matplotlib",),
    "scale": ("faiss",),
    # the agent frameworks (tmem.integrations; docs/integrations.md)
    "langgraph": ("langgraph", "langchain_core"),
    "openai-agents": ("agents",),
    "pydantic-ai": ("pydantic_ai",),
}


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here (found without importing them)."""
    return [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]


def require_extra(extra: str, what: str, hint: str = "") -> None:
    """Raise a :class:`ConfigError` naming ``extra`` when any of its modules is not installed. ``what`` is the part
    that needs it (``tmem serve``, ``a postgresql:// store``), ``hint`` an alternative to installing, if any."""
    missing = missing_modules(extra)
    if missing:
        also = f" {hint}" if hint else ""
        raise ConfigError(
            f"{what} needs the {extra} extra: pip install 'tmem[{extra}]' ({', '.join(missing)} not installed).{also}"
        )
