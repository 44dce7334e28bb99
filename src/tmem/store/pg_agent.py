"""PostgreSQL side of the agent operations (issue 9): id-scoped reads and writes for ``Memory.add_messages``, item
edits, forgetting (tombstones, targeted deletes) and the per-space build lease. Mixed into
:class:`tmem.store.postgres.PostgresStore`; each method is documented in :class:`tmem.store.base.Store`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import psycopg

from tmem.errors import IntegrityError, StoreError
from tmem.models import Erasure, ErasureKind, Item, ItemEdit, Scene, Session, TombstoneKind, TopicSceneLink, Turn
from tmem.store.pg_base import pg_store_error
from tmem.store.pg_records import PgRecords

_SCOPE = "tenant = %s AND space = %s"
_ERASURE_LOCK = 7_460_135_023  # pg_advisory_xact_lock key serialising erasure-ledger inserts
_TURN = "id, session_id, seq, speaker, text, time, caption, metadata"
_TEXT_TABLES = (
    "turns", "sessions", "scenes", "scene_turns", "topics", "topic_scenes", "items", "item_scenes", "item_history",
    "triggers", "trigger_views", "personas", "embeddings", "llm_calls", "pending_requests", "build_state",
    "vector_index",
)  # fmt: skip


def _turn(r: Sequence[object]) -> Turn:
    return Turn(
        id=r[0], session_id=r[1], seq=r[2], speaker=r[3], text=r[4], time=r[5], caption=r[6],
        metadata=json.loads(str(r[7])),
    )  # fmt: skip


def _session(r: Sequence[object]) -> Session:
    return Session(id=r[0], seq=r[1], started_at=r[2], content_hash=r[3])


class PgAgentOps(PgRecords):
    """Agent operations of the PostgreSQL store."""

    def last_turn(self, space: str) -> Turn | None:
        rows = self._rows(f"SELECT {_TURN} FROM turns WHERE {_SCOPE} ORDER BY seq DESC LIMIT 1", self._key(space))
        return _turn(rows[0]) if rows else None

    def last_session(self, space: str) -> Session | None:
        rows = self._rows(
            f"SELECT id, seq, started_at, content_hash FROM sessions WHERE {_SCOPE} ORDER BY seq DESC LIMIT 1",
            self._key(space),
        )
        return _session(rows[0]) if rows else None

    def find_turns(self, space: str, ids: Sequence[str]) -> list[Turn]:
        rows = self._rows(f"SELECT {_TURN} FROM turns WHERE {_SCOPE} AND id = ANY(%s)", (*self._key(space), list(ids)))
        return sorted((_turn(r) for r in rows), key=lambda t: t.seq)

    def find_sessions(self, space: str, ids: Sequence[str]) -> list[Session]:
        rows = self._rows(
            f"SELECT id, seq, started_at, content_hash FROM sessions WHERE {_SCOPE} AND id = ANY(%s)",
            (*self._key(space), list(ids)),
        )
        return sorted((_session(r) for r in rows), key=lambda s: s.seq)

    def add_turns(self, space: str, session_id: str, turns: Sequence[Turn]) -> None:
        key = self._key(space)
        if not self._rows(f"SELECT 1 FROM sessions WHERE {_SCOPE} AND id = %s", (*key, session_id)):
            raise IntegrityError(f"Space {space!r} has no session {session_id!r} to append turns to.")
        for t in turns:
            if t.session_id != session_id:
                raise IntegrityError(f"Turn {t.id} names session {t.session_id!r}, expected {session_id!r}.")
        with self.transaction():
            self._many(
                "INSERT INTO turns(tenant, space, id, session_id, seq, speaker, text, time, caption, metadata) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    (
                        *key,
                        t.id,
                        t.session_id,
                        t.seq,
                        t.speaker,
                        t.text,
                        t.time.isoformat(),
                        t.caption,
                        json.dumps(t.metadata, ensure_ascii=False),
                    )
                    for t in turns
                ],
            )

    def turns_after(self, space: str, seq: int) -> list[Turn]:
        rows = self._rows(
            f"SELECT {_TURN} FROM turns WHERE {_SCOPE} AND seq > %s ORDER BY seq", (*self._key(space), seq)
        )
        return [_turn(r) for r in rows]

    def count_turns_after(self, space: str, seq: int) -> int:
        return int(
            self._rows(f"SELECT COUNT(*) FROM turns WHERE {_SCOPE} AND seq > %s", (*self._key(space), seq))[0][0]
        )

    def count_turns_outside_scenes(self, space: str) -> int:
        return int(
            self._rows(
                "SELECT COUNT(*) FROM turns t WHERE t.tenant = %s AND t.space = %s AND NOT EXISTS (SELECT 1 FROM "
                "scene_turns st WHERE st.tenant = t.tenant AND st.space = t.space AND st.turn_id = t.id)",
                self._key(space),
            )[0][0]
        )

    def delete_turns(self, space: str, ids: Sequence[str]) -> None:
        key, chosen = self._key(space), list(ids)
        with self.transaction():
            self._exec(f"DELETE FROM scene_turns WHERE {_SCOPE} AND turn_id = ANY(%s)", (*key, chosen))
            self._exec(f"DELETE FROM turns WHERE {_SCOPE} AND id = ANY(%s)", (*key, chosen))

    def scenes_of_turns(self, space: str, turn_ids: Sequence[str]) -> list[Scene]:
        rows = self._rows(
            f"SELECT DISTINCT scene_id FROM scene_turns WHERE {_SCOPE} AND turn_id = ANY(%s)",
            (*self._key(space), list(turn_ids)),
        )
        ids = sorted(str(r[0]) for r in rows)
        return self.scenes(space, ids) if ids else []

    def items_of_scenes(self, space: str, scene_ids: Sequence[str]) -> list[Item]:
        rows = self._rows(
            f"SELECT DISTINCT item_id FROM item_scenes WHERE {_SCOPE} AND scene_id = ANY(%s)",
            (*self._key(space), list(scene_ids)),
        )
        ids = sorted(str(r[0]) for r in rows)
        return self.items(space, ids) if ids else []

    def topic_links_of(
        self, space: str, *, scene_ids: Sequence[str] = (), topic_ids: Sequence[str] = ()
    ) -> list[TopicSceneLink]:
        rows = self._rows(
            f"SELECT topic_id, scene_id FROM topic_scenes WHERE {_SCOPE} AND (scene_id = ANY(%s) OR topic_id = ANY(%s))",
            (*self._key(space), list(scene_ids), list(topic_ids)),
        )
        return [TopicSceneLink(topic_id=t, scene_id=s) for t, s in sorted(set(rows))]

    def add_tombstones(self, space: str, kind: TombstoneKind, ids: Sequence[str]) -> None:
        with self.transaction():
            self._many(
                "INSERT INTO tombstones(tenant, space, kind, id) VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                [(*self._key(space), kind, i) for i in dict.fromkeys(ids)],
            )

    def tombstoned(self, space: str, kind: TombstoneKind, ids: Sequence[str]) -> set[str]:
        rows = self._rows(
            f"SELECT id FROM tombstones WHERE {_SCOPE} AND kind = %s AND id = ANY(%s)",
            (*self._key(space), kind, list(ids)),
        )
        return {str(r[0]) for r in rows}

    # ------------------------------------------------------------------ erasure ledger
    def add_erasure(self, space: str, kind: ErasureKind) -> int:
        with self.transaction():
            # Held to commit: entries commit in seq order, so a reader that saw seq N has seen every entry below N.
            self._rows("SELECT pg_advisory_xact_lock(%s)", (_ERASURE_LOCK,))
            rows = self._rows(
                "INSERT INTO erasures(tenant, space, kind, xid) VALUES (%s, %s, %s, pg_current_xact_id()::text::bigint) "
                "RETURNING seq",
                (*self._key(space), kind),
            )
            return int(rows[0][0])

    def erasures(
        self, *, after: int = 0, space: str | None = None, tenant: str | None = None, pending: bool = False
    ) -> list[Erasure]:
        sql, params = "SELECT seq, space, kind, erased FROM erasures WHERE seq > %s", list[object]([after])
        if space is not None:
            sql, params = f"{sql} AND {_SCOPE}", [*params, *self._key(space)]
        if tenant is not None:
            sql, params = sql + " AND tenant = %s", [*params, tenant]
        if pending:
            sql += " AND NOT erased"
        rows = self._rows(sql + " ORDER BY seq", params)
        return [Erasure(seq=r[0], space=r[1], kind=r[2], erased=r[3]) for r in rows]

    def latest_erasure(self, space: str | None = None) -> int:
        if space is None:
            return int(self._rows("SELECT COALESCE(MAX(seq), 0) FROM erasures")[0][0])
        return int(self._rows(f"SELECT COALESCE(MAX(seq), 0) FROM erasures WHERE {_SCOPE}", self._key(space))[0][0])

    def mark_erased(self, through: int) -> int:
        return self._exec("UPDATE erasures SET erased = TRUE WHERE NOT erased AND seq <= %s", (through,))

    def add_item_edit(self, space: str, edit: ItemEdit) -> None:
        self._exec(
            "INSERT INTO item_history(tenant, space, item_id, version, change, old_text, new_text, at) "
            "VALUES (%s, %s, %s, %s, 'edited', %s, %s, %s)",
            (*self._key(space), edit.item_id, edit.version, edit.old_text, edit.new_text, edit.at.isoformat()),
        )

    def item_edits(self, space: str, item_ids: Sequence[str] | None = None) -> list[ItemEdit]:
        sql = f"SELECT item_id, version, old_text, new_text, at FROM item_history WHERE {_SCOPE}"
        params: tuple[object, ...] = self._key(space)
        if item_ids is not None:
            sql, params = sql + " AND item_id = ANY(%s)", (*params, list(item_ids))
        edits = [
            ItemEdit(item_id=r[0], version=r[1], old_text=r[2], new_text=r[3], at=r[4]) for r in self._rows(sql, params)
        ]
        return sorted(edits, key=lambda e: (e.item_id, e.version))

    def delete_item_edits(self, space: str, item_ids: Sequence[str]) -> None:
        self._exec(
            f"DELETE FROM item_history WHERE {_SCOPE} AND item_id = ANY(%s)", (*self._key(space), list(item_ids))
        )

    def delete_embeddings(self, space: str, text_hashes: Sequence[str]) -> None:
        self._exec(
            f"DELETE FROM embeddings WHERE {_SCOPE} AND text_hash = ANY(%s)", (*self._key(space), list(text_hashes))
        )

    def delete_llm_responses(self, space: str, *, containing: Sequence[str], stage_prefixes: Sequence[str] = ()) -> int:
        needles: set[str] = set()
        for text in containing:
            if text.strip():
                needles |= {text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}
        deleted = 0
        with self.transaction():
            for needle in sorted(needles):
                deleted += self._exec(
                    f"DELETE FROM llm_calls WHERE {_SCOPE} AND response IS NOT NULL AND strpos(response, %s) > 0",
                    (*self._key(space), needle),
                )
            for prefix in stage_prefixes:
                deleted += self._exec(
                    f"DELETE FROM llm_calls WHERE {_SCOPE} AND starts_with(stage, %s)", (*self._key(space), prefix)
                )
        return deleted

    def acquire_lease(self, space: str, name: str, holder: str, ttl_seconds: float, now: float) -> bool:
        # One statement, atomic across processes: insert, or take over an expired or own lease.
        rows = self._rows(
            "INSERT INTO leases(tenant, space, name, holder, expires_at) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (tenant, space, name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at "
            "WHERE leases.holder = excluded.holder OR leases.expires_at <= %s RETURNING holder",
            (*self._key(space), name, holder, now + ttl_seconds, now),
        )
        return bool(rows)

    def release_lease(self, space: str, name: str, holder: str) -> None:
        self._exec(
            f"DELETE FROM leases WHERE {_SCOPE} AND name = %s AND holder = %s", (*self._key(space), name, holder)
        )

    def lease_holder(self, space: str, name: str) -> str | None:
        rows = self._rows(f"SELECT holder FROM leases WHERE {_SCOPE} AND name = %s", (*self._key(space), name))
        return str(rows[0][0]) if rows else None

    def scrub(self, *, vacuum: bool = True) -> bool:
        """Erasure on PostgreSQL: deleted rows stay in their pages until VACUUM reclaims them. ``vacuum=True`` runs
        ``VACUUM FULL`` on the tables that hold memory text (each is rewritten into new files and the old files are
        removed; it locks each table while it runs, so run it off-peak in a shared database); ``vacuum=False`` runs a
        plain ``VACUUM`` (space marked reusable, bytes overwritten as pages are reused). The write-ahead log,
        replicas and backups keep their copies for PostgreSQL's own retention (docs/scaling.md)."""
        if self._pinned() is not None:
            raise StoreError("scrub() cannot run inside a transaction; call it after the transaction ends.")
        tables = [r[0] for r in self._rows("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
        chosen = [t for t in _TEXT_TABLES if t in tables]
        try:
            with self._pool.connection() as conn:
                conn.autocommit = True
                try:
                    for table in chosen:
                        conn.execute(f"VACUUM {'FULL ' if vacuum else ''}{table}")
                finally:
                    conn.autocommit = False
        except psycopg.Error as exc:
            raise pg_store_error(exc, self._where, "vacuuming deleted rows away") from exc
        return True
