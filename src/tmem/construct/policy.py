"""The build policy for services: when to build a space, and never two builds of one space at once.

* **When**: a space is due once ``after_turns`` turns are not yet built, or once it has any unbuilt turn and no
  message arrived for ``idle_seconds`` (``Settings.build_after_turns`` / ``build_idle_seconds``). The caller (a
  service) says how long the space has been idle: only it knows when messages arrived.
* **One at a time**: every build takes the space's lease, a row in the store (``Store.acquire_lease``) taken inside a
  write transaction, so it excludes builds in other threads and processes sharing the store. A lease expires after
  ``Settings.build_lease_seconds`` (a crashed builder cannot block the space for ever), and a lease whose holder was
  a process of this host that no longer exists (a build killed with ``kill -9``) is taken over at once. Lease times are wall-clock
  seconds (bookkeeping only, never a memory date).
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from pydantic import BaseModel, ConfigDict, Field

from tmem.errors import BuildBusy
from tmem.scope import Scope
from tmem.store.base import Store

BUILD_LEASE = "build"


class Staleness(BaseModel):
    """How far the built memory of a space lags behind its conversation."""

    model_config = ConfigDict(frozen=True)

    space: str
    built: bool = Field(description="A memory was built for the space.")
    stale_turns: int = Field(
        ge=0, description="Turns added since the last build started: searched as raw turns, in no scene or item yet."
    )

    @property
    def stale(self) -> bool:
        return self.stale_turns > 0


class BuildPolicy(BaseModel):
    model_config = ConfigDict(frozen=True)

    after_turns: int = Field(ge=1)
    idle_seconds: float = Field(ge=0)

    def due(self, stale_turns: int, idle_seconds: float) -> bool:
        """True when a build should start now (``idle_seconds``: time since the space's last message arrived)."""
        if stale_turns <= 0:
            return False
        return stale_turns >= self.after_turns or idle_seconds >= self.idle_seconds


def lease_holder() -> str:
    """A name for this builder that no other process or call shares."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def holder_is_dead(holder: str) -> bool:
    """True when ``holder`` names a process of this host that no longer runs (its lease can be taken over)."""
    host, _, rest = holder.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False  # another machine's builder: only its lease's expiry can free the space
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, owned by another user
    return False


def _take(store: Store, space: Scope, holder: str, ttl_seconds: float) -> bool:
    if store.acquire_lease(space, BUILD_LEASE, holder, ttl_seconds, time.time()):
        return True
    current = store.lease_holder(space, BUILD_LEASE)
    if current is None or holder_is_dead(current):
        if current is not None:
            store.release_lease(space, BUILD_LEASE, current)  # only that dead holder's row; acquiring stays atomic
        return store.acquire_lease(space, BUILD_LEASE, holder, ttl_seconds, time.time())
    return False


@contextmanager
def build_lease(store: Store, space: Scope, ttl_seconds: float) -> Iterator[str]:
    """Hold the build lease of ``space`` for the block; raises BuildBusy when another build holds it."""
    holder = lease_holder()
    if not _take(store, space, holder, ttl_seconds):
        raise BuildBusy(
            "Another build of space {space!r} is running; wait for it to finish (a build that crashed frees the "
            "space after {ttl:g} s, TMEM_BUILD_LEASE_SECONDS).",
            space=space,
            ttl=ttl_seconds,
        )
    try:
        yield holder
    finally:
        store.release_lease(space, BUILD_LEASE, holder)
