"""The service's control records: tenants' API keys (stored hashed) and persisted build jobs.

They live in the same database as the memory but behind their own small protocol, because only the HTTP service and
the ``tmem keys`` commands use them: one implementation on SQLAlchemy Core for both backends
(:mod:`tmem.store.control_sql`), its tables migrated by their own Alembic history (:mod:`tmem.store.control_schema`,
:mod:`tmem.store.control_migrations`). A tenant exists as long as it
has a key; its spaces are the scopes ``Scope(TENANT, SPACE)`` (:func:`tenant_scope`), and tenant and space names
contain no ``/``.

Keys look like ``tmem_<key id>_<secret>``: the key id (public, shown by ``tmem keys list``) finds the row, and the
SHA-256 of the whole key is compared in constant time with the stored hash. The key itself is shown once, when it is
created, and never stored. The SHA-256 of a 256-bit random secret needs no salt or slow hash: nothing can be guessed.

Job times and key times are bookkeeping times from the machine's clock (like the LLM log's); they never date a memory.

Several servers may share one database (PostgreSQL, or one SQLite file on one host). A claimed job records its
``owner`` (the claiming server process, named like a build-lease holder) and that owner's ``heartbeat_at``; recovery
re-queues only the running jobs the caller's rule calls orphaned (their server stopped), never a live server's.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from tmem.errors import InputError
from tmem.scope import Scope
from tmem.store.base import Store

JobState = Literal["queued", "running", "succeeded", "failed"]
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
_NAME = re.compile(NAME_PATTERN)
KEY_PREFIX = "tmem_"
MAX_ATTEMPTS = 3  # a job interrupted this many times (server stopped mid-build) is failed, not re-queued again

# (owner, heartbeat_at) of a running job -> True when the server that ran it has stopped (tmem.service.worker).
Orphaned = Callable[[str | None, float | None], bool]


def check_name(value: str, what: str) -> str:
    """A tenant or service space name: 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit."""
    if not _NAME.fullmatch(value):
        raise InputError(
            f"Invalid {what} name {value!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or "
            "digit (no '/')."
        )
    return value


def tenant_scope(tenant: str, space: str) -> Scope:
    """The scope of a tenant's space, both names checked (InputError naming the bad one)."""
    return Scope(check_name(tenant, "tenant"), check_name(space, "space"))


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_key() -> tuple[str, str, str]:
    """A fresh API key: (key id, full key, sha256 hex of the full key)."""
    key_id = secrets.token_hex(6)
    key = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    return key_id, key, hash_key(key)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def key_id_of(key: str) -> str | None:
    """The key id inside a presented key, or None when it does not have the key's shape."""
    if not key.startswith(KEY_PREFIX):
        return None
    key_id, sep, secret = key[len(KEY_PREFIX) :].partition("_")
    if not sep or len(key_id) != 12 or not secret:
        return None
    return key_id


