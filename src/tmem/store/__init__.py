"""Stores behind one protocol (:class:`tmem.store.base.Store`), opened by URL through :func:`open_store`.

``sqlite:///path/to/tmem.db`` (or a plain path) opens the embedded SQLite backend; ``postgresql://...`` the server
backend. Every caller (``Memory``, the CLI, the service, evaluation) opens its store here and nowhere else.
"""

from __future__ import annotations

from pathlib import Path

from tmem.errors import ConfigError
from tmem.store.base import Store
from tmem.util.extras import require_extra

__all__ = ["Store", "open_store", "sqlite_url"]

_SQLITE = "sqlite://"
_POSTGRES = ("postgresql://", "postgres://", "postgresql+psycopg://")


def sqlite_url(path: str | Path) -> str:
    """The URL of a SQLite store file (``sqlite:////abs/path/tmem.db``)."""
    return f"{_SQLITE}/{Path(path).expanduser()}"


def open_store(url: str | Path, *, create_dirs: bool = True) -> Store:
    """Open (or create) the store at ``url``: ``sqlite:///PATH``, a plain file path, or ``postgresql://...``. With
    ``create_dirs`` False, a SQLite file's missing directory is an error instead of being created (a URL the user
    gave, as opposed to the default memory directory)."""
    text = str(url)
    if text.startswith(_POSTGRES):
        require_extra("postgres", "A postgresql:// store URL", "Or use a SQLite store: sqlite:///PATH.")
        from tmem.store.postgres import PostgresStore  # type: ignore[import-not-found,unused-ignore]

        store: Store = PostgresStore.open(text)
        return store
    if text.startswith(_SQLITE):
        path = text[len(_SQLITE) :]
        if not path.startswith("/"):
            raise ConfigError(f"Bad SQLite URL {text!r}: write sqlite:///relative/path or sqlite:////absolute/path.")
        path = path[1:] or ":memory:"
    elif "://" in text:
        raise ConfigError(
            f"Unknown database URL scheme in {text!r}: use sqlite:///PATH or postgresql://USER@HOST/DB "
            "(TMEM_DATABASE_URL or --database-url)."
        )
    else:
        path = text
    from tmem.store.sqlite import SQLiteStore

    return SQLiteStore.open(path, create_dirs=create_dirs)
