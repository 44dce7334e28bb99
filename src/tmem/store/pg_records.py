"""PostgreSQL store, memory records: scenes, topics, items, triggers and personas (see :mod:`tmem.store.postgres`).

Every statement is scoped by (tenant, space) and, for one record, by its id: reading one scene or item reads its own
link rows, never the space's whole link table.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tmem.errors import IntegrityError
from tmem.models import (
    BuildMode,
    Item,
    ItemKind,
    Persona,
    PersonaTrait,
    Scene,
    Topic,
    TopicSceneLink,
    Trigger,
    TriggerFamily,
    TriggerView,
    Turn,
)
from tmem.store.pg_base import PgBase
from tmem.store.rules import check_items

_SCOPE = "tenant = %s AND space = %s"


def _ts(value: Any) -> str:
    return str(value.isoformat())


class PgRecords(PgBase):
    """Memory records of the PostgreSQL store."""

    def _select_ids(self, table: str, cols: str, space: str, ids: Sequence[str] | None) -> list[tuple[Any, ...]]:
        if ids is None:
            return self._rows(f"SELECT {cols} FROM {table} WHERE {_SCOPE}", self._key(space))
        return self._rows(f"SELECT {cols} FROM {table} WHERE {_SCOPE} AND id = ANY(%s)", (*self._key(space), list(ids)))

    def _links(
        self, table: str, key: str, other: str, space: str, ids: Sequence[str] | None, found: list[str]
    ) -> dict[str, list[str]]:
        sql = f"SELECT {key}, {other} FROM {table} WHERE {_SCOPE}"
        params: tuple[Any, ...] = self._key(space)
        if ids is not None:
            sql += f" AND {key} = ANY(%s)"
            params = (*params, found)
        out: dict[str, list[str]] = {}
        for k, v in self._rows(sql + f" ORDER BY {key}, position", params):
            out.setdefault(k, []).append(v)
        return out

    def turns(self, space: str, ids: Sequence[str] | None = None) -> list[Turn]:
        from tmem.errors import NotFoundError

        rows = self._select_ids("turns", "id, session_id, seq, speaker, text, time, caption, metadata", space, ids)
        found = [
            Turn(
                id=r[0],
                session_id=r[1],
                seq=r[2],
                speaker=r[3],
                text=r[4],
                time=r[5],
                caption=r[6],
                metadata=json.loads(r[7]),
            )
            for r in rows
        ]
        if ids is not None:
            missing = set(ids) - {t.id for t in found}
            if missing:
                raise NotFoundError(f"Unknown turn ids in space {space!r}: {sorted(missing)[:10]}")
        return sorted(found, key=lambda t: t.seq)

    # ------------------------------------------------------------------ scenes
    def put_scenes(self, space: str, scenes: Sequence[Scene]) -> None:
        key = self._key(space)
        claimed: dict[str, str] = {}
        for s in scenes:
            for tid in s.turn_ids:
                if claimed.setdefault(tid, s.id) != s.id:
                    raise IntegrityError(
                        f"Scene {s.id!r} in space {space!r} claims turn {tid!r}, which is already in scene "
                        f"{claimed[tid]!r}: every turn belongs to exactly one scene."
                    )
        with self.transaction():
            self._many(
                'INSERT INTO scenes(tenant, space, id, seq, title, summary, narrative, start, "end", mode) '
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (tenant, space, id) DO UPDATE SET "
                "seq = excluded.seq, title = excluded.title, summary = excluded.summary, "
                'narrative = excluded.narrative, start = excluded.start, "end" = excluded."end", mode = excluded.mode',
                [
                    (*key, s.id, s.seq, s.title, s.summary, s.narrative, _ts(s.start), _ts(s.end), s.mode.value)
                    for s in scenes
                ],
            )
            ids = [s.id for s in scenes]
            self._exec(f"DELETE FROM scene_turns WHERE {_SCOPE} AND scene_id = ANY(%s)", (*key, ids))
            if not claimed:
                return
            owners = self._rows(
                f"SELECT turn_id, scene_id FROM scene_turns WHERE {_SCOPE} AND turn_id = ANY(%s)",
                (*key, list(claimed)),
            )
            if owners:
                tid, owner = owners[0]
                raise IntegrityError(
                    f"Scene {claimed[tid]!r} in space {space!r} claims turn {tid!r}, which is already in scene "
                    f"{owner!r}: every turn belongs to exactly one scene."
                )
            known = {
                r[0] for r in self._rows(f"SELECT id FROM turns WHERE {_SCOPE} AND id = ANY(%s)", (*key, list(claimed)))
            }
            for tid, sid in claimed.items():
                if tid not in known:
                    raise IntegrityError(
                        f"Scene {sid!r} in space {space!r} claims turn {tid!r}, which is not a turn of this space: "
                        "every turn belongs to exactly one scene."
                    )
            self._many(
                "INSERT INTO scene_turns(tenant, space, scene_id, turn_id, position) VALUES (%s, %s, %s, %s, %s)",
                [(*key, s.id, tid, pos) for s in scenes for pos, tid in enumerate(s.turn_ids)],
            )

    def scenes(self, space: str, ids: Sequence[str] | None = None) -> list[Scene]:
        rows = self._select_ids("scenes", 'id, seq, title, summary, narrative, start, "end", mode', space, ids)
        if not rows:
            return []
        turn_map = self._links("scene_turns", "scene_id", "turn_id", space, ids, [r[0] for r in rows])
        out = [
            Scene(
                id=r[0],
                seq=r[1],
                title=r[2],
                summary=r[3],
                narrative=r[4],
                start=r[5],
                end=r[6],
                mode=BuildMode(r[7]),
                turn_ids=turn_map.get(r[0], []),
            )
            for r in rows
        ]
        return sorted(out, key=lambda s: (s.seq, s.id))

    def delete_scenes(self, space: str, ids: Sequence[str]) -> None:
        key, chosen = self._key(space), list(ids)
        with self.transaction():
            self.delete_triggers(space, chosen)
            for table in ("scene_turns", "topic_scenes", "item_scenes"):
                self._exec(f"DELETE FROM {table} WHERE {_SCOPE} AND scene_id = ANY(%s)", (*key, chosen))
            self._exec(f"DELETE FROM scenes WHERE {_SCOPE} AND id = ANY(%s)", (*key, chosen))

    # ------------------------------------------------------------------ topics
    def put_topics(self, space: str, topics: Sequence[Topic]) -> None:
        with self.transaction():
            self._many(
                "INSERT INTO topics(tenant, space, id, seq, label, description) VALUES (%s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (tenant, space, id) DO UPDATE SET seq = excluded.seq, label = excluded.label, "
                "description = excluded.description",
                [(*self._key(space), t.id, t.seq, t.label, t.description) for t in topics],
            )

    def topics(self, space: str, ids: Sequence[str] | None = None) -> list[Topic]:
        rows = self._select_ids("topics", "id, seq, label, description", space, ids)
        return sorted(
            (Topic(id=r[0], seq=r[1], label=r[2], description=r[3]) for r in rows), key=lambda t: (t.seq, t.id)
        )

    def link_topics(self, space: str, links: Sequence[TopicSceneLink]) -> None:
        with self.transaction():
            self._many(
                "INSERT INTO topic_scenes(tenant, space, topic_id, scene_id) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT DO NOTHING",
                [(*self._key(space), link.topic_id, link.scene_id) for link in links],
            )

    def topic_links(self, space: str) -> list[TopicSceneLink]:
        rows = self._rows(f"SELECT topic_id, scene_id FROM topic_scenes WHERE {_SCOPE}", self._key(space))
        return [TopicSceneLink(topic_id=a, scene_id=b) for a, b in sorted(rows)]

    def delete_topics(self, space: str, ids: Sequence[str]) -> None:
        key, chosen = self._key(space), list(ids)
        with self.transaction():
            self._exec(f"DELETE FROM topic_scenes WHERE {_SCOPE} AND topic_id = ANY(%s)", (*key, chosen))
            self._exec(f"DELETE FROM topics WHERE {_SCOPE} AND id = ANY(%s)", (*key, chosen))

    # ------------------------------------------------------------------ items
    def put_items(self, space: str, items: Sequence[Item]) -> None:
        check_items(space, items)
        key = self._key(space)
        with self.transaction():
            forgotten = self._tombstoned_items(space, [it.id for it in items])
            items = [it for it in items if it.id not in forgotten]  # a forgotten item never comes back
            self._many(
                "INSERT INTO items(tenant, space, id, seq, text, kind, topic_id, speaker, date, supersedes, "
                "superseded_by, turn_ids, mode, date_end, date_precision, conflicts_with, slot) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (tenant, space, id) DO UPDATE SET seq = excluded.seq, text = excluded.text, "
                "kind = excluded.kind, topic_id = excluded.topic_id, speaker = excluded.speaker, "
                "date = excluded.date, supersedes = excluded.supersedes, superseded_by = excluded.superseded_by, "
                "turn_ids = excluded.turn_ids, mode = excluded.mode, date_end = excluded.date_end, "
                "date_precision = excluded.date_precision, conflicts_with = excluded.conflicts_with, slot = excluded.slot",
                [
                    (
                        *key,
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
                    )
                    for it in items
                ],
            )
            self._exec(f"DELETE FROM item_scenes WHERE {_SCOPE} AND item_id = ANY(%s)", (*key, [i.id for i in items]))
            self._many(
                "INSERT INTO item_scenes(tenant, space, item_id, scene_id, position) VALUES (%s, %s, %s, %s, %s)",
                [(*key, it.id, sid, pos) for it in items for pos, sid in enumerate(dict.fromkeys(it.scene_ids))],
            )

    def _tombstoned_items(self, space: str, ids: Sequence[str]) -> set[str]:
        rows = self._rows(
            f"SELECT id FROM tombstones WHERE {_SCOPE} AND kind = 'item' AND id = ANY(%s)",
            (*self._key(space), list(ids)),
        )
        return {str(r[0]) for r in rows}

    def items(self, space: str, ids: Sequence[str] | None = None) -> list[Item]:
        cols = (
            "id, seq, text, kind, topic_id, speaker, date, supersedes, superseded_by, turn_ids, mode, date_end, "
            "date_precision, conflicts_with, slot"
        )
        rows = self._select_ids("items", cols, space, ids)
        if not rows:
            return []
        links = self._links("item_scenes", "item_id", "scene_id", space, ids, [r[0] for r in rows])
        out = [
            Item(
                id=r[0],
                seq=r[1],
                text=r[2],
                kind=ItemKind(r[3]),
                topic_id=r[4],
                speaker=r[5],
                date=r[6],
                supersedes=r[7],
                superseded_by=r[8],
                turn_ids=json.loads(r[9]),
                mode=BuildMode(r[10]),
                date_end=r[11],
                date_precision=r[12],
                conflicts_with=json.loads(r[13]),
                slot=r[14],
                scene_ids=links.get(r[0], []),
            )
            for r in rows
        ]
        return sorted(out, key=lambda i: (i.seq, i.id))

    def delete_items(self, space: str, ids: Sequence[str]) -> None:
        key, chosen = self._key(space), list(ids)
        with self.transaction():
            self.delete_triggers(space, chosen)
            self._exec(f"DELETE FROM item_scenes WHERE {_SCOPE} AND item_id = ANY(%s)", (*key, chosen))
            self._exec(f"DELETE FROM items WHERE {_SCOPE} AND id = ANY(%s)", (*key, chosen))

    # ------------------------------------------------------------------ triggers
    def put_triggers(self, space: str, triggers: Sequence[Trigger]) -> None:
        key = self._key(space)
        with self.transaction():
            self._many(
                "INSERT INTO triggers(tenant, space, id, family, host_kind, host_id, grp, fields) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (tenant, space, id) DO UPDATE SET "
                "family = excluded.family, host_kind = excluded.host_kind, host_id = excluded.host_id, "
                "grp = excluded.grp, fields = excluded.fields",
                [
                    (*key, tr.id, tr.family.value, tr.host_kind, tr.host_id, tr.group, json.dumps(tr.fields))
                    for tr in triggers
                ],
            )
            ids = [tr.id for tr in triggers]
            self._exec(f"DELETE FROM trigger_views WHERE {_SCOPE} AND trigger_id = ANY(%s)", (*key, ids))
            self._many(
                "INSERT INTO trigger_views(tenant, space, trigger_id, position, name, text) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                [(*key, tr.id, pos, v.name, v.text) for tr in triggers for pos, v in enumerate(tr.views)],
            )

    def triggers(
        self,
        space: str,
        *,
        family: TriggerFamily | None = None,
        host_ids: Sequence[str] | None = None,
    ) -> list[Trigger]:
        where = "t.tenant = %s AND t.space = %s"
        params: list[Any] = [*self._key(space)]
        if family is not None:
            where += " AND t.family = %s"
            params.append(family.value)
        if host_ids is not None:
            where += " AND t.host_id = ANY(%s)"
            params.append(list(host_ids))
        rows = self._rows(
            f"SELECT t.id, t.family, t.host_kind, t.host_id, t.grp, t.fields FROM triggers t WHERE {where}", params
        )
        views: dict[str, list[TriggerView]] = {}
        for trigger_id, name, text in self._rows(
            "SELECT v.trigger_id, v.name, v.text FROM trigger_views v JOIN triggers t ON t.tenant = v.tenant "
            f"AND t.space = v.space AND t.id = v.trigger_id WHERE {where} ORDER BY v.trigger_id, v.position",
            params,
        ):
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

    def delete_triggers(self, space: str, host_ids: Sequence[str]) -> None:
        key, hosts = self._key(space), list(host_ids)
        with self.transaction():
            self._exec(
                "DELETE FROM trigger_views v USING triggers t WHERE v.tenant = %s AND v.space = %s "
                "AND t.tenant = v.tenant AND t.space = v.space AND t.id = v.trigger_id AND t.host_id = ANY(%s)",
                (*key, hosts),
            )
            self._exec(f"DELETE FROM triggers WHERE {_SCOPE} AND host_id = ANY(%s)", (*key, hosts))

    # ------------------------------------------------------------------ persona
    def put_persona(self, space: str, persona: Persona) -> None:
        traits = json.dumps([t.model_dump() for t in persona.traits])
        with self.transaction():
            self._exec(
                "INSERT INTO personas(tenant, space, speaker, traits, summary) VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (tenant, space, speaker) DO UPDATE SET traits = excluded.traits, "
                "summary = excluded.summary",
                (*self._key(space), persona.speaker, traits, persona.summary),
            )

    def personas(self, space: str) -> list[Persona]:
        rows = self._rows(f"SELECT speaker, traits, summary FROM personas WHERE {_SCOPE}", self._key(space))
        return [
            Persona(speaker=r[0], traits=[PersonaTrait(**t) for t in json.loads(r[1])], summary=r[2])
            for r in sorted(rows)
        ]

    def delete_personas(self, space: str) -> None:
        with self.transaction():
            self._exec(f"DELETE FROM personas WHERE {_SCOPE}", self._key(space))
