"""The SQLite store's schema steps from before Alembic: an ordered list of small functions, each recorded in
``migrations``. Frozen history: Alembic's first revision (``tmem/store/revisions/versions/r0001_legacy_history.py``)
applies the steps a database lacks; later schema changes are Alembic revisions over :mod:`tmem.store.schema`.
:func:`migrate` stays for the service's control store, which opens the same file on its own connection (its steps
are all recorded once the store has opened it).

Never edit these steps; change the schema with a new Alembic revision. ``migrations.applied_at`` is left NULL: tmem reads no date from
the machine's clock except the LLM log's bookkeeping time.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

Migration = Callable[[sqlite3.Connection], None]


def _run_script(db: sqlite3.Connection, script: str) -> None:
    """Execute DDL statements one by one (``executescript`` would commit the open transaction)."""
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


def _m001_initial(db: sqlite3.Connection) -> None:
    _run_script(
        db,
        """
        CREATE TABLE spaces (
            name TEXT PRIMARY KEY,
            speakers TEXT NOT NULL DEFAULT '[]'
        );
        CREATE TABLE sessions (
            space TEXT NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
            id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            started_at TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            PRIMARY KEY (space, id)
        );
        CREATE UNIQUE INDEX sessions_seq ON sessions(space, seq);
        CREATE TABLE turns (
            space TEXT NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
            id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            speaker TEXT NOT NULL,
            text TEXT NOT NULL,
            time TEXT NOT NULL,
            caption TEXT,
            PRIMARY KEY (space, id),
            FOREIGN KEY (space, session_id) REFERENCES sessions(space, id) ON DELETE CASCADE
        );
        CREATE UNIQUE INDEX turns_seq ON turns(space, seq);
        CREATE TABLE scenes (
            space TEXT NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
            id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            title TEXT NOT NULL,
            summary TEXT NOT NULL,
            narrative TEXT NOT NULL,
            start TEXT NOT NULL,
            "end" TEXT NOT NULL,
            mode TEXT NOT NULL,
            PRIMARY KEY (space, id)
        );
        CREATE TABLE scene_turns (
            space TEXT NOT NULL,
            scene_id TEXT NOT NULL,
            turn_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            PRIMARY KEY (space, turn_id),
            FOREIGN KEY (space, scene_id) REFERENCES scenes(space, id) ON DELETE CASCADE,
            FOREIGN KEY (space, turn_id) REFERENCES turns(space, id) ON DELETE CASCADE
        );
        CREATE INDEX scene_turns_scene ON scene_turns(space, scene_id);
        CREATE TABLE topics (
            space TEXT NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
            id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            label TEXT NOT NULL,
            description TEXT NOT NULL,
            PRIMARY KEY (space, id)
        );
        CREATE TABLE topic_scenes (
            space TEXT NOT NULL,
            topic_id TEXT NOT NULL,
            scene_id TEXT NOT NULL,
            PRIMARY KEY (space, topic_id, scene_id),
            FOREIGN KEY (space, topic_id) REFERENCES topics(space, id) ON DELETE CASCADE,
            FOREIGN KEY (space, scene_id) REFERENCES scenes(space, id) ON DELETE CASCADE
        );
        CREATE TABLE items (
            space TEXT NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
            id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            text TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('atomic', 'connected')),
            topic_id TEXT,
            speaker TEXT,
            date TEXT,
            supersedes TEXT,
            superseded_by TEXT,
            turn_ids TEXT NOT NULL DEFAULT '[]',
            mode TEXT NOT NULL,
            PRIMARY KEY (space, id)
        );
        CREATE TABLE item_scenes (
            space TEXT NOT NULL,
            item_id TEXT NOT NULL,
            scene_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            PRIMARY KEY (space, item_id, scene_id),
            FOREIGN KEY (space, item_id) REFERENCES items(space, id) ON DELETE CASCADE,
            FOREIGN KEY (space, scene_id) REFERENCES scenes(space, id) ON DELETE CASCADE
        );
        CREATE INDEX item_scenes_scene ON item_scenes(space, scene_id);
        CREATE TABLE triggers (
            space TEXT NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
            id TEXT NOT NULL,
            family TEXT NOT NULL CHECK (family IN ('entity', 'bridge', 'scene', 'horizon')),
            host_kind TEXT NOT NULL CHECK (host_kind IN ('item', 'scene')),
            host_id TEXT NOT NULL,
            grp INTEGER NOT NULL,
            fields TEXT NOT NULL,
            PRIMARY KEY (space, id)
        );
        CREATE INDEX triggers_host ON triggers(space, host_id);
        CREATE TABLE trigger_views (
            space TEXT NOT NULL,
            trigger_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            name TEXT NOT NULL,
            text TEXT NOT NULL,
            PRIMARY KEY (space, trigger_id, position),
            FOREIGN KEY (space, trigger_id) REFERENCES triggers(space, id) ON DELETE CASCADE
        );
        CREATE TABLE personas (
            space TEXT NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
            speaker TEXT NOT NULL,
            traits TEXT NOT NULL,
            summary TEXT NOT NULL,
            PRIMARY KEY (space, speaker)
        );
        CREATE TABLE build_state (
            space TEXT NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            PRIMARY KEY (space, key)
        );
        CREATE TABLE embeddings (
            space TEXT NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
            model_id TEXT NOT NULL,
            text_hash TEXT NOT NULL,
            dim INTEGER NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY (space, model_id, text_hash)
        );
        CREATE TABLE llm_calls (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            space TEXT NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
            stage TEXT NOT NULL,
            model TEXT NOT NULL,
            request_hash TEXT NOT NULL,
            tokens_in INTEGER NOT NULL,
            tokens_out INTEGER NOT NULL,
            latency_ms REAL NOT NULL,
            attempts INTEGER NOT NULL,
            outcome TEXT NOT NULL CHECK (outcome IN ('ok', 'error', 'cached', 'batch')),
            created_at TEXT NOT NULL,
            response TEXT,
            error TEXT
        );
        CREATE INDEX llm_calls_hash ON llm_calls(space, request_hash);
        CREATE TABLE pending_requests (
            space TEXT NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
            request_hash TEXT NOT NULL,
            stage TEXT NOT NULL,
            body TEXT NOT NULL,
            PRIMARY KEY (space, request_hash)
        );
        """,
    )


def _m_service_control(db: sqlite3.Connection) -> None:
    """The HTTP service's API keys (hashed) and persisted build jobs (tmem.store.control)."""
    _run_script(
        db,
        """
        CREATE TABLE IF NOT EXISTS service_keys (
            id TEXT PRIMARY KEY,
            tenant TEXT NOT NULL,
            key_hash TEXT NOT NULL,
            created_at TEXT NOT NULL,
            revoked_at TEXT
        );
        CREATE INDEX IF NOT EXISTS service_keys_tenant ON service_keys(tenant);
        CREATE TABLE IF NOT EXISTS service_jobs (
            id TEXT PRIMARY KEY,
            tenant TEXT NOT NULL,
            space TEXT NOT NULL,
            kind TEXT NOT NULL,
            params TEXT NOT NULL DEFAULT '{}',
            state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed')),
            progress TEXT NOT NULL DEFAULT '{}',
            error TEXT,
            result TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            started_at TEXT,
            finished_at TEXT
        );
        CREATE INDEX IF NOT EXISTS service_jobs_space ON service_jobs(tenant, space, state);
        CREATE INDEX IF NOT EXISTS service_jobs_state ON service_jobs(state)
        """,
    )


