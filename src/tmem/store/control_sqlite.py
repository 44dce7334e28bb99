"""SQLite implementation of :class:`tmem.store.control.ControlStore`, on its own connection to the memory's file.

Its tables (``service_keys``, ``service_jobs``) come from the store's migrations; opening runs them like the store
does, so either may be opened first.
"""

from __future__ import annotations

import hmac
import json
import secrets
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from tmem.errors import NotFoundError, StoreError
from tmem.store.control import (
    INTERRUPTED,
    MAX_ATTEMPTS,
    REQUEUED_NOTE,
    ApiKey,
    Job,
    Orphaned,
    check_name,
    hash_key,
    key_id_of,
    merged_params,
    new_key,
    now,
)
from tmem.store.migrations import migrate


class SQLiteControl:
    def __init__(self, db: sqlite3.Connection, path: str) -> None:
        self._db = db
        self._path = path
        self._lock = threading.RLock()

    @classmethod
    def open(cls, path: str | Path) -> SQLiteControl:
        target = str(path)
        try:
            db = sqlite3.connect(target, isolation_level=None, check_same_thread=False, timeout=30.0)
            db.execute("PRAGMA busy_timeout = 30000")
            db.execute("PRAGMA journal_mode = WAL")
            migrate(db)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"Cannot open the service tables in {target}: {exc}. Check --dir/TMEM_HOME.") from exc
        db.row_factory = sqlite3.Row
        return cls(db, target)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"The service tables in {self._path} are busy: {exc}. Retry the request.") from exc
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return list(self._db.execute(sql, params).fetchall())

    # ------------------------------------------------------------------ keys
    def create_key(self, tenant: str) -> tuple[ApiKey, str]:
        check_name(tenant, "tenant")
        key_id, key, digest = new_key()
        created = now()
        with self._tx() as db:
            db.execute(
                "INSERT INTO service_keys(id, tenant, key_hash, created_at) VALUES (?, ?, ?, ?)",
                (key_id, tenant, digest, created),
            )
        return ApiKey(id=key_id, tenant=tenant, created_at=created), key

    def authenticate(self, key: str) -> str | None:
        key_id = key_id_of(key)
        if key_id is None:
            return None
        rows = self._rows("SELECT tenant, key_hash, revoked_at FROM service_keys WHERE id = ?", (key_id,))
        if not rows:
            return None
        row = rows[0]
        if not hmac.compare_digest(str(row["key_hash"]), hash_key(key)) or row["revoked_at"] is not None:
            return None
        return str(row["tenant"])

    def keys(self, tenant: str | None = None) -> list[ApiKey]:
        sql = "SELECT id, tenant, created_at, revoked_at FROM service_keys"
        rows = (
            self._rows(sql + " WHERE tenant = ? ORDER BY rowid", (tenant,))
            if tenant is not None
            else self._rows(sql + " ORDER BY tenant, rowid")
        )
        return [ApiKey(**dict(r)) for r in rows]

    def revoke_key(self, key_id: str) -> ApiKey:
        with self._tx() as db:
            db.execute("UPDATE service_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (now(), key_id))
        rows = self._rows("SELECT id, tenant, created_at, revoked_at FROM service_keys WHERE id = ?", (key_id,))
        if not rows:
            raise NotFoundError(f"No API key with id {key_id!r}; `tmem keys list` shows the key ids.")
        return ApiKey(**dict(rows[0]))

    # ------------------------------------------------------------------ jobs
    @staticmethod
    def _job(row: sqlite3.Row) -> Job:
        data = dict(row)
        data["params"] = json.loads(data["params"])
        data["progress"] = json.loads(data["progress"])
        data["result"] = None if data["result"] is None else json.loads(data["result"])
        return Job(**data)

    def create_job(self, tenant: str, space: str, params: dict[str, Any]) -> Job:
        job_id = "job_" + secrets.token_hex(10)
        with self._tx() as db:
            queued = db.execute(
                "SELECT id, params FROM service_jobs WHERE tenant = ? AND space = ? AND state = 'queued' "
                "ORDER BY rowid LIMIT 1",
                (tenant, space),
            ).fetchone()
            if queued is not None:
                merged = merged_params(json.loads(queued["params"]), params)
                db.execute("UPDATE service_jobs SET params = ? WHERE id = ?", (json.dumps(merged), queued["id"]))
                job_id = str(queued["id"])
            else:
                db.execute(
                    "INSERT INTO service_jobs(id, tenant, space, kind, params, state, progress, created_at) "
                    "VALUES (?, ?, ?, 'build', ?, 'queued', ?, ?)",
                    (
                        job_id,
                        tenant,
                        space,
                        json.dumps(params),
                        json.dumps({"stage": "queued", "fraction": 0.0}),
                        now(),
                    ),
                )
        return self.get_job(job_id)

    def oldest_queued(self) -> str | None:
        rows = self._rows("SELECT MIN(created_at) FROM service_jobs WHERE state = 'queued'")
        return None if rows[0][0] is None else str(rows[0][0])

    def get_job(self, job_id: str) -> Job:
        rows = self._rows("SELECT * FROM service_jobs WHERE id = ?", (job_id,))
        if not rows:
            raise NotFoundError(f"No job {job_id!r}.")
        return self._job(rows[0])

    def jobs(self, tenant: str, space: str | None = None) -> list[Job]:
        if space is None:
            rows = self._rows("SELECT * FROM service_jobs WHERE tenant = ? ORDER BY rowid", (tenant,))
        else:
            rows = self._rows(
                "SELECT * FROM service_jobs WHERE tenant = ? AND space = ? ORDER BY rowid", (tenant, space)
            )
        return [self._job(r) for r in rows]

    def claim_job(self, owner: str, at: float) -> Job | None:
        with self._tx() as db:
            row = db.execute(
                "SELECT id FROM service_jobs AS q WHERE state = 'queued' AND NOT EXISTS ("
                "  SELECT 1 FROM service_jobs AS r WHERE r.state = 'running' AND r.tenant = q.tenant "
                "  AND r.space = q.space) ORDER BY rowid LIMIT 1"
            ).fetchone()
            if row is None:
                return None
            db.execute(
                "UPDATE service_jobs SET state = 'running', attempts = attempts + 1, started_at = ?, progress = ?, "
                "owner = ?, heartbeat_at = ? WHERE id = ?",
                (now(), json.dumps({"stage": "building", "fraction": 0.0}), owner, at, row["id"]),
            )
        return self.get_job(str(row["id"]))

    def heartbeat(self, owner: str, at: float) -> int:
        with self._tx() as db:
            return db.execute(
                "UPDATE service_jobs SET heartbeat_at = ? WHERE owner = ? AND state = 'running'", (at, owner)
            ).rowcount

    def set_progress(self, job_id: str, progress: dict[str, Any]) -> None:
        with self._tx() as db:
            db.execute("UPDATE service_jobs SET progress = ? WHERE id = ?", (json.dumps(progress), job_id))

    def requeue(self, job_id: str, note: str) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE service_jobs SET state = 'queued', attempts = MAX(attempts - 1, 0), started_at = NULL, "
                "owner = NULL, heartbeat_at = NULL, progress = ? WHERE id = ? AND state = 'running'",
                (json.dumps({"stage": "queued", "fraction": 0.0, "note": note}), job_id),
            )

    def finish_job(
        self, job_id: str, state: Literal["succeeded", "failed"], *, error: str | None = None, result: Any = None
    ) -> Job:
        progress = {"stage": "done", "fraction": 1.0} if state == "succeeded" else {"stage": "failed"}
        with self._tx() as db:
            db.execute(
                "UPDATE service_jobs SET state = ?, error = ?, result = ?, progress = ?, finished_at = ? WHERE id = ?",
                (
                    state,
                    error,
                    None if result is None else json.dumps(result),
                    json.dumps(progress),
                    now(),
                    job_id,
                ),
            )
        return self.get_job(job_id)

    def recover(self, orphaned: Orphaned) -> tuple[int, int]:
        requeued = failed = 0
        with self._tx() as db:
            running = db.execute(
                "SELECT id, owner, heartbeat_at, attempts FROM service_jobs WHERE state = 'running'"
            ).fetchall()
            for row in running:
                if not orphaned(row["owner"], row["heartbeat_at"]):
                    continue
                if row["attempts"] >= MAX_ATTEMPTS:
                    db.execute(
                        "UPDATE service_jobs SET state = 'failed', finished_at = ?, progress = ?, error = ? "
                        "WHERE id = ?",
                        (now(), json.dumps({"stage": "failed"}), INTERRUPTED, row["id"]),
                    )
                    failed += 1
                else:
                    db.execute(
                        "UPDATE service_jobs SET state = 'queued', owner = NULL, heartbeat_at = NULL, progress = ? "
                        "WHERE id = ?",
                        (json.dumps({"stage": "queued", "fraction": 0.0, "note": REQUEUED_NOTE}), row["id"]),
                    )
                    requeued += 1
        return requeued, failed

    def fail_queued(self, tenant: str, space: str, reason: str) -> int:
        with self._tx() as db:
            return db.execute(
                "UPDATE service_jobs SET state = 'failed', error = ?, finished_at = ?, progress = ? "
                "WHERE tenant = ? AND space = ? AND state = 'queued'",
                (reason, now(), json.dumps({"stage": "failed"}), tenant, space),
            ).rowcount

    def has_running(self, tenant: str, space: str) -> bool:
        return bool(
            self._rows(
                "SELECT 1 FROM service_jobs WHERE tenant = ? AND space = ? AND state = 'running'", (tenant, space)
            )
        )
