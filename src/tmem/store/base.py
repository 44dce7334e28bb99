"""The store interface. Every method is scoped by a :class:`tmem.scope.Scope` (a tenant's space); nothing reads or
writes across spaces.

Two backends implement it with one set of operations (:mod:`tmem.store.ops_ledger` and its bases, over the
SQLAlchemy Core schema of :mod:`tmem.store.schema`): SQLite (:mod:`tmem.store.sqlite`) and PostgreSQL
(:mod:`tmem.store.postgres`). Writes inside :meth:`Store.transaction` are all-or-nothing; outside one, each write
method is its own transaction.

Upsert semantics: ``put_*`` replaces a record with the same id (and its links) in the same space.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from tmem.models import (
    Erasure,
    ErasureKind,
    Item,
    ItemEdit,
    LLMCall,
    PendingRequest,
    Persona,
    Scene,
    Session,
    Space,
    SpaceSummary,
    TombstoneKind,
    Topic,
    TopicSceneLink,
    Trigger,
    TriggerFamily,
    Turn,
)
from tmem.scope import Scope

if TYPE_CHECKING:
    from tmem.store.postgres import PostgresStore

Vector = npt.NDArray[np.float32]


class StoreBase(Protocol):
    """The store itself: where it is, what it can do, its transactions and its erasure primitive."""

    @property
    def url(self) -> str:
        """The URL the store was opened by (:func:`tmem.store.open_store` opens it again; a PostgreSQL URL includes
        its password: show it to no one)."""
        ...

    def vector_host(self) -> PostgresStore | None:
        """The store whose database keeps its spaces' vectors (PostgreSQL with pgvector: the vector index reads and
        writes them there, :mod:`tmem.index.pgvector`, and another process may write between two calls), or None
        where each searching process holds them (SQLite)."""
        ...

    def close(self) -> None: ...

    def transaction(self) -> AbstractContextManager[None]:
        """All writes inside commit together or not at all. Nested calls join the outer transaction."""
        ...

    def snapshot(self) -> AbstractContextManager[None]:
        """Every read of this thread inside the block sees one committed state of the database: a reader such as
        ``tmem check`` never sees half of a build's commit. Reads only: a write inside is refused. Called inside
        ``transaction()`` it joins that transaction, which on SQLite is one state and on PostgreSQL (read committed)
        is not: take the snapshot first."""
        ...

    def scrub(self, *, vacuum: bool = True) -> bool:
        """Erasure primitive: after deletions have committed, leave no bytes of deleted content in the store's files
        (SQLite: secure delete + WAL checkpoint TRUNCATE, and a VACUUM once for a file that may hold content
        written without secure delete; ``vacuum=False`` never rebuilds). Returns False when concurrent readers kept it from completing (run it
        again later). Never call it inside a transaction."""
        ...


class ConversationRepo(Protocol):
    """Spaces, sessions and turns: the conversation as it arrived."""

    def ensure_space(self, scope: Scope) -> Space: ...

    def lock_space(self, scope: Scope) -> Space:
        """Inside :meth:`transaction`: the space (created if new), read after taking its write lock, which is held
        until the transaction ends. Every writer that numbers turns takes it first, so concurrent writers of one
        space, in any number of processes, read the last sequence number one after the other and never collide
        (PostgreSQL: a row lock on the space; SQLite: the writer's ``BEGIN IMMEDIATE`` already holds the file's
        write lock). Raises StoreError outside a transaction, where a lock would end with the statement."""
        ...

    def get_space(self, scope: Scope) -> Space:
        """Raises NotFoundError (naming the known spaces) when absent."""
        ...

    def has_space(self, scope: Scope) -> bool: ...

    def set_speakers(self, scope: Scope, speakers: Sequence[str]) -> None: ...

    def list_spaces(self, tenant: str | None = None) -> list[SpaceSummary]:
        """Every space by its store key (``T/S``, or ``S`` for the local tenant), or only tenant ``tenant``'s by
        their names, sorted by key."""
        ...

    def delete_space(self, scope: Scope) -> None:
        """Removes the space and everything in it (records, embeddings, LLM log). Follow with :meth:`scrub` to make
        the removal an erasure (``Memory.delete_space`` does)."""
        ...

    def add_session(self, scope: Scope, session: Session, turns: Sequence[Turn]) -> None: ...

    def add_sessions(self, scope: Scope, new: Sequence[tuple[Session, Sequence[Turn]]]) -> None:
        """Several sessions with their turns in one transaction, one bulk insert per table (an import's write)."""
        ...

    def sessions(self, scope: Scope) -> list[Session]:
        """In arrival order (seq)."""
        ...

    def turns(self, scope: Scope, ids: Sequence[str] | None = None) -> list[Turn]:
        """In arrival order (seq); when ids are given, only those (unknown ids raise NotFoundError)."""
        ...

    def last_turn(self, scope: Scope) -> Turn | None:
        """The turn with the highest seq (None for a space without turns)."""
        ...

    def last_session(self, scope: Scope) -> Session | None:
        """The session with the highest seq: the open session messages are appended to."""
        ...

    def find_turns(self, scope: Scope, ids: Sequence[str]) -> list[Turn]:
        """The stored turns among ``ids`` (unknown ids are left out, no error), in seq order."""
        ...

    def find_sessions(self, scope: Scope, ids: Sequence[str]) -> list[Session]:
        """The stored sessions among ``ids`` (unknown ids are left out), in seq order."""
        ...

    def add_turns(self, scope: Scope, session_id: str, turns: Sequence[Turn]) -> None:
        """Append turns to a stored session (each ``Turn.session_id`` must name it; ids and seqs must be new)."""
        ...

    def turns_after(self, scope: Scope, seq: int) -> list[Turn]:
        """The turns whose seq is greater than ``seq``, in seq order (those added since an index was loaded)."""
        ...

    def count_turns_after(self, scope: Scope, seq: int) -> int:
        """Number of turns whose seq is greater than ``seq`` (staleness: turns added since the last build)."""
        ...

    def count_turns_outside_scenes(self, scope: Scope) -> int:
        """Number of turns in no scene (staleness of a memory built before the build watermark existed)."""
        ...

    def delete_turns(self, scope: Scope, ids: Sequence[str]) -> None:
        """Delete turns and their scene membership rows (scenes themselves are left to the caller)."""
        ...


class MemoryRepo(Protocol):
    """The memory nodes a build writes: scenes, topics, items, triggers, personas and their links."""

    def put_scenes(self, scope: Scope, scenes: Sequence[Scene]) -> None:
        """Upsert; a turn may belong to one scene only (violations raise IntegrityError)."""
        ...

    def scenes(self, scope: Scope, ids: Sequence[str] | None = None) -> list[Scene]:
        """In seq order."""
        ...

    def delete_scenes(self, scope: Scope, ids: Sequence[str]) -> None:
        """Also removes their topic links, item links and scene-hosted triggers."""
        ...

    def put_topics(self, scope: Scope, topics: Sequence[Topic]) -> None: ...

    def topics(self, scope: Scope, ids: Sequence[str] | None = None) -> list[Topic]: ...

    def link_topics(self, scope: Scope, links: Sequence[TopicSceneLink]) -> None:
        """Idempotent: an existing link is kept as is."""
        ...

    def topic_links(self, scope: Scope) -> list[TopicSceneLink]: ...

    def delete_topics(self, scope: Scope, ids: Sequence[str]) -> None:
        """Also removes their scene links (used when a provisional scene is re-segmented)."""
        ...

    def put_items(self, scope: Scope, items: Sequence[Item]) -> None:
        """Upsert. Items whose id has an ``item`` tombstone (:meth:`add_tombstones`) are skipped silently: a forgotten
        item never comes back, whichever build or rebuild writes it again."""
        ...

    def items(self, scope: Scope, ids: Sequence[str] | None = None) -> list[Item]:
        """In seq order, superseded items included (check ``superseded_by``)."""
        ...

    def delete_items(self, scope: Scope, ids: Sequence[str]) -> None:
        """Also removes their scene links and item-hosted triggers."""
        ...

    def put_triggers(self, scope: Scope, triggers: Sequence[Trigger]) -> None: ...

    def triggers(
        self,
        scope: Scope,
        *,
        family: TriggerFamily | None = None,
        host_ids: Sequence[str] | None = None,
    ) -> list[Trigger]: ...

    def delete_triggers(self, scope: Scope, host_ids: Sequence[str]) -> None: ...

    def put_persona(self, scope: Scope, persona: Persona) -> None: ...

    def personas(self, scope: Scope) -> list[Persona]: ...

    def delete_personas(self, scope: Scope) -> None:
        """Removes every persona of the space (a rebuild starts without them)."""
        ...

    def scenes_of_turns(self, scope: Scope, turn_ids: Sequence[str]) -> list[Scene]:
        """The scenes holding any of ``turn_ids``, in seq order."""
        ...

    def items_of_scenes(self, scope: Scope, scene_ids: Sequence[str]) -> list[Item]:
        """Items with any of ``scene_ids`` among their source scenes, in seq order."""
        ...

    def topic_links_of(
        self, scope: Scope, *, scene_ids: Sequence[str] = (), topic_ids: Sequence[str] = ()
    ) -> list[TopicSceneLink]:
        """Topic links touching any of the given scenes or topics."""
        ...


class CacheRepo(Protocol):
    """Build checkpoints, the embedding cache, and the LLM log with its batch queue."""

    def get_state(self, scope: Scope, key: str) -> str | None:
        """Small key/value checkpoints for the build (e.g. 'segment.cursor')."""
        ...

    def set_state(self, scope: Scope, key: str, value: str | None) -> None:
        """None deletes the key."""
        ...

    def state_keys(self, scope: Scope, prefix: str = "") -> dict[str, str]: ...

    def get_embeddings(self, scope: Scope, model_id: str, text_hashes: Sequence[str]) -> dict[str, Vector]:
        """Only the hashes that are cached are returned."""
        ...

    def put_embeddings(self, scope: Scope, model_id: str, vectors: dict[str, Vector]) -> None: ...

    def delete_embeddings(self, scope: Scope, text_hashes: Sequence[str]) -> None:
        """Drop cached vectors of these text hashes, for every model."""
        ...

    def log_llm_call(self, call: LLMCall) -> None: ...

    def cached_response(self, scope: Scope, request_hash: str) -> str | None:
        """The validated JSON of the newest successful call with this hash, if any."""
        ...

    def llm_calls(self, scope: Scope | None = None) -> list[LLMCall]:
        """All logged calls (of one space, or of all), oldest first."""
        ...

    def delete_llm_responses(
        self, scope: Scope, *, containing: Sequence[str], stage_prefixes: Sequence[str] = ()
    ) -> int:
        """Delete logged calls of ``scope`` whose stored response contains any of ``containing`` (as written, or
        JSON-escaped), and every call whose stage starts with one of ``stage_prefixes``. Returns the rows deleted."""
        ...

    def put_pending(self, requests: Sequence[PendingRequest]) -> None: ...

    def pending(self, scope: Scope | None = None) -> list[PendingRequest]: ...

    def delete_pending(self, request_hashes: Sequence[str], *, scope: Scope | None = None) -> None:
        """Forget pending requests by hash: in every space (a batch result answers them all), or in ``scope`` only."""
        ...


class LedgerRepo(Protocol):
    """Forgetting and ownership: tombstones, the erasure ledger, item edit history and build leases. Every method is id-scoped: its cost depends on the ids or rows it names, never on the size of the space."""

    def add_tombstones(self, scope: Scope, kind: TombstoneKind, ids: Sequence[str]) -> None:
        """Record forgotten turn or item ids (ids only: a tombstone holds no text). Idempotent."""
        ...

    def tombstoned(self, scope: Scope, kind: TombstoneKind, ids: Sequence[str]) -> set[str]:
        """The ids among ``ids`` that carry a tombstone of ``kind``."""
        ...

    def add_erasure(self, scope: Scope, kind: ErasureKind) -> int:
        """Record in the erasure ledger that ``scope`` lost content; call it last inside the deleting transaction
        (it commits with it, and ledger entries commit in ``seq`` order across processes). Returns the entry's seq.
        The entry is pending until :meth:`mark_erased`."""
        ...

    def erasures(
        self, *, after: int = 0, scope: Scope | None = None, tenant: str | None = None, pending: bool = False
    ) -> list[Erasure]:
        """Ledger entries with ``seq > after`` in seq order, only of ``scope`` or of ``tenant`` when given, only those
        not yet erased with ``pending``."""
        ...

    def latest_erasure(self, scope: Scope | None = None) -> int:
        """The highest ledger seq (of ``scope`` when given), 0 when there is none."""
        ...

    def mark_erased(self, through: int) -> int:
        """Mark every pending entry with ``seq <= through`` erased (a scrub that started after they committed has
        completed). Returns how many changed."""
        ...

    def add_item_edit(self, scope: Scope, edit: ItemEdit) -> None:
        """Append one edit to an item's history (``edit.version`` must be new for the item)."""
        ...

    def item_edits(self, scope: Scope, item_ids: Sequence[str] | None = None) -> list[ItemEdit]:
        """Edits of the given items (or of every edited item), by item then version."""
        ...

    def delete_item_edits(self, scope: Scope, item_ids: Sequence[str]) -> None:
        """Remove the edit history of items (forgetting an item forgets its old texts too)."""
        ...

    def acquire_lease(self, scope: Scope, name: str, holder: str, ttl_seconds: float, now: float) -> bool:
        """Take the lease ``name`` of ``scope`` for ``holder`` until ``now + ttl_seconds`` (wall-clock seconds), if it
        is free, expired, or already held by ``holder`` (then it is extended). Atomic across processes."""
        ...

    def release_lease(self, scope: Scope, name: str, holder: str) -> None:
        """Give the lease back (only ``holder``'s own lease is removed)."""
        ...

    def lease_holder(self, scope: Scope, name: str) -> str | None:
        """Who holds the lease ``name`` of ``scope`` (expired or not), or None."""
        ...


class Store(StoreBase, ConversationRepo, MemoryRepo, CacheRepo, LedgerRepo, Protocol):
    """The whole store: every repository of one database (callers that need one aggregate may ask for its
    repository protocol instead)."""


def iter_batches(seq: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    """Split a sequence of ids into chunks (backends with parameter limits use it)."""
    for start in range(0, len(seq), size):
        yield seq[start : start + size]
