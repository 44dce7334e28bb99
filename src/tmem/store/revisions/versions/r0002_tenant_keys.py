"""One schema for both backends: SQLite tables get PostgreSQL's ``tenant`` column and keys.

On SQLite every store table is rebuilt (SQLite cannot change a primary key in place) as :mod:`tmem.store.schema`
describes it: ``tenant`` is filled from the space key (the part before its first '/', else ''), the rows are copied
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
from sqlalchemy.schema import CreateIndex, CreateTable

from tmem.errors import StoreError

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_TENANT = "CASE WHEN instr({c}, '/') > 0 THEN substr({c}, 1, instr({c}, '/') - 1) ELSE '' END"


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        op.execute("CREATE INDEX IF NOT EXISTS erasures_pending ON erasures (erased, seq)")
        return
    from tmem.store.schema import metadata

    inspector = sa.inspect(bind)
    present = set(inspector.get_table_names())
    rebuilt: list[sa.Table] = []
    for table in metadata.sorted_tables:
        if table.name not in present:
            continue  # created below by its own definition, empty
        old_cols = {c["name"] for c in inspector.get_columns(table.name)}
        if "tenant" in old_cols:
            continue  # already rebuilt
        ddl = str(CreateTable(table).compile(dialect=bind.dialect))
        head = f"CREATE TABLE {table.name} "
        if not ddl.lstrip().startswith(head):
            raise StoreError(f"Cannot rebuild table {table.name}: unexpected DDL {ddl[:60]!r}. Report this.")
        bind.exec_driver_sql(ddl.lstrip().replace(head, f'CREATE TABLE "_new_{table.name}" ', 1))
        space = "name" if table.name == "spaces" else "space"
        targets, sources = ['"tenant"'], [_TENANT.format(c=f'"{space}"')]
        for col in table.columns:
            if col.name == "tenant":
                continue
            if col.name in old_cols:
                targets.append(f'"{col.name}"')
                sources.append(f'"{col.name}"')
            elif table.name == "pending_requests" and col.name == "seq":
                targets.append('"seq"')
                sources.append("rowid")
        bind.exec_driver_sql(
            f'INSERT INTO "_new_{table.name}" ({", ".join(targets)}) SELECT {", ".join(sources)} FROM "{table.name}"'
        )
        rebuilt.append(table)
    for table in reversed(rebuilt):
        bind.exec_driver_sql(f'DROP TABLE "{table.name}"')
    for table in rebuilt:
        bind.exec_driver_sql(f'ALTER TABLE "_new_{table.name}" RENAME TO "{table.name}"')
        for index in table.indexes:
            bind.execute(CreateIndex(index))
    for table in metadata.sorted_tables:
        if table.name not in present:
            table.create(bind)
    broken = bind.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if broken:
        raise StoreError(
            f"Upgrading the store found rows whose parent is missing ({broken[:5]}): the file was damaged before "
            "the upgrade. Nothing was changed; restore the file from a backup or run `tmem check` with an older tmem."
        )


def downgrade() -> None:
    raise NotImplementedError("Tenant keys cannot be undone on SQLite; restore a backup instead.")