class ApiKey(BaseModel):
    """A key as listed: never the key itself."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(description="Public key id (the 12 hex digits after 'tmem_' in the key).")
    tenant: str
    created_at: str
    revoked_at: str | None = None


class Job(BaseModel):
    """A persisted background job (a build of one space)."""

    model_config = ConfigDict(frozen=True)

    id: str
    tenant: str = Field(exclude=True)
    space: str = Field(description="The tenant's space name.")
    kind: Literal["build"] = "build"
    params: dict[str, Any] = Field(default_factory=dict, description="e.g. {'rebuild': true}.")
    state: JobState
    progress: dict[str, Any] = Field(
        default_factory=dict, description="stage ('queued', 'building', 'done'), fraction (0..1), note."
    )
    error: str | None = Field(default=None, description="Why the job failed, and what to do.")
    result: dict[str, Any] | None = Field(default=None, description="The build report of a succeeded job.")
    attempts: int = Field(default=0, description="How many times a worker started the job.")
    owner: str | None = Field(default=None, exclude=True)
    heartbeat_at: float | None = Field(default=None, exclude=True)
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None


class ControlStore(Protocol):
    def close(self) -> None: ...

    # ------------------------------------------------------------------ keys
    def create_key(self, tenant: str) -> tuple[ApiKey, str]:
        """A new key for ``tenant`` (created with its first key): the listed record and the key, shown once."""
        ...

    def authenticate(self, key: str) -> str | None:
        """The tenant of a valid, unrevoked key, else None (constant-time comparison of hashes)."""
        ...

    def keys(self, tenant: str | None = None) -> list[ApiKey]: ...

    def revoke_key(self, key_id: str) -> ApiKey:
        """Raises NotFoundError for an unknown key id; revoking twice keeps the first time."""
        ...

    # ------------------------------------------------------------------ jobs
    def create_job(self, tenant: str, space: str, params: dict[str, Any]) -> Job:
        """Queue a build of the space, or return the space's job already queued (one queued job per space is
        enough: it builds everything stored when it runs). A queued plain build asked again as a rebuild becomes
        a rebuild (:func:`merged_params`)."""
        ...

    def oldest_queued(self) -> str | None:
        """``created_at`` of the oldest queued job of any tenant (for the health check), None when none is."""
        ...

    def get_job(self, job_id: str) -> Job:
        """Raises NotFoundError when absent."""
        ...

    def jobs(self, tenant: str, space: str | None = None) -> list[Job]:
        """Oldest first."""
        ...

    def claim_job(self, owner: str, at: float) -> Job | None:
        """Atomically move the oldest queued job whose space has no running job to 'running' (attempts + 1), owned
        by ``owner`` with its heartbeat at ``at`` (wall-clock seconds). Safe between processes."""
        ...

    def heartbeat(self, owner: str, at: float) -> int:
        """``owner`` is alive: stamp its running jobs' heartbeat with ``at``. Returns how many."""
        ...

    def set_progress(self, job_id: str, progress: dict[str, Any]) -> None: ...

    def requeue(self, job_id: str, note: str) -> None:
        """A claimed job goes back to the queue without counting the attempt (its space was busy)."""
        ...

    def finish_job(
        self, job_id: str, state: Literal["succeeded", "failed"], *, error: str | None = None, result: Any = None
    ) -> Job: ...

    def recover(self, orphaned: Orphaned) -> tuple[int, int]:
        """Running jobs whose (owner, heartbeat_at) ``orphaned`` accepts (their server stopped) are re-queued
        (builds resume from their checkpoints), or failed once they were started MAX_ATTEMPTS times. Jobs of live
        owners are left alone. Returns (re-queued, failed)."""
        ...

    def fail_queued(self, tenant: str, space: str, reason: str) -> int:
        """Fail the space's queued jobs (its space was deleted); returns how many."""
        ...

    def has_running(self, tenant: str, space: str) -> bool: ...


def merged_params(queued: dict[str, Any], asked: dict[str, Any]) -> dict[str, Any]:
    """The params of a queued job asked for again: a rebuild wins over a plain build; a request (no ``auto``) wins
    over the build policy's."""
    merged = dict(queued)
    merged["rebuild"] = bool(queued.get("rebuild")) or bool(asked.get("rebuild"))
    if not asked.get("auto"):
        merged.pop("auto", None)
    return merged


INTERRUPTED = (
    f"The server stopped during this build {MAX_ATTEMPTS} times; it was not retried again. Check the server's log, "
    "then POST .../build again (the build resumes from its checkpoints)."
)
REQUEUED_NOTE = "re-queued: the server running it stopped mid-build"


def open_control(store: Store) -> ControlStore:
    """The control store in the same database as ``store`` (a SQLite file or a PostgreSQL database)."""
    return open_control_url(store.url)


def open_control_url(url: str) -> ControlStore:
    """The control store of the database at ``url`` (``sqlite:///PATH`` or ``postgresql://...``), migrated."""
    from tmem.store.control_sql import SqlControl

    return SqlControl.open(url)