def _m_agent_items(db: sqlite3.Connection) -> None:
    """Agent operations (issue 9): tombstones of forgotten turns and items, item edit history, build leases, and an
    index for appending to a session. Self-contained and safe on any schema-v1 database (``IF NOT EXISTS``)."""
    _run_script(
        db,
        """
        CREATE TABLE IF NOT EXISTS tombstones (
            space TEXT NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
            kind TEXT NOT NULL CHECK (kind IN ('turn', 'item')),
            id TEXT NOT NULL,
            PRIMARY KEY (space, kind, id)
        );
        CREATE TABLE IF NOT EXISTS item_history (
            space TEXT NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
            item_id TEXT NOT NULL,
            version INTEGER NOT NULL,
            change TEXT NOT NULL CHECK (change IN ('edited')),
            old_text TEXT NOT NULL,
            new_text TEXT NOT NULL,
            at TEXT NOT NULL,
            PRIMARY KEY (space, item_id, version)
        );
        CREATE TABLE IF NOT EXISTS leases (
            space TEXT NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
            name TEXT NOT NULL,
            holder TEXT NOT NULL,
            expires_at REAL NOT NULL,
            PRIMARY KEY (space, name)
        );
        CREATE INDEX IF NOT EXISTS turns_session ON turns(space, session_id, seq)
        """,
    )


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}


