"""Scenes, topics, items, triggers and personas of the SQLite store: the records a build writes. A base of
:class:`tmem.store.sqlite.SQLiteStore` (through ``AgentOps``); each method is documented in
:class:`tmem.store.base.Store`."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tmem.errors import IntegrityError
from tmem.models import (
    BuildMode,
    Item,
    ItemKind,
    Persona,
    PersonaTrait,
    Scene,
    TombstoneKind,
    Topic,
    TopicSceneLink,
    Trigger,
    TriggerFamily,
    TriggerView,
)
from tmem.store.base import iter_batches
from tmem.store.rules import check_items
from tmem.store.sqlite_base import _CHUNK, SQLiteBase, _dt, _placeholders, _ts, store_error


class SQLiteRecords(SQLiteBase):
    if TYPE_CHECKING:

        def tombstoned(self, space: str, kind: TombstoneKind, ids: Sequence[str]) -> set[str]: ...  # sqlite_agent

    # ------------------------------------------------------------------ scenes
    def put_scenes(self, space: str, scenes: Sequence[Scene]) -> None:
        with self.transaction():
            for s in scenes:
                self._exec(
                    'INSERT INTO scenes(space, id, seq, title, summary, narrative, start, "end", mode) '
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(space, id) DO UPDATE SET seq = excluded.seq, "
                    "title = excluded.title, summary = excluded.summary, narrative = excluded.narrative, "
                    'start = excluded.start, "end" = excluded."end", mode = excluded.mode',
                    (
                        space,
                        s.id,
                        s.seq,
                        s.title,
                        s.summary,
                        s.narrative,
                        _ts(s.start),
                        _ts(s.end),
                        s.mode.value,
                    ),
                )
                self._exec("DELETE FROM scene_turns WHERE space = ? AND scene_id = ?", (space, s.id))
            for s in scenes:
                for pos, tid in enumerate(s.turn_ids):
                    try:
                        self._db.execute(
                            "INSERT INTO scene_turns(space, scene_id, turn_id, position) VALUES (?, ?, ?, ?)",
                            (space, s.id, tid, pos),
                        )
                    except sqlite3.OperationalError as exc:
                        raise store_error(exc, self._path, "writing scene turns") from exc
                    except sqlite3.IntegrityError as exc:
                        owner = self._rows(
                            "SELECT scene_id FROM scene_turns WHERE space = ? AND turn_id = ?", (space, tid)
                        )
                        where = f"already in scene {owner[0][0]!r}" if owner else "not a turn of this space"
                        raise IntegrityError(
                            f"Scene {s.id!r} in space {space!r} claims turn {tid!r}, which is {where}: "
                            "every turn belongs to exactly one scene."
                        ) from exc

    def scenes(self, space: str, ids: Sequence[str] | None = None) -> list[Scene]:
        rows = self._select_ids("scenes", space, ids, "seq")
        if not rows:
            return []
        turn_map: dict[str, list[str]] = {}
        for scene_id, turn_id in self._links("scene_turns", "scene_id", "turn_id", space, ids, [r[1] for r in rows]):
            turn_map.setdefault(scene_id, []).append(turn_id)
        out = [
            Scene(
                id=r[1],
                seq=r[2],
                title=r[3],
                summary=r[4],
                narrative=r[5],
                start=_dt(r[6]),
                end=_dt(r[7]),
                mode=BuildMode(r[8]),
                turn_ids=turn_map.get(r[1], []),
            )
            for r in rows
        ]
        return sorted(out, key=lambda s: (s.seq, s.id))

    def delete_scenes(self, space: str, ids: Sequence[str]) -> None:
        with self.transaction():
            for chunk in iter_batches(list(ids), _CHUNK):
                marks = _placeholders(len(chunk))
                self.delete_triggers(space, chunk)
                for table in ("scene_turns", "topic_scenes", "item_scenes"):
                    self._exec(f"DELETE FROM {table} WHERE space = ? AND scene_id IN ({marks})", (space, *chunk))
                self._exec(f"DELETE FROM scenes WHERE space = ? AND id IN ({marks})", (space, *chunk))

    # ------------------------------------------------------------------ topics
    def put_topics(self, space: str, topics: Sequence[Topic]) -> None:
        with self.transaction():
            self._many(
                "INSERT INTO topics(space, id, seq, label, description) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(space, id) DO UPDATE SET seq = excluded.seq, label = excluded.label, "
                "description = excluded.description",
                [(space, t.id, t.seq, t.label, t.description) for t in topics],
            )

    def topics(self, space: str, ids: Sequence[str] | None = None) -> list[Topic]:
        rows = self._select_ids("topics", space, ids, "seq")
        return sorted(
            (Topic(id=r[1], seq=r[2], label=r[3], description=r[4]) for r in rows),
            key=lambda t: (t.seq, t.id),
        )

    def link_topics(self, space: str, links: Sequence[TopicSceneLink]) -> None:
        with self.transaction():
            self._many(
                "INSERT INTO topic_scenes(space, topic_id, scene_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                [(space, link.topic_id, link.scene_id) for link in links],
            )

    def topic_links(self, space: str) -> list[TopicSceneLink]:
        return [
            TopicSceneLink(topic_id=r[0], scene_id=r[1])
            for r in self._rows(
                "SELECT topic_id, scene_id FROM topic_scenes WHERE space = ? ORDER BY topic_id, scene_id",
                (space,),
            )
        ]

    def delete_topics(self, space: str, ids: Sequence[str]) -> None:
        with self.transaction():
            for chunk in iter_batches(list(ids), _CHUNK):
                marks = _placeholders(len(chunk))
                self._exec(f"DELETE FROM topic_scenes WHERE space = ? AND topic_id IN ({marks})", (space, *chunk))
                self._exec(f"DELETE FROM topics WHERE space = ? AND id IN ({marks})", (space, *chunk))

    # ------------------------------------------------------------------ items
    def put_items(self, space: str, items: Sequence[Item]) -> None:
        check_items(space, items)
        with self.transaction():
            forgotten = self.tombstoned(space, "item", [it.id for it in items])
            for it in items:
                if it.id in forgotten:
                    continue  # a forgotten item never comes back (tombstone)
                self._exec(
                    "INSERT INTO items(space, id, seq, text, kind, topic_id, speaker, date, supersedes, "
                    "superseded_by, turn_ids, mode, date_end, date_precision, conflicts_with, slot) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT(space, id) DO UPDATE SET seq = excluded.seq, text = excluded.text, "
                    "kind = excluded.kind, topic_id = excluded.topic_id, speaker = excluded.speaker, "
                    "date = excluded.date, supersedes = excluded.supersedes, superseded_by = excluded.superseded_by, "
                    "turn_ids = excluded.turn_ids, mode = excluded.mode, date_end = excluded.date_end, "
                    "date_precision = excluded.date_precision, conflicts_with = excluded.conflicts_with, slot = excluded.slot",
                    (
                        space,
                        it.id,
                        it.seq,
                        it.text,
                        it.kind.value,
                        it.topic_id,
                        it.speaker,
                        it.date,
                        it.supersedes,
                        it.superseded_by,
                        json.dumps(it.turn_ids),
                        it.mode.value,
                        it.date_end,
                        it.date_precision,
                        json.dumps(it.conflicts_with),
                        it.slot,
                    ),
                )
                self._exec("DELETE FROM item_scenes WHERE space = ? AND item_id = ?", (space, it.id))
                self._many(
                    "INSERT INTO item_scenes(space, item_id, scene_id, position) VALUES (?, ?, ?, ?)",
                    [(space, it.id, sid, pos) for pos, sid in enumerate(dict.fromkeys(it.scene_ids))],
                )

    def items(self, space: str, ids: Sequence[str] | None = None) -> list[Item]:
        rows = self._select_ids("items", space, ids, "seq")
        if not rows:
            return []
        links: dict[str, list[str]] = {}
        for item_id, scene_id in self._links("item_scenes", "item_id", "scene_id", space, ids, [r[1] for r in rows]):
            links.setdefault(item_id, []).append(scene_id)
        # columns added by later migrations, read by name (their position depends on the migration order)
        sql = "SELECT id, date_end, date_precision, conflicts_with, slot FROM items WHERE space = ?"
        extra_rows: list[sqlite3.Row] = []
        if ids is None:
            extra_rows = self._rows(sql, (space,))
        else:  # only the items asked for: reading one item never reads the space's whole table
            for chunk in iter_batches([r[1] for r in rows], _CHUNK):
                extra_rows += self._rows(sql + f" AND id IN ({_placeholders(len(chunk))})", (space, *chunk))
        extra = {r[0]: (r[1], r[2], r[3], r[4]) for r in extra_rows}
        out = [
            Item(
                id=r[1],
                seq=r[2],
                text=r[3],
                kind=ItemKind(r[4]),
                topic_id=r[5],
                speaker=r[6],
                date=r[7],
                supersedes=r[8],
                superseded_by=r[9],
                turn_ids=json.loads(r[10]),
                mode=BuildMode(r[11]),
                scene_ids=links.get(r[1], []),
                date_end=extra[r[1]][0],
                date_precision=extra[r[1]][1],
                conflicts_with=json.loads(extra[r[1]][2]),
                slot=extra[r[1]][3],
            )
            for r in rows
        ]
        return sorted(out, key=lambda i: (i.seq, i.id))

    def delete_items(self, space: str, ids: Sequence[str]) -> None:
        with self.transaction():
            for chunk in iter_batches(list(ids), _CHUNK):
                marks = _placeholders(len(chunk))
                self.delete_triggers(space, chunk)
                self._exec(f"DELETE FROM item_scenes WHERE space = ? AND item_id IN ({marks})", (space, *chunk))
                self._exec(f"DELETE FROM items WHERE space = ? AND id IN ({marks})", (space, *chunk))

    # ------------------------------------------------------------------ triggers
    def put_triggers(self, space: str, triggers: Sequence[Trigger]) -> None:
        with self.transaction():
            for tr in triggers:
                self._exec(
                    "INSERT INTO triggers(space, id, family, host_kind, host_id, grp, fields) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(space, id) DO UPDATE SET family = excluded.family, "
                    "host_kind = excluded.host_kind, host_id = excluded.host_id, grp = excluded.grp, "
                    "fields = excluded.fields",
                    (
                        space,
                        tr.id,
                        tr.family.value,
                        tr.host_kind,
                        tr.host_id,
                        tr.group,
                        json.dumps(tr.fields),
                    ),
                )
                self._exec("DELETE FROM trigger_views WHERE space = ? AND trigger_id = ?", (space, tr.id))
                self._many(
                    "INSERT INTO trigger_views(space, trigger_id, position, name, text) VALUES (?, ?, ?, ?, ?)",
                    [(space, tr.id, pos, v.name, v.text) for pos, v in enumerate(tr.views)],
                )

    def triggers(
        self,
        space: str,
        *,
        family: TriggerFamily | None = None,
        host_ids: Sequence[str] | None = None,
    ) -> list[Trigger]:
        sql = "SELECT id, family, host_kind, host_id, grp, fields FROM triggers WHERE space = ?"
        params: list[Any] = [space]
        if family is not None:
            sql += " AND family = ?"
            params.append(family.value)
        rows: list[sqlite3.Row] = []
        if host_ids is None:
            rows = self._rows(sql, params)
        else:
            for chunk in iter_batches(list(dict.fromkeys(host_ids)), _CHUNK):
                rows += self._rows(sql + f" AND host_id IN ({_placeholders(len(chunk))})", [*params, *chunk])
        views: dict[str, list[TriggerView]] = {}
        for trigger_id, name, text in self._view_rows(space, family, [r[0] for r in rows], whole=host_ids is None):
            views.setdefault(trigger_id, []).append(TriggerView(name=name, text=text))
        out = [
            Trigger(
                id=r[0],
                family=TriggerFamily(r[1]),
                host_kind=r[2],
                host_id=r[3],
                group=r[4],
                fields=json.loads(r[5]),
                views=views.get(r[0], []),
            )
            for r in rows
        ]
        return sorted(out, key=lambda t: (t.host_id, t.family.value, t.group, t.id))

    def _view_rows(
        self, space: str, family: TriggerFamily | None, trigger_ids: list[str], *, whole: bool
    ) -> list[sqlite3.Row]:
        """Views of the selected triggers only, in (trigger, position) order: of one family, or of the given ids."""
        if whole:
            sql = (
                "SELECT v.trigger_id, v.name, v.text FROM trigger_views v JOIN triggers t "
                "ON t.space = v.space AND t.id = v.trigger_id WHERE v.space = ?"
            )
            params: list[Any] = [space]
            if family is not None:
                sql += " AND t.family = ?"
                params.append(family.value)
            return self._rows(sql + " ORDER BY v.trigger_id, v.position", params)
        out: list[sqlite3.Row] = []
        for chunk in iter_batches(trigger_ids, _CHUNK):
            out += self._rows(
                f"SELECT trigger_id, name, text FROM trigger_views WHERE space = ? AND trigger_id IN "
                f"({_placeholders(len(chunk))}) ORDER BY trigger_id, position",
                (space, *chunk),
            )
        return out

    def delete_triggers(self, space: str, host_ids: Sequence[str]) -> None:
        with self.transaction():
            for chunk in iter_batches(list(host_ids), _CHUNK):
                marks = _placeholders(len(chunk))
                self._exec(
                    f"DELETE FROM trigger_views WHERE space = ? AND trigger_id IN "
                    f"(SELECT id FROM triggers WHERE space = ? AND host_id IN ({marks}))",
                    (space, space, *chunk),
                )
                self._exec(f"DELETE FROM triggers WHERE space = ? AND host_id IN ({marks})", (space, *chunk))

    # ------------------------------------------------------------------ persona
    def put_persona(self, space: str, persona: Persona) -> None:
        traits = json.dumps([t.model_dump() for t in persona.traits])
        with self.transaction():
            self._exec(
                "INSERT INTO personas(space, speaker, traits, summary) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(space, speaker) DO UPDATE SET traits = excluded.traits, summary = excluded.summary",
                (space, persona.speaker, traits, persona.summary),
            )

    def personas(self, space: str) -> list[Persona]:
        return [
            Persona(speaker=r[0], traits=[PersonaTrait(**t) for t in json.loads(r[1])], summary=r[2])
            for r in self._rows(
                "SELECT speaker, traits, summary FROM personas WHERE space = ? ORDER BY speaker", (space,)
            )
        ]

    def delete_personas(self, space: str) -> None:
        with self.transaction():
            self._exec("DELETE FROM personas WHERE space = ?", (space,))
