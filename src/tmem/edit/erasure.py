"""Erasure that says what is true, and finishes later by itself when it cannot finish now.

Every forget and every space deletion writes an entry to the store's erasure ledger (``Store.add_erasure``: the
space's name and the kind, no content) in the same transaction as the deletion, then scrubs (``Store.scrub``). The
entry stays *pending* until a scrub that started after it committed has completed (``Store.mark_erased``):

* :func:`finish_erasures` scrubs when the ledger holds pending entries and marks them erased when the scrub
  completed. A scrub that another connection's open read keeps from completing leaves them pending;
* :class:`Upkeep` (started by the long-running front ends: ``tmem serve``, ``tmem mcp``, ``tmem ui``) calls it every
  few seconds, so a pending erasure is finished without another request, and :class:`LocalSweep` with it;
* :class:`LocalSweep` drops what this node keeps outside the database of every space in the ledger since it last
  looked: saved BM25 and IVF indices (they hold the texts' words and vectors) and cached in-process indices. Several
  servers on one PostgreSQL each keep their own saves; the ledger is how a node learns that another one forgot.

An erasure has two stages (:data:`STAGES`): *deleted* (no read returns it; its bytes may remain in the store's files:
pending) and *erased*. What "erased" covers depends on the backend (:data:`SQLITE_SCOPE`, :data:`POSTGRES_SCOPE`),
every report says it (``scope``), and docs/security.md states it with the operator's part (WAL, backups).
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field, computed_field

from tmem.errors import StoreError, TmemError
from tmem.index.lexical import LexicalStore
from tmem.scope import Scope
from tmem.store.base import Store

log = logging.getLogger(__name__)

SQLITE_SCOPE = (
    "SQLite: erased from the database file and its write-ahead log (deleted content overwritten by secure_delete, "
    "then a WAL checkpoint; a file written before that is rebuilt once with VACUUM); every node's saved indices of "
    "the space are dropped by its upkeep; file-system snapshots and backups keep their copies."
)
POSTGRES_SCOPE = (
    "PostgreSQL: erased from the files of tmem's tables, their TOAST tables and indexes (VACUUM FULL, after every "
    "transaction that could still read the rows ended) and from the planner statistics (ANALYZE, VACUUM FULL "
    "pg_statistic). The server's write-ahead log, replicas, WAL archives and backups keep copies until they rotate "
    "(the operator's step: docs/security.md). Each running node drops its saved indices of the space within one "
    "upkeep period; a stopped node's index folder keeps them until it starts."
)
PENDING = (
    "Deleted: no search or export returns it. Erasure pending: another connection's open read (or a rewrite that "
    "could not take its table's lock) keeps the freed bytes; the erasure finishes by itself later (a running tmem "
    "serve, mcp or ui retries every few seconds, any other tmem command at its start)."
)
STAGES = ("deleted", "erased")  # an erasure's stages, in order (docs/security.md, "Erasure, per backend")
_MARKER = "erasures.json"


class ErasureState(BaseModel):
    """What an erasure achieved, as every front end reports it."""

    erasure: int = Field(description="The erasure's entry in the store's erasure ledger (readable later).")
    erased: bool = Field(description="The freed bytes are erased (see ``scope``); False: pending, retried.")
    scope: str = Field(description="What erased means on this backend.")

    @computed_field(description="'deleted' (no read returns it; its bytes may remain: pending) or 'erased'.")  # type: ignore[prop-decorator]
    @property
    def stage(self) -> str:
        return stage(self.erased)


def erasure_scope(store: Store) -> str:
    from tmem.index.factory import persistent_vectors

    return POSTGRES_SCOPE if persistent_vectors(store) else SQLITE_SCOPE


def finish_erasures(store: Store) -> bool:
    """Scrub when the erasure ledger holds pending entries and mark them erased when the scrub completed. True when
    no entry is pending afterwards; False when a reader of another connection kept the scrub from completing."""
    pending = store.erasures(pending=True)
    if not pending:
        return True
    through = pending[-1].seq  # every entry up to it committed before the scrub starts
    try:
        scrubbed = store.scrub()
    except StoreError as exc:  # e.g. a rewrite that met a held lock, or a user that may not compact: retried later
        log.warning("Erasure left pending (retried later): %s", exc)
        return False
    if not scrubbed:
        return False
    store.mark_erased(through)
    return True


def stage(erased: bool) -> str:
    return STAGES[1] if erased else STAGES[0]


def state_of(store: Store, seq: int, erased: bool) -> ErasureState:
    return ErasureState(erasure=seq, erased=erased, scope=erasure_scope(store))


class LocalSweep:
    """Drops this node's copies outside the database (saves under ``lexical.root``, indices held in memory through
    ``invalidate``) of every space that the store's erasure ledger lists since the sweep last looked. What it has
    seen is kept in ``<root>/erasures.json``; a folder without that mark (or with a mark ahead of the ledger: another
    database) cannot tell what it missed and is cleared whole: it is a cache."""

    def __init__(self, store: Store, lexical: LexicalStore | None, invalidate: Callable[[Scope], None]) -> None:
        self.store = store
        self.lexical = lexical
        self.invalidate = invalidate
        self._lock = threading.Lock()
        self._seen: int | None = None
        self._done: set[int] = set()  # erasures this process made and already dropped its copies for

    def handled(self, seq: int) -> None:
        """This process made erasure ``seq`` and dropped its own copies: the sweep leaves its indices alone."""
        with self._lock:
            self._done.add(seq)

    @property
    def _marker(self) -> Path | None:
        return None if self.lexical is None else self.lexical.root / _MARKER

    def _read_mark(self) -> int | None:
        if self._seen is not None or self._marker is None:
            return self._seen
        try:
            return int(json.loads(self._marker.read_text(encoding="utf-8"))["seen"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _write_mark(self, seen: int) -> None:
        self._seen = seen
        if self._marker is None:
            return
        try:
            self._marker.parent.mkdir(parents=True, exist_ok=True)
            tmp = self._marker.with_suffix(".tmp")
            tmp.write_text(json.dumps({"seen": seen}), encoding="utf-8")
            tmp.replace(self._marker)
        except OSError as exc:  # an unwritable mark costs a full clear at the next start, nothing else
            log.warning("Could not record the erasure mark in %s: %s", self._marker, exc)

    def run(self) -> list[str]:
        """Drop the local copies of every space erased since the last run; returns those spaces (``['*']`` after a
        full clear)."""
        with self._lock:
            seen = self._read_mark()
            latest = self.store.latest_erasure()
            if seen is None or seen > latest:
                self._clear()
                self._write_mark(latest)
                return ["*"]
            entries = self.store.erasures(after=seen)
            spaces = list(dict.fromkeys(e.space for e in entries if e.seq not in self._done))
            self._done -= {e.seq for e in entries}
            for space in spaces:
                scope = Scope.local(space)  # a ledger entry records its space's store key
                if self.lexical is not None:
                    self.lexical.drop(scope)
                self.invalidate(scope)
            if entries:
                self._write_mark(entries[-1].seq)
            return spaces

    def _clear(self) -> None:
        if self.lexical is not None and self.lexical.root.is_dir():
            for child in self.lexical.root.iterdir():
                if child.name == _MARKER:
                    continue
                if child.is_dir():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)


class Upkeep:
    """A daemon thread that, every ``interval`` seconds, finishes pending erasures and sweeps local copies (see the
    module docstring). Store errors are logged and retried at the next round; :meth:`stop` ends it."""

    def __init__(self, rounds: Callable[[], object], interval: float) -> None:
        self._round = rounds
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tmem-upkeep", daemon=True)
        self.rounds = 0

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._round()
            except TmemError as exc:  # a store outage: the next round retries
                log.warning("Erasure upkeep failed (retried in %.0f s): %s", self.interval, exc)
            self.rounds += 1

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