def _m_item_date_precision(db: sqlite3.Connection) -> None:
    """Items record what their date names (issue 10): ``date_precision`` (day, week, month, season, year, range) and
    ``date_end`` (last day of the period). Dates stored before were full ISO days, so they become day precision."""
    have = _columns(db, "items")
    if "date_end" not in have:
        db.execute("ALTER TABLE items ADD COLUMN date_end TEXT")
    if "date_precision" not in have:
        db.execute("ALTER TABLE items ADD COLUMN date_precision TEXT")
    db.execute("UPDATE items SET date_precision = 'day' WHERE date IS NOT NULL AND date_precision IS NULL")


def _m_item_conflicts(db: sqlite3.Connection) -> None:
    """Items that disagree (issue 10): ``conflicts_with``, a JSON list of item ids, kept symmetric."""
    if "conflicts_with" not in _columns(db, "items"):
        db.execute("ALTER TABLE items ADD COLUMN conflicts_with TEXT NOT NULL DEFAULT '[]'")


def _m_service_job_owner(db: sqlite3.Connection) -> None:
    """Service jobs record which server process runs them (``owner``, a lease-holder name) and when it last said it
    was alive (``heartbeat_at``, wall-clock seconds), so that several servers on one database re-queue only the jobs
    of a server that stopped, never another live server's. Jobs claimed before this migration have no owner."""
    have = _columns(db, "service_jobs")
    if "owner" not in have:
        db.execute("ALTER TABLE service_jobs ADD COLUMN owner TEXT")
    if "heartbeat_at" not in have:
        db.execute("ALTER TABLE service_jobs ADD COLUMN heartbeat_at REAL")


def _m_erasures(db: sqlite3.Connection) -> None:
    """The erasure ledger (issue 23): one row per forget or space deletion, naming only the space, kept after the
    space is gone. ``erased`` is set once a scrub completed after the row committed; until then the erasure is
    pending and is retried. Nodes drop their local caches (saved BM25 and IVF indices) of every space in it."""
    _run_script(
        db,
        """
        CREATE TABLE IF NOT EXISTS erasures (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            space TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('forget', 'delete')),
            erased INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX IF NOT EXISTS erasures_space ON erasures(space, seq);
        CREATE INDEX IF NOT EXISTS erasures_pending ON erasures(erased, seq)
        """,
    )


def _m_item_slot(db: sqlite3.Connection) -> None:
    """Items name the slot they state (issue 21): ``slot``, 'subject / attribute', NULL for memories built before
    (their items keep their links; a later build's items get slots)."""
    if "slot" not in _columns(db, "items"):
        db.execute("ALTER TABLE items ADD COLUMN slot TEXT")


def _m_turn_metadata(db: sqlite3.Connection) -> None:
    """Turns carry the caller's metadata (issue 19): ``metadata``, a JSON object of string keys and string, number or
    boolean values; '{}' for turns stored before."""
    if "metadata" not in _columns(db, "turns"):
        db.execute("ALTER TABLE turns ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}'")


MIGRATIONS: list[tuple[str, Migration]] = [
    ("001_initial", _m001_initial),
    ("service_control", _m_service_control),
    ("agent_items", _m_agent_items),
    ("002_item_date_precision", _m_item_date_precision),
    ("003_item_conflicts", _m_item_conflicts),
    ("service_job_owner", _m_service_job_owner),
    ("erasure_ledger", _m_erasures),
    ("004_item_slot", _m_item_slot),
    ("005_turn_metadata", _m_turn_metadata),
]


def migrate(db: sqlite3.Connection) -> list[str]:
    """Apply every migration not yet recorded, each in its own transaction. Returns the names applied."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT)"
    )
    done = {row[0] for row in db.execute("SELECT version FROM migrations")}
    applied: list[str] = []
    for version, (name, fn) in enumerate(MIGRATIONS, start=1):
        if version in done:
            continue
        db.execute("BEGIN IMMEDIATE")
        try:
            fn(db)
            db.execute("INSERT INTO migrations(version, name) VALUES (?, ?)", (version, name))
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        applied.append(name)
    return applied
