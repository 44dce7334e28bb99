"""Issue 33 Medium 3: on PostgreSQL an erasure reported ``erased`` leaves no copy of the text in the database's
relation files (after a CHECKPOINT) nor in the planner statistics (``pg_stats``), as the hostile run checked with
grep. The write-ahead log (``pg_wal``) is the operator's part and is not searched (docs/security.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from tmem.memory import Memory
from tmem.settings import Settings

pytestmark = pytest.mark.postgres

CANARY = "zqxcanary7731"


def _messages(n: int) -> list[dict[str, Any]]:
    """A conversation whose every field that reaches a table holds the canary (text, caption, metadata)."""
    out = []
    for i in range(n):
        out.append(
            {
                "speaker": "Ann" if i % 2 else "Bob",
                "text": f"On day {i} I told you the code word {CANARY} for the garden shed at the lake house.",
                "caption": f"a photo of the {CANARY} sign",
                "metadata": {"label": f"{CANARY}-{i % 3}"},
                "time": f"2024-05-{1 + i % 28:02d}T10:00:00",
                "id": f"m{i}",
            }
        )
    return out


def _hits_on_disk(pgdata: Path) -> list[str]:
    """Relation files (base/, global/) holding the canary's bytes."""
    needle = CANARY.encode()
    found = []
    for folder in ("base", "global"):
        for path in (pgdata / folder).rglob("*"):
            if path.is_file() and needle in path.read_bytes():
                found.append(str(path.relative_to(pgdata)))
    return found


def _in_statistics(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT tablename || '.' || attname FROM pg_stats WHERE schemaname = current_schema() AND ("
            "most_common_vals::text LIKE %(p)s OR histogram_bounds::text LIKE %(p)s)",
            {"p": f"%{CANARY}%"},
        ).fetchall()
    return [r[0] for r in rows]


def _checkpoint(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")


@pytest.mark.parametrize("how", ["forget", "delete"])
def test_an_erased_space_leaves_no_copy_in_relation_files_or_statistics(
    pg_server: Any, pg_url: str, tmp_path: Path, how: str
) -> None:
    pgdata = Path(pg_server._server.pgdata)
    settings = Settings(home=tmp_path / "mem", llm="none", embed_backend="hash", database_url=pg_url)
    with Memory.open(settings=settings) as memory:
        memory.add_messages("s", _messages(40))
        memory.add_messages("keep", [{"speaker": "Cy", "text": "nothing secret", "time": "2024-05-01T10:00:00"}])
        memory.build("s")
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("ANALYZE")
        _checkpoint(pg_url)
        assert _hits_on_disk(pgdata) and _in_statistics(pg_url)  # the check sees the text before the erasure
        if how == "forget":
            report = memory.forget("s", turn_ids=[f"m{i}" for i in range(40)])
            erased, stage = report.erased, None
        else:
            done = memory.delete_space("s")
            erased, stage = done.erased, done.stage
        assert erased and stage in (None, "erased")
        (entry,) = [e for e in memory.erasures() if e.erased]
        assert entry.space == "s"
    _checkpoint(pg_url)
    assert _hits_on_disk(pgdata) == []
    assert _in_statistics(pg_url) == []


def _database_of(pg_server: Any, name: str, role: str, *, owner: bool) -> str:
    """A new database with pgvector, used by ``role`` (a plain login role): its owner, or only granted the schema."""
    with psycopg.connect(pg_server.uri(), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
            conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"' + (f' OWNER "{role}"' if owner else ""))
    with psycopg.connect(pg_server.uri(name), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(f'GRANT ALL ON SCHEMA public TO "{role}"')
    return str(pg_server.uri(name)).replace("postgres:@", f"{role}:@", 1)


def test_the_databases_owner_erases_and_another_user_is_told_what_to_grant(
    pg_server: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The usual deployment (tmem's user owns its database, no superuser) reaches 'erased' with nothing left; a
    user that may not compact pg_statistic leaves the erasure pending and the log says what to grant."""
    pgdata = Path(pg_server._server.pgdata)
    for owner in (True, False):
        url = _database_of(pg_server, f"erase_{owner}", f"tmem_{owner}".lower(), owner=owner)
        settings = Settings(home=tmp_path / str(owner), llm="none", embed_backend="hash", database_url=url)
        with Memory.open(settings=settings) as memory:
            memory.add_messages("s", _messages(10))
            memory.build("s")
            report = memory.forget("s", turn_ids=[f"m{i}" for i in range(10)])
        assert report.erased is owner
    assert "may not compact pg_statistic" in caplog.text and "GRANT MAINTAIN" in caplog.text
    _checkpoint(pg_server.uri("erase_True"))
    assert not [h for h in _hits_on_disk(pgdata) if h.startswith(f"base/{_oid(pg_server, 'erase_True')}/")]


def _oid(pg_server: Any, database: str) -> int:
    with psycopg.connect(pg_server.uri()) as conn:
        row = conn.execute("SELECT oid FROM pg_database WHERE datname = %s", (database,)).fetchone()
    assert row is not None
    return int(row[0])
