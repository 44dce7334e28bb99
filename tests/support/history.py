"""Databases as a tmem from before Alembic left them: the first schema steps of :mod:`tmem.store.legacy`."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine, text

from tmem.store import legacy


def legacy_sqlite(path: Path, steps: int) -> None:
    """Make the SQLite file ``path`` as it stood after the first ``steps`` pre-Alembic steps, each recorded."""
    engine = create_engine(f"sqlite:///{path}")
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(legacy.LEDGER)
            for version, name in enumerate(legacy.STEPS[:steps], start=1):
                legacy.apply(conn, name)
                conn.execute(text("INSERT INTO migrations(version, name) VALUES (:v, :n)"), {"v": version, "n": name})
    finally:
        engine.dispose()
