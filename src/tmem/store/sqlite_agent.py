"""The SQLite side of the agent operations (issue 9): id-scoped reads and writes for ``Memory.add_messages``, item
edits, forgetting (tombstones, targeted deletes, erasure) and the per-space build lease.

A base of :class:`tmem.store.sqlite.SQLiteStore`; each method is documented in :class:`tmem.store.base.Store`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from tmem.errors import IntegrityError
from tmem.models import (
    Erasure,
    ErasureKind,
    Item,
    ItemEdit,
    Scene,
    Session,
    TombstoneKind,
    TopicSceneLink,
    Turn,
)
from tmem.store.base import iter_batches
from tmem.store.sqlite_records import SQLiteRecords

_CHUNK = 500


def _marks(n: int) -> str:
    return ",".join("?" * n)


def turn_from_row(r: Sequence[Any]) -> Turn:
    """A Turn from ``SELECT space, id, session_id, seq, speaker, text, time, caption, metadata``."""
    return Turn(
        id=r[1],
        session_id=r[2],
        seq=r[3],
        speaker=r[4],
        text=r[5],
        time=datetime.fromisoformat(r[6]),
        caption=r[7],
        metadata=json.loads(r[8]),
    )


def _session(r: Sequence[Any]) -> Session:
    return Session(id=r[0], seq=r[1], started_at=datetime.fromisoformat(r[2]), content_hash=r[3])


class AgentOps(SQLiteRecords):
    """Id-scoped store methods; every query names its space and is served by a primary key or an index."""

    def _chunked(self, sql: str, space: str, ids: Sequence[str], *extra: Any) -> Iterator[sqlite3.Row]:
        """Run ``sql`` (with one ``{marks}`` placeholder list) over ``ids`` in chunks."""
        for chunk in iter_batches(list(dict.fromkeys(ids)), _CHUNK):
            yield from self._rows(sql.format(marks=_marks(len(chunk))), (space, *extra, *chunk))

    # ------------------------------------------------------------------ messages
    def last_turn(self, space: str) -> Turn | None:
        rows = self._rows(
            "SELECT space, id, session_id, seq, speaker, text, time, caption, metadata FROM turns WHERE space = ? "
            "ORDER BY seq DESC LIMIT 1",
            (space,),
        )
        return turn_from_row(rows[0]) if rows else None

    def last_session(self, space: str) -> Session | None:
        rows = self._rows(
            "SELECT id, seq, started_at, content_hash FROM sessions WHERE space = ? ORDER BY seq DESC LIMIT 1",
            (space,),
        )
        return _session(rows[0]) if rows else None

    def find_turns(self, space: str, ids: Sequence[str]) -> list[Turn]:
        sql = (
            "SELECT space, id, session_id, seq, speaker, text, time, caption, metadata FROM turns "
            "WHERE space = ? AND id IN ({marks})"
        )
        return sorted((turn_from_row(r) for r in self._chunked(sql, space, ids)), key=lambda t: t.seq)

    def find_sessions(self, space: str, ids: Sequence[str]) -> list[Session]:
        sql = "SELECT id, seq, started_at, content_hash FROM sessions WHERE space = ? AND id IN ({marks})"
        return sorted((_session(r) for r in self._chunked(sql, space, ids)), key=lambda s: s.seq)

    def add_turns(self, space: str, session_id: str, turns: Sequence[Turn]) -> None:
        if not self._rows("SELECT 1 FROM sessions WHERE space = ? AND id = ?", (space, session_id)):
            raise IntegrityError(f"Space {space!r} has no session {session_id!r} to append turns to.")
        for t in turns:
            if t.session_id != session_id:
                raise IntegrityError(f"Turn {t.id} names session {t.session_id!r}, expected {session_id!r}.")
        with self.transaction():
            self._many(
                "INSERT INTO turns(space, id, session_id, seq, speaker, text, time, caption, metadata) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        space,
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
            "SELECT space, id, session_id, seq, speaker, text, time, caption, metadata FROM turns WHERE space = ? AND seq > ? "
            "ORDER BY seq",
            (space, seq),
        )
        return [turn_from_row(r) for r in rows]

    def count_turns_after(self, space: str, seq: int) -> int:
        return int(self._rows("SELECT COUNT(*) FROM turns WHERE space = ? AND seq > ?", (space, seq))[0][0])

    def count_turns_outside_scenes(self, space: str) -> int:
        return int(
            self._rows(
                "SELECT COUNT(*) FROM turns t WHERE t.space = ? AND NOT EXISTS "
                "(SELECT 1 FROM scene_turns st WHERE st.space = t.space AND st.turn_id = t.id)",
                (space,),
            )[0][0]
        )

    # ------------------------------------------------------------------ forgetting
    def delete_turns(self, space: str, ids: Sequence[str]) -> None:
        with self.transaction():
            for chunk in iter_batches(list(dict.fromkeys(ids)), _CHUNK):
                marks = _marks(len(chunk))
                self._exec(f"DELETE FROM scene_turns WHERE space = ? AND turn_id IN ({marks})", (space, *chunk))
                self._exec(f"DELETE FROM turns WHERE space = ? AND id IN ({marks})", (space, *chunk))

    def scenes_of_turns(self, space: str, turn_ids: Sequence[str]) -> list[Scene]:
        sql = "SELECT DISTINCT scene_id FROM scene_turns WHERE space = ? AND turn_id IN ({marks})"
        scene_ids = sorted({r[0] for r in self._chunked(sql, space, turn_ids)})
        return self.scenes(space, scene_ids) if scene_ids else []

    def items_of_scenes(self, space: str, scene_ids: Sequence[str]) -> list[Item]:
        sql = "SELECT DISTINCT item_id FROM item_scenes WHERE space = ? AND scene_id IN ({marks})"
        item_ids = sorted({r[0] for r in self._chunked(sql, space, scene_ids)})
        if not item_ids:
            return []
        return self.items(space, item_ids)  # one row reader: every column, added ones included

    def topic_links_of(
        self, space: str, *, scene_ids: Sequence[str] = (), topic_ids: Sequence[str] = ()
    ) -> list[TopicSceneLink]:
        found: set[tuple[str, str]] = set()
        for column, ids in (("scene_id", scene_ids), ("topic_id", topic_ids)):
            sql = f"SELECT topic_id, scene_id FROM topic_scenes WHERE space = ? AND {column} IN ({{marks}})"
            found |= {(r[0], r[1]) for r in self._chunked(sql, space, ids)}
        return [TopicSceneLink(topic_id=t, scene_id=s) for t, s in sorted(found)]

    def add_tombstones(self, space: str, kind: TombstoneKind, ids: Sequence[str]) -> None:
        with self.transaction():
            self._many(
                "INSERT INTO tombstones(space, kind, id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                [(space, kind, i) for i in dict.fromkeys(ids)],
            )

    def tombstoned(self, space: str, kind: TombstoneKind, ids: Sequence[str]) -> set[str]:
        sql = "SELECT id FROM tombstones WHERE space = ? AND kind = ? AND id IN ({marks})"
        return {r[0] for r in self._chunked(sql, space, ids, kind)}

    # ------------------------------------------------------------------ erasure ledger
    def add_erasure(self, space: str, kind: ErasureKind) -> int:
        with self.transaction():  # one writer at a time: seq order is commit order
            return int(self._rows("INSERT INTO erasures(space, kind) VALUES (?, ?) RETURNING seq", (space, kind))[0][0])

    def erasures(
        self, *, after: int = 0, space: str | None = None, tenant: str | None = None, pending: bool = False
    ) -> list[Erasure]:
        sql, params = "SELECT seq, space, kind, erased FROM erasures WHERE seq > ?", list[object]([after])
        if space is not None:
            sql, params = sql + " AND space = ?", [*params, space]
        if tenant is not None:
            prefix = f"{tenant}/"
            sql, params = sql + " AND substr(space, 1, ?) = ?", [*params, len(prefix), prefix]
        if pending:
            sql += " AND erased = 0"
        return [
            Erasure(seq=r[0], space=r[1], kind=r[2], erased=bool(r[3]))
            for r in self._rows(sql + " ORDER BY seq", params)
        ]

    def latest_erasure(self, space: str | None = None) -> int:
        if space is None:
            return int(self._rows("SELECT COALESCE(MAX(seq), 0) FROM erasures")[0][0])
        return int(self._rows("SELECT COALESCE(MAX(seq), 0) FROM erasures WHERE space = ?", (space,))[0][0])

    def mark_erased(self, through: int) -> int:
        with self.transaction():
            return len(
                self._rows("UPDATE erasures SET erased = 1 WHERE erased = 0 AND seq <= ? RETURNING seq", (through,))
            )

    # ------------------------------------------------------------------ item history
    def add_item_edit(self, space: str, edit: ItemEdit) -> None:
        with self.transaction():
            self._exec(
                "INSERT INTO item_history(space, item_id, version, change, old_text, new_text, at) "
                "VALUES (?, ?, ?, 'edited', ?, ?, ?)",
                (space, edit.item_id, edit.version, edit.old_text, edit.new_text, edit.at.isoformat()),
            )

    def item_edits(self, space: str, item_ids: Sequence[str] | None = None) -> list[ItemEdit]:
        cols = "SELECT item_id, version, old_text, new_text, at FROM item_history WHERE space = ?"
        if item_ids is None:
            rows: list[sqlite3.Row] = self._rows(cols, (space,))
        else:
            rows = list(self._chunked(cols + " AND item_id IN ({marks})", space, item_ids))
        edits = [
            ItemEdit(item_id=r[0], version=r[1], old_text=r[2], new_text=r[3], at=datetime.fromisoformat(r[4]))
            for r in rows
        ]
        return sorted(edits, key=lambda e: (e.item_id, e.version))

    def delete_item_edits(self, space: str, item_ids: Sequence[str]) -> None:
        with self.transaction():
            for chunk in iter_batches(list(dict.fromkeys(item_ids)), _CHUNK):
                self._exec(
                    f"DELETE FROM item_history WHERE space = ? AND item_id IN ({_marks(len(chunk))})", (space, *chunk)
                )

    # ------------------------------------------------------------------ caches
    def delete_embeddings(self, space: str, text_hashes: Sequence[str]) -> None:
        with self.transaction():
            for chunk in iter_batches(list(dict.fromkeys(text_hashes)), _CHUNK):
                self._exec(
                    f"DELETE FROM embeddings WHERE space = ? AND text_hash IN ({_marks(len(chunk))})", (space, *chunk)
                )

    def delete_llm_responses(self, space: str, *, containing: Sequence[str], stage_prefixes: Sequence[str] = ()) -> int:
        needles: set[str] = set()
        for text in containing:
            if text.strip():
                needles.add(text)
                needles.add(json.dumps(text)[1:-1])
                needles.add(json.dumps(text, ensure_ascii=False)[1:-1])
        before = self._db.total_changes
        with self.transaction():
            for needle in sorted(needles):
                self._exec(
                    "DELETE FROM llm_calls WHERE space = ? AND response IS NOT NULL AND instr(response, ?) > 0",
                    (space, needle),
                )
            for prefix in stage_prefixes:
                escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
                self._exec("DELETE FROM llm_calls WHERE space = ? AND stage LIKE ? ESCAPE '\\'", (space, escaped + "%"))
        return self._db.total_changes - before

    # ------------------------------------------------------------------ build lease
    def acquire_lease(self, space: str, name: str, holder: str, ttl_seconds: float, now: float) -> bool:
        with self.transaction():  # BEGIN IMMEDIATE: one writer at a time across processes
            rows = self._rows("SELECT holder, expires_at FROM leases WHERE space = ? AND name = ?", (space, name))
            if rows and rows[0][0] != holder and float(rows[0][1]) > now:
                return False
            self._exec(
                "INSERT INTO leases(space, name, holder, expires_at) VALUES (?, ?, ?, ?) ON CONFLICT(space, name) "
                "DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at",
                (space, name, holder, now + ttl_seconds),
            )
            return True

    def release_lease(self, space: str, name: str, holder: str) -> None:
        with self.transaction():
            self._exec("DELETE FROM leases WHERE space = ? AND name = ? AND holder = ?", (space, name, holder))

    def lease_holder(self, space: str, name: str) -> str | None:
        rows = self._rows("SELECT holder FROM leases WHERE space = ? AND name = ?", (space, name))
        return str(rows[0][0]) if rows else None
