"""A bounded, per-space cache of built indices: least recently used first out, bounded by the bytes they hold, with
one lock per space.

A search of space A never waits for a (re)build of space B: the cache-wide lock only guards the bookkeeping (a few
dictionary operations), and the build runs under the space's own lock, so two searches of the same cold space build
it once. An entry is reused while its fingerprint (what the caller derives from the store, e.g. build checkpoints)
is unchanged. An index larger than the whole budget is still returned to the caller, but not kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from tmem.scope import Scope

T = TypeVar("T")


@dataclass
class _Entry(Generic[T]):
    fingerprint: Hashable
    value: T
    nbytes: int


class SpaceCache(Generic[T]):
    """LRU cache of one value per space, bounded by ``max_bytes`` (as reported by ``size_of``)."""

    def __init__(self, max_bytes: int, size_of: Callable[[T], int]) -> None:
        if max_bytes <= 0:
            raise ValueError("SpaceCache needs a positive byte budget.")
        self.max_bytes = max_bytes
        self._size_of = size_of
        self._entries: OrderedDict[Scope, _Entry[T]] = OrderedDict()
        self._locks: dict[Scope, threading.Lock] = {}
        self._guard = threading.Lock()
        self.builds = 0
        self.evictions = 0

    @property
    def nbytes(self) -> int:
        with self._guard:
            return sum(e.nbytes for e in self._entries.values())

    def spaces(self) -> list[Scope]:
        """Cached spaces, least recently used first."""
        with self._guard:
            return list(self._entries)

    def _lookup(self, space: Scope, fingerprint: Hashable) -> T | None:
        with self._guard:
            hit = self._entries.get(space)
            if hit is None or hit.fingerprint != fingerprint:
                return None
            self._entries.move_to_end(space)
            return hit.value

    def stale(self, space: Scope) -> T | None:
        """The value cached for ``space`` whatever its fingerprint (a base for an incremental update), or None."""
        with self._guard:
            hit = self._entries.get(space)
            return None if hit is None else hit.value

    def get(self, space: Scope, fingerprint: Hashable, build: Callable[[], T], *, force: bool = False) -> T:
        """The cached value of ``space`` if its fingerprint matches (and not ``force``), else ``build()`` (once,
        under the space's lock; ``build`` may read :meth:`stale` to update the previous value)."""
        found = None if force else self._lookup(space, fingerprint)
        if found is not None:
            return found
        with self._guard:
            lock = self._locks.setdefault(space, threading.Lock())
        with lock:
            found = None if force else self._lookup(space, fingerprint)  # another thread may have built it meanwhile
            if found is not None:
                return found
            value = build()
            nbytes = self._size_of(value)
            with self._guard:
                self.builds += 1
                self._entries.pop(space, None)
                if nbytes <= self.max_bytes:
                    self._entries[space] = _Entry(fingerprint, value, nbytes)
                    total = sum(e.nbytes for e in self._entries.values())
                    while total > self.max_bytes:
                        _, old = self._entries.popitem(last=False)
                        total -= old.nbytes
                        self.evictions += 1
            return value

    def invalidate(self, space: Scope | None = None) -> None:
        """Forget one space's value (or every value); the next :meth:`get` builds again."""
        with self._guard:
            if space is None:
                self._entries.clear()
            else:
                self._entries.pop(space, None)
