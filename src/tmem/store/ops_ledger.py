"""Forgetting and ownership, once for both backends: tombstones, the erasure ledger, item edit history and the
per-space build lease (each method is documented in :class:`tmem.store.base.Store`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Integer, bindparam, delete, false, func, or_, select, true, update

from tmem.models import Erasure, ErasureKind, ItemEdit, TombstoneKind
from tmem.scope import Scope
from tmem.store import mappers
from tmem.store.ops_cache import CacheOps
from tmem.store.schema import erasures, item_history, leases, tombstones

# Built once (an import's tombstone check runs them per 500 ids): the space's tombstones of a kind, at most n of them;
# those among a list of ids.
_TOMBSTONE_IDS = select(tombstones.c.id).where(
    tombstones.c.tenant == bindparam("tenant"),
    tombstones.c.space == bindparam("space"),
    tombstones.c.kind == bindparam("kind"),
)
_TOMBSTONES_UP_TO = _TOMBSTONE_IDS.limit(bindparam("n", type_=Integer))
_TOMBSTONED_IN = _TOMBSTONE_IDS.where(tombstones.c.id.in_(bindparam("ids", expanding=True)))


class LedgerOps(CacheOps):
    # ------------------------------------------------------------------ tombstones
    def add_tombstones(self, scope: Scope, kind: TombstoneKind, ids: Sequence[str]) -> None:
        with self.transaction():
            self._insert_new(tombstones, self._scoped(scope, [{"kind": kind, "id": i} for i in dict.fromkeys(ids)]))

    def tombstoned(self, scope: Scope, kind: TombstoneKind, ids: Sequence[str]) -> set[str]:
        wanted = set(ids)
        if not wanted:
            return set()
        tenant, name = scope.tenant, scope.key
        values: dict[str, Any] = {"tenant": tenant, "space": name, "kind": kind}
        # An import asks about every turn id it brings, and a space has few tombstones, if any: when the space's
        # tombstones of this kind are no more than the ids asked about, one read of them (bounded by the ids) answers.
        few = self._fetch(_TOMBSTONES_UP_TO, values={**values, "n": len(wanted) + 1})
        if len(few) <= len(wanted):
            return {str(r["id"]) for r in few} & wanted
        out: set[str] = set()
        for chunk in self._chunks(list(wanted)):
            out |= {str(r["id"]) for r in self._fetch(_TOMBSTONED_IN, values={**values, "ids": chunk})}
        return out

    # ------------------------------------------------------------------ erasure ledger
    def _erasure_values(self) -> dict[str, Any]:
        """Extra column values of a new ledger entry (the deleting transaction's id on PostgreSQL)."""
        return self._identity(erasures, "seq")

    def _serialise_erasures(self) -> None:
        """Hold, until commit, whatever makes ledger entries commit in seq order (SQLite's one writer holds it)."""

    def add_erasure(self, scope: Scope, kind: ErasureKind) -> int:
        with self.transaction():
            # Entries commit in seq order, so a reader that saw seq N has seen every entry below N.
            self._serialise_erasures()
            stmt = erasures.insert().values(tenant=scope.tenant, space=scope.key, kind=kind, **self._erasure_values())
            return int(self._scalar(stmt.returning(erasures.c.seq)))

    def erasures(
        self, *, after: int = 0, scope: Scope | None = None, tenant: str | None = None, pending: bool = False
    ) -> list[Erasure]:
        query = select(erasures).where(erasures.c.seq > after).order_by(erasures.c.seq)
        if scope is not None:
            query = query.where(self._in(erasures, scope))
        if tenant is not None:
            query = query.where(erasures.c.tenant == tenant)
        if pending:
            query = query.where(erasures.c.erased == false())
        return [mappers.erasure(r) for r in self._fetch(query)]

    def latest_erasure(self, scope: Scope | None = None) -> int:
        query = select(func.coalesce(func.max(erasures.c.seq), 0))
        return int(self._scalar(query.where(self._in(erasures, scope)) if scope is not None else query))

    def mark_erased(self, through: int) -> int:
        with self.transaction():
            stmt = update(erasures).where(erasures.c.erased == false(), erasures.c.seq <= through)
            return self._run(stmt.values(erased=true()))

    # ------------------------------------------------------------------ item history
    def add_item_edit(self, scope: Scope, edit: ItemEdit) -> None:
        with self.transaction():
            self._run_many(item_history.insert(), self._scoped(scope, [mappers.item_edit_row(edit)]))

    def item_edits(self, scope: Scope, item_ids: Sequence[str] | None = None) -> list[ItemEdit]:
        query = select(item_history).where(self._in(item_history, scope))
        batches = [query] if item_ids is None else [
            query.where(item_history.c.item_id.in_(chunk)) for chunk in self._chunks(item_ids)
        ]  # fmt: skip
        edits = [mappers.item_edit(r) for q in batches for r in self._fetch(q)]
        return sorted(edits, key=lambda e: (e.item_id, e.version))

    def delete_item_edits(self, scope: Scope, item_ids: Sequence[str]) -> None:
        with self.transaction():
            for chunk in self._chunks(item_ids):
                self._delete_in(item_history, scope, item_history.c.item_id, chunk)

    # ------------------------------------------------------------------ build lease
    def acquire_lease(self, scope: Scope, name: str, holder: str, ttl_seconds: float, now: float) -> bool:
        # One statement, atomic across processes: insert, or take over an expired lease or extend one's own.
        stmt = self._insert(leases)
        stmt = stmt.on_conflict_do_update(
            index_elements=[leases.c.tenant, leases.c.space, leases.c.name],
            set_={"holder": stmt.excluded.holder, "expires_at": stmt.excluded.expires_at},
            where=or_(leases.c.holder == stmt.excluded.holder, leases.c.expires_at <= now),
        )
        row = {"tenant": scope.tenant, "space": scope.key, "name": name, "holder": holder,
               "expires_at": now + ttl_seconds}  # fmt: skip
        with self.transaction():
            return bool(self._fetch(stmt.values(**row).returning(leases.c.holder)))

    def release_lease(self, scope: Scope, name: str, holder: str) -> None:
        with self.transaction():
            self._run(delete(leases).where(self._in(leases, scope), leases.c.name == name, leases.c.holder == holder))

    def lease_holder(self, scope: Scope, name: str) -> str | None:
        rows = self._fetch(select(leases.c.holder).where(self._in(leases, scope), leases.c.name == name))
        return str(rows[0]["holder"]) if rows else None
