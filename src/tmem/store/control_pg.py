"""PostgreSQL implementation of :class:`tmem.store.control.ControlStore`, on its own small pool to the memory's
database, so that several API workers (processes, hosts) share keys and jobs.

Its tables (``service_keys``, ``service_jobs``) come from the store's migrations (:mod:`tmem.store.pg_schema`);
opening runs them, so either may be opened first. Claims are serialised by a transaction-scoped advisory lock: two
workers never claim the same job, nor two jobs of one space, even when they claim at the same instant.
"""

from __future__ import annotations

import hmac
import json
import secrets
from typing import Any, Literal

from tmem.errors import NotFoundError
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
from tmem.store.pg_base import PgBase

_CLAIM_LOCK = 7_460_135_002  # pg_advisory_xact_lock key of job claims (the schema's migration lock is ...001)
_KEY_COLS = "id, tenant, created_at, revoked_at"
_JOB_COLS = (
    "id, tenant, space, kind, params, state, progress, error, result, attempts, created_at, started_at, "
    "finished_at, owner, heartbeat_at"
)


class PgControl(PgBase):
    @classmethod
    def open(cls, url: str, *, max_size: int = 4, timeout_s: float = 30.0) -> PgControl:
        return cls(cls.connect(url, max_size=max_size, timeout_s=timeout_s), url)

    # ------------------------------------------------------------------ keys
    def create_key(self, tenant: str) -> tuple[ApiKey, str]:
        check_name(tenant, "tenant")
        key_id, key, digest = new_key()
        created = now()
        self._exec(
            "INSERT INTO service_keys(id, tenant, key_hash, created_at) VALUES (%s, %s, %s, %s)",
            (key_id, tenant, digest, created),
        )
        return ApiKey(id=key_id, tenant=tenant, created_at=created), key

    def authenticate(self, key: str) -> str | None:
        key_id = key_id_of(key)
        if key_id is None:
            return None
        rows = self._rows("SELECT tenant, key_hash, revoked_at FROM service_keys WHERE id = %s", (key_id,))
        if not rows:
            return None
        tenant, digest, revoked = rows[0]
        if not hmac.compare_digest(str(digest), hash_key(key)) or revoked is not None:
            return None
        return str(tenant)

    @staticmethod
    def _key_of(row: tuple[Any, ...]) -> ApiKey:
        return ApiKey(**dict(zip(("id", "tenant", "created_at", "revoked_at"), row, strict=True)))

    def keys(self, tenant: str | None = None) -> list[ApiKey]:
        sql = f"SELECT {_KEY_COLS} FROM service_keys"
        rows = (
            self._rows(sql + " WHERE tenant = %s ORDER BY seq", (tenant,))
            if tenant is not None
            else self._rows(sql + ' ORDER BY tenant COLLATE "C", seq')
        )
        return [self._key_of(r) for r in rows]

    def revoke_key(self, key_id: str) -> ApiKey:
        with self.transaction():
            self._exec("UPDATE service_keys SET revoked_at = %s WHERE id = %s AND revoked_at IS NULL", (now(), key_id))
            rows = self._rows(f"SELECT {_KEY_COLS} FROM service_keys WHERE id = %s", (key_id,))
        if not rows:
            raise NotFoundError(f"No API key with id {key_id!r}; `tmem keys list` shows the key ids.")
        return self._key_of(rows[0])

    # ------------------------------------------------------------------ jobs
    @staticmethod
    def _job(row: tuple[Any, ...]) -> Job:
        data = dict(zip([c.strip() for c in _JOB_COLS.split(",")], row, strict=True))
        data["params"] = json.loads(data["params"])
        data["progress"] = json.loads(data["progress"])
        data["result"] = None if data["result"] is None else json.loads(data["result"])
        return Job(**data)

    def create_job(self, tenant: str, space: str, params: dict[str, Any]) -> Job:
        job_id = "job_" + secrets.token_hex(10)
        with self.transaction():
            self._rows("SELECT pg_advisory_xact_lock(%s)", (_CLAIM_LOCK,))  # one queued job per space, also racing
            queued = self._rows(
                "SELECT id, params FROM service_jobs WHERE tenant = %s AND space = %s AND state = 'queued' "
                "ORDER BY seq LIMIT 1",
                (tenant, space),
            )
            if queued:
                job_id = str(queued[0][0])
                merged = merged_params(json.loads(queued[0][1]), params)
                self._exec(
                    "UPDATE service_jobs SET params = %s WHERE tenant = %s AND id = %s",
                    (json.dumps(merged), tenant, job_id),
                )
            else:
                self._exec(
                    "INSERT INTO service_jobs(tenant, id, space, kind, params, state, progress, created_at) "
                    "VALUES (%s, %s, %s, 'build', %s, 'queued', %s, %s)",
                    (
                        tenant,
                        job_id,
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
        rows = self._rows(f"SELECT {_JOB_COLS} FROM service_jobs WHERE id = %s", (job_id,))
        if not rows:
            raise NotFoundError(f"No job {job_id!r}.")
        return self._job(rows[0])

    def jobs(self, tenant: str, space: str | None = None) -> list[Job]:
        if space is None:
            rows = self._rows(f"SELECT {_JOB_COLS} FROM service_jobs WHERE tenant = %s ORDER BY seq", (tenant,))
        else:
            rows = self._rows(
                f"SELECT {_JOB_COLS} FROM service_jobs WHERE tenant = %s AND space = %s ORDER BY seq", (tenant, space)
            )
        return [self._job(r) for r in rows]

    def claim_job(self, owner: str, at: float) -> Job | None:
        with self.transaction():
            # Serialise claims: under READ COMMITTED the next statement sees every claim committed before the lock.
            self._rows("SELECT pg_advisory_xact_lock(%s)", (_CLAIM_LOCK,))
            rows = self._rows(
                "SELECT tenant, id FROM service_jobs AS q WHERE state = 'queued' AND NOT EXISTS ("
                "  SELECT 1 FROM service_jobs AS r WHERE r.state = 'running' AND r.tenant = q.tenant "
                "  AND r.space = q.space) ORDER BY seq LIMIT 1"
            )
            if not rows:
                return None
            tenant, job_id = rows[0]
            self._exec(
                "UPDATE service_jobs SET state = 'running', attempts = attempts + 1, started_at = %s, progress = %s, "
                "owner = %s, heartbeat_at = %s WHERE tenant = %s AND id = %s",
                (now(), json.dumps({"stage": "building", "fraction": 0.0}), owner, at, tenant, job_id),
            )
        return self.get_job(str(job_id))

    def heartbeat(self, owner: str, at: float) -> int:
        return self._exec(
            "UPDATE service_jobs SET heartbeat_at = %s WHERE owner = %s AND state = 'running'", (at, owner)
        )

    def set_progress(self, job_id: str, progress: dict[str, Any]) -> None:
        self._exec("UPDATE service_jobs SET progress = %s WHERE id = %s", (json.dumps(progress), job_id))

    def requeue(self, job_id: str, note: str) -> None:
        self._exec(
            "UPDATE service_jobs SET state = 'queued', attempts = GREATEST(attempts - 1, 0), started_at = NULL, "
            "owner = NULL, heartbeat_at = NULL, progress = %s WHERE id = %s AND state = 'running'",
            (json.dumps({"stage": "queued", "fraction": 0.0, "note": note}), job_id),
        )

    def finish_job(
        self, job_id: str, state: Literal["succeeded", "failed"], *, error: str | None = None, result: Any = None
    ) -> Job:
        progress = {"stage": "done", "fraction": 1.0} if state == "succeeded" else {"stage": "failed"}
        self._exec(
            "UPDATE service_jobs SET state = %s, error = %s, result = %s, progress = %s, finished_at = %s "
            "WHERE id = %s",
            (state, error, None if result is None else json.dumps(result), json.dumps(progress), now(), job_id),
        )
        return self.get_job(job_id)

    def recover(self, orphaned: Orphaned) -> tuple[int, int]:
        requeued = failed = 0
        with self.transaction():
            self._rows("SELECT pg_advisory_xact_lock(%s)", (_CLAIM_LOCK,))  # no claim or recovery meanwhile
            running = self._rows(
                "SELECT tenant, id, owner, heartbeat_at, attempts FROM service_jobs WHERE state = 'running'"
            )
            for tenant, job_id, owner, heartbeat_at, attempts in running:
                if not orphaned(owner, heartbeat_at):
                    continue
                if attempts >= MAX_ATTEMPTS:
                    self._exec(
                        "UPDATE service_jobs SET state = 'failed', finished_at = %s, progress = %s, error = %s "
                        "WHERE tenant = %s AND id = %s",
                        (now(), json.dumps({"stage": "failed"}), INTERRUPTED, tenant, job_id),
                    )
                    failed += 1
                else:
                    self._exec(
                        "UPDATE service_jobs SET state = 'queued', owner = NULL, heartbeat_at = NULL, progress = %s "
                        "WHERE tenant = %s AND id = %s",
                        (json.dumps({"stage": "queued", "fraction": 0.0, "note": REQUEUED_NOTE}), tenant, job_id),
                    )
                    requeued += 1
        return requeued, failed

    def fail_queued(self, tenant: str, space: str, reason: str) -> int:
        return self._exec(
            "UPDATE service_jobs SET state = 'failed', error = %s, finished_at = %s, progress = %s "
            "WHERE tenant = %s AND space = %s AND state = 'queued'",
            (reason, now(), json.dumps({"stage": "failed"}), tenant, space),
        )

    def has_running(self, tenant: str, space: str) -> bool:
        return bool(
            self._rows(
                "SELECT 1 FROM service_jobs WHERE tenant = %s AND space = %s AND state = 'running'", (tenant, space)
            )
        )
