"""Stores behind one protocol (:class:`tmem.store.base.Store`), opened by URL through :func:`open_store`.

``sqlite:///path/to/tmem.db`` (or a plain path) opens the embedded SQLite backend; ``postgresql://...`` the server
backend. Every caller (``Memory``, the CLI, the service, evaluation) opens its store here and nowhere else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

from tmem.errors import ConfigError
from tmem.store.base import Store
from tmem.util.extras import require_extra

__all__ = ["Store", "open_store", "opened_url", "sqlite_url"]

_SQLITE = "sqlite://"
_POSTGRES = ("postgresql://", "postgres://", "postgresql+psycopg://")
_OPENED: WeakKeyDictionary[Any, str] = WeakKeyDictionary()  # store -> the URL open_store opened it with


def sqlite_url(path: str | Path) -> str:
    """The URL of a SQLite store file (``sqlite:////abs/path/tmem.db``)."""
    return f"{_SQLITE}/{Path(path).expanduser()}"


def open_store(url: str | Path) -> Store:
    """Open (or create) the store at ``url``: ``sqlite:///PATH``, a plain file path, or ``postgresql://...``."""
    text = str(url)
    if text.startswith(_POSTGRES):
        require_extra("postgres", "A postgresql:// store URL", "Or use a SQLite store: sqlite:///PATH.")
        from tmem.store.postgres import PostgresStore  # type: ignore[import-not-found,unused-ignore]

        store: Store = PostgresStore.open(text)
        _OPENED[store] = text
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

    sqlite_store = SQLiteStore.open(path)
    _OPENED[sqlite_store] = sqlite_url(path)
    return sqlite_store


def opened_url(store: Store) -> str:
    """The URL :func:`open_store` opened ``store`` with (``sqlite:///PATH`` for a plain path), for what shares its
    database (the service's control store). Raises ConfigError for a store opened some other way."""
    url = _OPENED.get(store)
    if url is None:
        raise ConfigError(
            f"This {type(store).__name__} was not opened with tmem.store.open_store, so its database is unknown: "
            "open it with open_store(URL)."
        )
    return url
