"""The control store (:class:`tmem.store.control.ControlStore`) on SQLAlchemy Core: one implementation for SQLite
and PostgreSQL, on its own engine to the memory's database (:mod:`tmem.store.control_dialect`), so that several API
workers (threads, processes, hosts) share keys and jobs.

Opening migrates the control tables (:mod:`tmem.store.control_migrations`). Claims, queueing and recovery run one at
a time (BEGIN IMMEDIATE on SQLite, an advisory lock on PostgreSQL): two workers never claim the same job, nor two
jobs of one space, even when they claim at the same instant.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Engine

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
from tmem.store.control_dialect import CLAIM_LOCK, MIGRATE_LOCK, connect, next_seq, serialise, transaction
from tmem.store.control_migrations import upgrade
from tmem.store.control_schema import jobs, keys

_KEY_COLUMNS = [keys.c[name] for name in ApiKey.model_fields]
_JOB_COLUMNS = [jobs.c[name] for name in Job.model_fields]
_QUEUED = jobs.c.state == "queued"
_RUNNING = jobs.c.state == "running"


def _key(row: sa.RowMapping) -> ApiKey:
    return ApiKey.model_validate(dict(row))


def _job(row: sa.RowMapping) -> Job:
    return Job.model_validate(dict(row))


def _job_is(job_id: str) -> sa.ColumnElement[bool]:
    return jobs.c.id == job_id


class SqlControl:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @classmethod
    def open(cls, url: str) -> SqlControl:
        """The control store of the database at ``url`` (``sqlite:///PATH`` or ``postgresql://...``), migrated."""
        engine = connect(url)
        try:
            with transaction(engine, "creating or upgrading the control tables", write=True) as conn:
                serialise(conn, MIGRATE_LOCK)
                upgrade(conn)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine)

    def close(self) -> None:
        self._engine.dispose()

    def _read(self, statement: sa.Executable, doing: str) -> list[sa.RowMapping]:
        with transaction(self._engine, doing) as conn:
            return list(conn.execute(statement).mappings())

    def _write(self, statement: sa.Executable, doing: str) -> int:
        with transaction(self._engine, doing, write=True) as conn:
            return conn.execute(statement).rowcount

    # ------------------------------------------------------------------ keys
    def create_key(self, tenant: str) -> tuple[ApiKey, str]:
        check_name(tenant, "tenant")
        key_id, key, digest = new_key()
        record = ApiKey(id=key_id, tenant=tenant, created_at=now())
        with transaction(self._engine, "creating an API key", write=True) as conn:
            values = {**record.model_dump(exclude_none=True), "key_hash": digest, **next_seq(conn, keys)}
            conn.execute(sa.insert(keys).values(values))
        return record, key

    def authenticate(self, key: str) -> str | None:
        key_id = key_id_of(key)
        if key_id is None:
            return None
        found = self._read(
            sa.select(keys.c.tenant, keys.c.key_hash, keys.c.revoked_at).where(keys.c.id == key_id), "checking a key"
        )
        if not found:
            return None
        row = found[0]
        if not hmac.compare_digest(str(row["key_hash"]), hash_key(key)) or row["revoked_at"] is not None:
            return None
        return str(row["tenant"])

    def keys(self, tenant: str | None = None) -> list[ApiKey]:
        query = sa.select(*_KEY_COLUMNS).order_by(keys.c.seq)
        if tenant is not None:
            query = query.where(keys.c.tenant == tenant)
        listed = [_key(row) for row in self._read(query, "listing API keys")]
        return sorted(listed, key=lambda k: k.tenant)  # stable: each tenant's keys stay in creation order

    def revoke_key(self, key_id: str) -> ApiKey:
        with transaction(self._engine, "revoking an API key", write=True) as conn:
            unrevoked = (keys.c.id == key_id) & keys.c.revoked_at.is_(None)
            conn.execute(sa.update(keys).where(unrevoked).values(revoked_at=now()))
            row = conn.execute(sa.select(*_KEY_COLUMNS).where(keys.c.id == key_id)).mappings().one_or_none()
        if row is None:
            raise NotFoundError(f"No API key with id {key_id!r}; `tmem keys list` shows the key ids.")
        return _key(row)

    # ------------------------------------------------------------------ jobs
    def create_job(self, tenant: str, space: str, params: dict[str, Any]) -> Job:
        with transaction(self._engine, "queueing a build", write=True) as conn:
            serialise(conn, CLAIM_LOCK)  # one queued job per space, also when two ask at once
            of_space = (jobs.c.tenant == tenant) & (jobs.c.space == space)
            queued = conn.execute(
                sa.select(jobs.c.id, jobs.c.params).where(of_space & _QUEUED).order_by(jobs.c.seq).limit(1)
            ).one_or_none()
            if queued is not None:
                job_id = queued.id
                merged = merged_params(queued.params, params)
                conn.execute(sa.update(jobs).where((jobs.c.tenant == tenant) & _job_is(job_id)).values(params=merged))
            else:
                job_id = "job_" + secrets.token_hex(10)
                progress = {"stage": "queued", "fraction": 0.0}
                record = Job(
                    id=job_id,
                    tenant=tenant,
                    space=space,
                    params=params,
                    state="queued",
                    progress=progress,
                    created_at=now(),
                )
                conn.execute(sa.insert(jobs).values({**record.model_dump(), "tenant": tenant, **next_seq(conn, jobs)}))
            return _job(conn.execute(sa.select(*_JOB_COLUMNS).where(_job_is(job_id))).mappings().one())

    def oldest_queued(self) -> str | None:
        rows = self._read(sa.select(sa.func.min(jobs.c.created_at).label("oldest")).where(_QUEUED), "reading jobs")
        oldest = rows[0]["oldest"]
        return None if oldest is None else str(oldest)

    def get_job(self, job_id: str) -> Job:
        rows = self._read(sa.select(*_JOB_COLUMNS).where(_job_is(job_id)), "reading a job")
        if not rows:
            raise NotFoundError(f"No job {job_id!r}.")
        return _job(rows[0])

    def jobs(self, tenant: str, space: str | None = None) -> list[Job]:
        query = sa.select(*_JOB_COLUMNS).where(jobs.c.tenant == tenant).order_by(jobs.c.seq)
        if space is not None:
            query = query.where(jobs.c.space == space)
        return [_job(row) for row in self._read(query, "listing jobs")]

    def claim_job(self, owner: str, at: float) -> Job | None:
        running = jobs.alias("running")
        busy = sa.exists().where(
            (running.c.state == "running") & (running.c.tenant == jobs.c.tenant) & (running.c.space == jobs.c.space)
        )
        with transaction(self._engine, "claiming a job", write=True) as conn:
            # Serialised: under READ COMMITTED the next statement sees every claim committed before the lock.
            serialise(conn, CLAIM_LOCK)
            found = conn.execute(
                sa.select(jobs.c.tenant, jobs.c.id).where(_QUEUED & ~busy).order_by(jobs.c.seq).limit(1)
            ).one_or_none()
            if found is None:
                return None
            claimed = conn.execute(
                sa.update(jobs)
                .where((jobs.c.tenant == found.tenant) & _job_is(found.id))
                .values(
                    state="running",
                    attempts=jobs.c.attempts + 1,
                    started_at=now(),
                    progress={"stage": "building", "fraction": 0.0},
                    owner=owner,
                    heartbeat_at=at,
                )
                .returning(*_JOB_COLUMNS)
            )
            return _job(claimed.mappings().one())

    def heartbeat(self, owner: str, at: float) -> int:
        mine = (jobs.c.owner == owner) & _RUNNING
        return self._write(sa.update(jobs).where(mine).values(heartbeat_at=at), "recording a heartbeat")

    def set_progress(self, job_id: str, progress: dict[str, Any]) -> None:
        self._write(sa.update(jobs).where(_job_is(job_id)).values(progress=progress), "recording a job's progress")

    def requeue(self, job_id: str, note: str) -> None:
        self._write(
            sa.update(jobs)
            .where(_job_is(job_id) & _RUNNING)
            .values(
                state="queued",
                attempts=sa.case((jobs.c.attempts > 0, jobs.c.attempts - 1), else_=0),
                started_at=None,
                owner=None,
                heartbeat_at=None,
                progress={"stage": "queued", "fraction": 0.0, "note": note},
            ),
            "re-queueing a job",
        )

    def finish_job(
        self, job_id: str, state: Literal["succeeded", "failed"], *, error: str | None = None, result: Any = None
    ) -> Job:
        progress = {"stage": "done", "fraction": 1.0} if state == "succeeded" else {"stage": "failed"}
        with transaction(self._engine, "finishing a job", write=True) as conn:
            finished = (
                conn.execute(
                    sa.update(jobs)
                    .where(_job_is(job_id))
                    .values(state=state, error=error, result=result, progress=progress, finished_at=now())
                    .returning(*_JOB_COLUMNS)
                )
                .mappings()
                .one_or_none()
            )
        if finished is None:
            raise NotFoundError(f"No job {job_id!r}.")
        return _job(finished)

    def recover(self, orphaned: Orphaned) -> tuple[int, int]:
        requeued = failed = 0
        with transaction(self._engine, "recovering the jobs of stopped servers", write=True) as conn:
            serialise(conn, CLAIM_LOCK)  # no claim or recovery meanwhile
            running = conn.execute(
                sa.select(jobs.c.tenant, jobs.c.id, jobs.c.owner, jobs.c.heartbeat_at, jobs.c.attempts).where(_RUNNING)
            ).all()
            for row in running:
                if not orphaned(row.owner, row.heartbeat_at):
                    continue
                this = sa.update(jobs).where((jobs.c.tenant == row.tenant) & _job_is(row.id))
                if row.attempts >= MAX_ATTEMPTS:
                    conn.execute(
                        this.values(state="failed", finished_at=now(), progress={"stage": "failed"}, error=INTERRUPTED)
                    )
                    failed += 1
                else:
                    progress = {"stage": "queued", "fraction": 0.0, "note": REQUEUED_NOTE}
                    conn.execute(this.values(state="queued", owner=None, heartbeat_at=None, progress=progress))
                    requeued += 1
        return requeued, failed

    def fail_queued(self, tenant: str, space: str, reason: str) -> int:
        of_space = (jobs.c.tenant == tenant) & (jobs.c.space == space)
        return self._write(
            sa.update(jobs)
            .where(of_space & _QUEUED)
            .values(state="failed", error=reason, finished_at=now(), progress={"stage": "failed"}),
            "failing a deleted space's jobs",
        )

    def has_running(self, tenant: str, space: str) -> bool:
        of_space = (jobs.c.tenant == tenant) & (jobs.c.space == space)
        return bool(self._read(sa.select(sa.literal(1)).where(of_space & _RUNNING).limit(1), "reading jobs"))
