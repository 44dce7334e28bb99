"""One schema for both backends: SQLite tables get PostgreSQL's ``tenant`` column and keys.

On SQLite every store table is rebuilt (SQLite cannot change a primary key in place) as the schema stood at this
revision (the definitions below, frozen: later revisions change them): ``tenant`` is filled from the space key (the part before its first '/', else ''), the rows are copied
unchanged, and ``pending_requests`` keeps its order in a new ``seq`` column (from the old rowid). Foreign keys are off
while the tables are swapped (the store's upgrade turns them off); ``PRAGMA foreign_key_check`` must come back empty
before the transaction commits. On PostgreSQL the tables already have these keys; the ledger gets the index of
pending entries that SQLite had.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from tmem.errors import StoreError

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_TENANT = "CASE WHEN instr({c}, '/') > 0 THEN substr({c}, 1, instr({c}, '/') - 1) ELSE '' END"
_CHECK = (
    "CHECK ((tenant = '' AND {c} NOT LIKE '%/%') "
    "OR (tenant NOT LIKE '%/%' AND substr({c}, 1, length(tenant) + 1) = tenant || '/'))"
)

# The SQLite tables at this revision, parents first ({check}: the tenant CHECK of the table's space column).
_TABLES = {
    "erasures": (
        "seq INTEGER NOT NULL, tenant TEXT NOT NULL, space TEXT NOT NULL, kind TEXT NOT NULL, "
        "erased BOOLEAN DEFAULT false NOT NULL, xid BIGINT DEFAULT 0 NOT NULL, PRIMARY KEY (tenant, seq), "
        "CHECK (kind IN ('forget', 'delete')), {check}"
    ),
    "spaces": (
        "tenant TEXT NOT NULL, name TEXT NOT NULL, speakers TEXT DEFAULT '[]' NOT NULL, "
        "PRIMARY KEY (tenant, name), {check}"
    ),
    "build_state": (
        'tenant TEXT NOT NULL, space TEXT NOT NULL, "key" TEXT NOT NULL, value TEXT NOT NULL, '
        'PRIMARY KEY (tenant, space, "key"), {check}, '
        "FOREIGN KEY(tenant, space) REFERENCES spaces (tenant, name) ON DELETE CASCADE"
    ),
    "embeddings": (
        "tenant TEXT NOT NULL, space TEXT NOT NULL, model_id TEXT NOT NULL, text_hash TEXT NOT NULL, "
        "dim INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (tenant, space, model_id, text_hash), {check}, "
        "FOREIGN KEY(tenant, space) REFERENCES spaces (tenant, name) ON DELETE CASCADE"
    ),
    "item_history": (
        "tenant TEXT NOT NULL, space TEXT NOT NULL, item_id TEXT NOT NULL, version INTEGER NOT NULL, "
        "change TEXT NOT NULL, old_text TEXT NOT NULL, new_text TEXT NOT NULL, at TEXT NOT NULL, "
        "PRIMARY KEY (tenant, space, item_id, version), CHECK (change IN ('edited')), {check}, "
        "FOREIGN KEY(tenant, space) REFERENCES spaces (tenant, name) ON DELETE CASCADE"
    ),
    "items": (
        "tenant TEXT NOT NULL, space TEXT NOT NULL, id TEXT NOT NULL, seq INTEGER NOT NULL, text TEXT NOT NULL, "
        "kind TEXT NOT NULL, topic_id TEXT, speaker TEXT, date TEXT, supersedes TEXT, superseded_by TEXT, "
        "turn_ids TEXT DEFAULT '[]' NOT NULL, mode TEXT NOT NULL, date_end TEXT, date_precision TEXT, "
        "conflicts_with TEXT DEFAULT '[]' NOT NULL, slot TEXT, PRIMARY KEY (tenant, space, id), "
        "CHECK (kind IN ('atomic', 'connected')), {check}, "
        "FOREIGN KEY(tenant, space) REFERENCES spaces (tenant, name) ON DELETE CASCADE"
    ),
    "leases": (
        "tenant TEXT NOT NULL, space TEXT NOT NULL, name TEXT NOT NULL, holder TEXT NOT NULL, "
        "expires_at DOUBLE NOT NULL, PRIMARY KEY (tenant, space, name), {check}, "
        "FOREIGN KEY(tenant, space) REFERENCES spaces (tenant, name) ON DELETE CASCADE"
    ),
    "llm_calls": (
        "id INTEGER NOT NULL, tenant TEXT NOT NULL, space TEXT NOT NULL, stage TEXT NOT NULL, model TEXT NOT NULL, "
        "request_hash TEXT NOT NULL, tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL, "
        "latency_ms DOUBLE NOT NULL, attempts INTEGER NOT NULL, outcome TEXT NOT NULL, created_at TEXT NOT NULL, "
        "response TEXT, error TEXT, PRIMARY KEY (tenant, id), "
        "CHECK (outcome IN ('ok', 'error', 'cached', 'batch')), {check}, "
        "FOREIGN KEY(tenant, space) REFERENCES spaces (tenant, name) ON DELETE CASCADE"
    ),
    "pending_requests": (
        "seq INTEGER NOT NULL, tenant TEXT NOT NULL, space TEXT NOT NULL, request_hash TEXT NOT NULL, "
        "stage TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (tenant, space, request_hash), {check}, "
        "FOREIGN KEY(tenant, space) REFERENCES spaces (tenant, name) ON DELETE CASCADE"
    ),
    "personas": (
        "tenant TEXT NOT NULL, space TEXT NOT NULL, speaker TEXT NOT NULL, traits TEXT NOT NULL, "
        "summary TEXT NOT NULL, PRIMARY KEY (tenant, space, speaker), {check}, "
        "FOREIGN KEY(tenant, space) REFERENCES spaces (tenant, name) ON DELETE CASCADE"
    ),
    "scenes": (
        "tenant TEXT NOT NULL, space TEXT NOT NULL, id TEXT NOT NULL, seq INTEGER NOT NULL, title TEXT NOT NULL, "
        'summary TEXT NOT NULL, narrative TEXT NOT NULL, start TEXT NOT NULL, "end" TEXT NOT NULL, '
        "mode TEXT NOT NULL, PRIMARY KEY (tenant, space, id), {check}, "
        "FOREIGN KEY(tenant, space) REFERENCES spaces (tenant, name) ON DELETE CASCADE"
    ),
    "sessions": (
        "tenant TEXT NOT NULL, space TEXT NOT NULL, id TEXT NOT NULL, seq INTEGER NOT NULL, "
        "started_at TEXT NOT NULL, content_hash TEXT NOT NULL, PRIMARY KEY (tenant, space, id), "
        "CONSTRAINT sessions_tenant_space_seq_key UNIQUE (tenant, space, seq), {check}, "
        "FOREIGN KEY(tenant, space) REFERENCES spaces (tenant, name) ON DELETE CASCADE"
    ),
    "tombstones": (
        "tenant TEXT NOT NULL, space TEXT NOT NULL, kind TEXT NOT NULL, id TEXT NOT NULL, "
        "PRIMARY KEY (tenant, space, kind, id), CHECK (kind IN ('turn', 'item')), {check}, "
        "FOREIGN KEY(tenant, space) REFERENCES spaces (tenant, name) ON DELETE CASCADE"
    ),
    "topics": (
        "tenant TEXT NOT NULL, space TEXT NOT NULL, id TEXT NOT NULL, seq INTEGER NOT NULL, label TEXT NOT NULL, "
        "description TEXT NOT NULL, PRIMARY KEY (tenant, space, id), {check}, "
        "FOREIGN KEY(tenant, space) REFERENCES spaces (tenant, name) ON DELETE CASCADE"
    ),
    "triggers": (
        "tenant TEXT NOT NULL, space TEXT NOT NULL, id TEXT NOT NULL, family TEXT NOT NULL, "
        "host_kind TEXT NOT NULL, host_id TEXT NOT NULL, grp INTEGER NOT NULL, fields TEXT NOT NULL, "
        "PRIMARY KEY (tenant, space, id), CHECK (family IN ('entity', 'bridge', 'scene', 'horizon')), "
        "CHECK (host_kind IN ('item', 'scene')), {check}, "
        "FOREIGN KEY(tenant, space) REFERENCES spaces (tenant, name) ON DELETE CASCADE"
    ),
    "item_scenes": (
        "tenant TEXT NOT NULL, space TEXT NOT NULL, item_id TEXT NOT NULL, scene_id TEXT NOT NULL, "
        "position INTEGER NOT NULL, PRIMARY KEY (tenant, space, item_id, scene_id), "
        "FOREIGN KEY(tenant, space, item_id) REFERENCES items (tenant, space, id) ON DELETE CASCADE, "
        "FOREIGN KEY(tenant, space, scene_id) REFERENCES scenes (tenant, space, id) ON DELETE CASCADE, {check}"
    ),
    "topic_scenes": (
        "tenant TEXT NOT NULL, space TEXT NOT NULL, topic_id TEXT NOT NULL, scene_id TEXT NOT NULL, "
        "PRIMARY KEY (tenant, space, topic_id, scene_id), "
        "FOREIGN KEY(tenant, space, topic_id) REFERENCES topics (tenant, space, id) ON DELETE CASCADE, "
        "FOREIGN KEY(tenant, space, scene_id) REFERENCES scenes (tenant, space, id) ON DELETE CASCADE, {check}"
    ),
    "trigger_views": (
        "tenant TEXT NOT NULL, space TEXT NOT NULL, trigger_id TEXT NOT NULL, position INTEGER NOT NULL, "
        "name TEXT NOT NULL, text TEXT NOT NULL, PRIMARY KEY (tenant, space, trigger_id, position), "
        "FOREIGN KEY(tenant, space, trigger_id) REFERENCES triggers (tenant, space, id) ON DELETE CASCADE, "
        "{check}"
    ),
    "turns": (
        "tenant TEXT NOT NULL, space TEXT NOT NULL, id TEXT NOT NULL, session_id TEXT NOT NULL, "
        "seq INTEGER NOT NULL, speaker TEXT NOT NULL, text TEXT NOT NULL, time TEXT NOT NULL, caption TEXT, "
        "PRIMARY KEY (tenant, space, id), CONSTRAINT turns_tenant_space_seq_key UNIQUE (tenant, space, seq), "
        "FOREIGN KEY(tenant, space, session_id) REFERENCES sessions (tenant, space, id) ON DELETE CASCADE, "
        "{check}"
    ),
    "scene_turns": (
        "tenant TEXT NOT NULL, space TEXT NOT NULL, scene_id TEXT NOT NULL, turn_id TEXT NOT NULL, "
        "position INTEGER NOT NULL, PRIMARY KEY (tenant, space, turn_id), "
        "FOREIGN KEY(tenant, space, scene_id) REFERENCES scenes (tenant, space, id) ON DELETE CASCADE, "
        "FOREIGN KEY(tenant, space, turn_id) REFERENCES turns (tenant, space, id) ON DELETE CASCADE, {check}"
    ),
}
_INDEXES = (
    "CREATE INDEX erasures_pending ON erasures (erased, seq)",
    "CREATE INDEX erasures_seq ON erasures (seq)",
    "CREATE INDEX erasures_space ON erasures (tenant, space, seq)",
    "CREATE INDEX llm_calls_hash ON llm_calls (tenant, space, request_hash)",
    "CREATE INDEX triggers_host ON triggers (tenant, space, host_id)",
    "CREATE INDEX item_scenes_scene ON item_scenes (tenant, space, scene_id)",
    "CREATE INDEX topic_scenes_scene ON topic_scenes (tenant, space, scene_id)",
    "CREATE INDEX turns_session ON turns (tenant, space, session_id, seq)",
    "CREATE INDEX scene_turns_scene ON scene_turns (tenant, space, scene_id)",
)


def _create(bind: sa.Connection, name: str, as_name: str) -> None:
    check = _CHECK.replace("{c}", "name" if name == "spaces" else "space")
    bind.exec_driver_sql(f'CREATE TABLE "{as_name}" ({_TABLES[name].replace("{check}", check)})')


def _columns(bind: sa.Connection, table: str) -> list[str]:
    return [str(r[1]) for r in bind.exec_driver_sql(f'PRAGMA table_info("{table}")')]


def _keep_extra_columns(bind: sa.Connection, name: str) -> None:
    """Columns the old table has beyond this revision's definition (added by a pre-Alembic step of a later tmem,
    e.g. ``turns.metadata`` of ``005_turn_metadata``) are kept as they were declared."""
    frozen = set(_columns(bind, f"_new_{name}"))
    for _cid, col, kind, notnull, default, _pk in bind.exec_driver_sql(f'PRAGMA table_info("{name}")').fetchall():
        if col in frozen:
            continue
        spec = f'"{col}" {kind}' + (f" NOT NULL DEFAULT {default}" if notnull and default is not None else "")
        spec += f" DEFAULT {default}" if default is not None and not notnull else ""
        bind.exec_driver_sql(f'ALTER TABLE "_new_{name}" ADD COLUMN {spec}')


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        op.execute("CREATE INDEX IF NOT EXISTS erasures_pending ON erasures (erased, seq)")
        return
    present = set(sa.inspect(bind).get_table_names())
    rebuilt: list[str] = []
    for name in _TABLES:
        if name not in present:
            _create(bind, name, name)  # new since the tables this database has: created empty
            continue
        old = set(_columns(bind, name))
        _create(bind, name, f"_new_{name}")
        _keep_extra_columns(bind, name)
        space = _TENANT.format(c='"name"' if name == "spaces" else '"space"')
        targets, sources = ['"tenant"'], [space]
        for col in _columns(bind, f"_new_{name}"):
            if col in old:
                targets.append(f'"{col}"')
                sources.append(f'"{col}"')
            elif (name, col) == ("pending_requests", "seq"):
                targets.append('"seq"')
                sources.append("rowid")  # the queue keeps its order
        bind.exec_driver_sql(
            f'INSERT INTO "_new_{name}" ({", ".join(targets)}) SELECT {", ".join(sources)} FROM "{name}"'
        )
        rebuilt.append(name)
    for name in reversed(rebuilt):
        bind.exec_driver_sql(f'DROP TABLE "{name}"')
    for name in rebuilt:
        bind.exec_driver_sql(f'ALTER TABLE "_new_{name}" RENAME TO "{name}"')
    for statement in _INDEXES:
        bind.exec_driver_sql(statement)
    broken = bind.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if broken:
        raise StoreError(
            f"Upgrading the store found rows whose parent is missing ({broken[:5]}): the file was damaged before "
            "the upgrade. Nothing was changed; restore the file from a backup or run `tmem check` with an older tmem."
        )


def downgrade() -> None:
    raise NotImplementedError("Tenant keys cannot be undone on SQLite; restore a backup instead.")
