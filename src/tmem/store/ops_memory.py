"""The memory nodes a build writes: scenes, topics, items, triggers and personas, once for both backends (each
method is documented in :class:`tmem.store.base.Store`). Reading one scene or item reads its own link rows, never
the space's whole link table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Table, delete, select

from tmem.errors import IntegrityError
from tmem.models import (
    Item,
    Persona,
    Scene,
    TombstoneKind,
    Topic,
    TopicSceneLink,
    Trigger,
    TriggerFamily,
    TriggerView,
)
from tmem.scope import Scope
from tmem.store import mappers
from tmem.store.ops_conversation import ConversationOps
from tmem.store.rules import check_items
from tmem.store.schema import (
    item_scenes,
    items,
    personas,
    scene_turns,
    scenes,
    topic_scenes,
    topics,
    trigger_views,
    triggers,
    turns,
)


class MemoryOps(ConversationOps):
    if TYPE_CHECKING:

        def tombstoned(self, scope: Scope, kind: TombstoneKind, ids: Sequence[str]) -> set[str]: ...

    def _records(self, table: Table, scope: Scope, ids: Sequence[str] | None) -> list[dict[str, Any]]:
        """The rows of ``space`` in ``table`` (only those of ``ids`` when given)."""
        if ids is None:
            return self._fetch(select(table).where(self._in(table, scope)))
        return [
            r for chunk in self._chunks(ids) for r in self._fetch(select(table).where(self._in(table, scope),
                                                                                        table.c.id.in_(chunk)))
        ]  # fmt: skip

    def _links(self, table: Table, key: str, other: str, scope: Scope, keys: list[str] | None) -> dict[str, list[str]]:
        """{key: [other, ...]} in position order, of the whole space (``keys`` None) or of ``keys`` only."""
        base = select(table.c[key], table.c[other]).where(self._in(table, scope))
        order = (table.c[key], table.c.position)
        batches = [base.order_by(*order)] if keys is None else [
            base.where(table.c[key].in_(chunk)).order_by(*order) for chunk in self._chunks(keys)
        ]  # fmt: skip
        out: dict[str, list[str]] = {}
        for query in batches:
            for r in self._fetch(query):
                out.setdefault(r[key], []).append(r[other])
        return out

    # ------------------------------------------------------------------ scenes
    def put_scenes(self, scope: Scope, scenes_: Sequence[Scene]) -> None:
        claimed: dict[str, str] = {}
        for s in scenes_:
            for tid in s.turn_ids:
                if claimed.setdefault(tid, s.id) != s.id:
                    raise self._claimed(scope, s.id, tid, f"already in scene {claimed[tid]!r}")
        with self.transaction():
            self._put(scenes, scope, [mappers.scene_row(s) for s in scenes_])
            for chunk in self._chunks([s.id for s in scenes_]):
                self._delete_in(scene_turns, scope, scene_turns.c.scene_id, chunk)
            for chunk in self._chunks(list(claimed)):
                owners = select(scene_turns.c.turn_id, scene_turns.c.scene_id)
                for r in self._fetch(owners.where(self._in(scene_turns, scope), scene_turns.c.turn_id.in_(chunk))):
                    raise self._claimed(
                        scope, claimed[r["turn_id"]], r["turn_id"], f"already in scene {r['scene_id']!r}"
                    )
                known = {t["id"] for t in self._fetch(select(turns.c.id).where(self._in(turns, scope),
                                                                               turns.c.id.in_(chunk)))}  # fmt: skip
                for tid in chunk:
                    if tid not in known:
                        raise self._claimed(scope, claimed[tid], tid, "not a turn of this space")
            rows = [{"scene_id": s.id, "turn_id": tid, "position": pos} for s in scenes_ for pos, tid in
                    enumerate(s.turn_ids)]  # fmt: skip
            self._run_many(scene_turns.insert(), self._scoped(scope, rows))

    @staticmethod
    def _claimed(scope: Scope, scene_id: str, turn_id: str, where: str) -> IntegrityError:
        return IntegrityError(
            "Scene {scene!r} in space {space!r} claims turn {turn!r}, which is {where}: every turn belongs to exactly "
            "one scene.",
            scene=scene_id,
            turn=turn_id,
            where=where,
            **scope.fields,
        )

    def _linked_records(
        self, table: Table, link: Table, other: str, scope: Scope, ids: Sequence[str] | None
    ) -> list[tuple[dict[str, Any], list[str]]]:
        """(row, its ``other`` ids from ``link`` in position order) for the records of ``table`` (of ``ids``): both
        reads in one committed state, so that a build committing between them never leaves a record without links."""
        with self.snapshot():
            rows = self._records(table, scope, ids)
            if not rows:
                return []
            found = None if ids is None else [r["id"] for r in rows]
            links = self._links(link, link.c.keys()[2], other, scope, found)
        return [(r, links.get(r["id"], [])) for r in rows]

    def scenes(self, scope: Scope, ids: Sequence[str] | None = None) -> list[Scene]:
        found = [mappers.scene(r, t) for r, t in self._linked_records(scenes, scene_turns, "turn_id", scope, ids)]
        return sorted(found, key=lambda s: (s.seq, s.id))

    def delete_scenes(self, scope: Scope, ids: Sequence[str]) -> None:
        self._delete_nodes(scope, ids, scenes, [(t, "scene_id") for t in (scene_turns, topic_scenes, item_scenes)])

    def _delete_nodes(
        self, scope: Scope, ids: Sequence[str], table: Table, links: list[tuple[Table, str]], *, hosts: bool = True
    ) -> None:
        """Delete the records ``ids`` of ``table``, their rows in the ``links`` (table, column), and the triggers
        they host when ``hosts``."""
        with self.transaction():
            for chunk in self._chunks(ids):
                if hosts:
                    self.delete_triggers(scope, chunk)
                for link, column in links:
                    self._delete_in(link, scope, link.c[column], chunk)
                self._delete_in(table, scope, table.c.id, chunk)

    def _put(self, table: Table, scope: Scope, rows: Sequence[dict[str, Any]]) -> None:
        """Upsert records keyed by id."""
        self._upsert(table, ("tenant", "space", "id"), self._scoped(scope, rows))

    # ------------------------------------------------------------------ topics
    def put_topics(self, scope: Scope, topics_: Sequence[Topic]) -> None:
        with self.transaction():
            self._put(topics, scope, [mappers.topic_row(t) for t in topics_])

    def topics(self, scope: Scope, ids: Sequence[str] | None = None) -> list[Topic]:
        return sorted((mappers.topic(r) for r in self._records(topics, scope, ids)), key=lambda t: (t.seq, t.id))

    def link_topics(self, scope: Scope, links: Sequence[TopicSceneLink]) -> None:
        with self.transaction():
            rows = [{"topic_id": link.topic_id, "scene_id": link.scene_id} for link in links]
            self._insert_new(topic_scenes, self._scoped(scope, rows))

    def topic_links(self, scope: Scope) -> list[TopicSceneLink]:
        rows = self._fetch(
            select(topic_scenes.c.topic_id, topic_scenes.c.scene_id).where(self._in(topic_scenes, scope))
        )
        return [TopicSceneLink(topic_id=t, scene_id=s) for t, s in sorted((r["topic_id"], r["scene_id"]) for r in rows)]

    def topic_links_of(
        self, scope: Scope, *, scene_ids: Sequence[str] = (), topic_ids: Sequence[str] = ()
    ) -> list[TopicSceneLink]:
        found: set[tuple[str, str]] = set()
        with self.snapshot():
            for column, ids in ((topic_scenes.c.scene_id, scene_ids), (topic_scenes.c.topic_id, topic_ids)):
                for chunk in self._chunks(ids):
                    query = select(topic_scenes.c.topic_id, topic_scenes.c.scene_id)
                    found |= {(r["topic_id"], r["scene_id"]) for r in
                              self._fetch(query.where(self._in(topic_scenes, scope), column.in_(chunk)))}  # fmt: skip
        return [TopicSceneLink(topic_id=t, scene_id=s) for t, s in sorted(found)]

    def delete_topics(self, scope: Scope, ids: Sequence[str]) -> None:
        self._delete_nodes(scope, ids, topics, [(topic_scenes, "topic_id")], hosts=False)

    # ------------------------------------------------------------------ items
    def put_items(self, scope: Scope, items_: Sequence[Item]) -> None:
        check_items(scope, items_)
        with self.transaction():
            forgotten = self.tombstoned(scope, "item", [it.id for it in items_])
            kept = [it for it in items_ if it.id not in forgotten]  # a forgotten item never comes back
            self._put(items, scope, [mappers.item_row(it) for it in kept])
            for chunk in self._chunks([it.id for it in kept]):
                self._delete_in(item_scenes, scope, item_scenes.c.item_id, chunk)
            rows = [{"item_id": it.id, "scene_id": sid, "position": pos} for it in kept
                    for pos, sid in enumerate(dict.fromkeys(it.scene_ids))]  # fmt: skip
            self._run_many(item_scenes.insert(), self._scoped(scope, rows))

    def items(self, scope: Scope, ids: Sequence[str] | None = None) -> list[Item]:
        found = [mappers.item(r, s) for r, s in self._linked_records(items, item_scenes, "scene_id", scope, ids)]
        return sorted(found, key=lambda i: (i.seq, i.id))

    def scenes_of_turns(self, scope: Scope, turn_ids: Sequence[str]) -> list[Scene]:
        with self.snapshot():
            ids = self._linked(scene_turns.c.scene_id, scene_turns.c.turn_id, scope, turn_ids)
            return self.scenes(scope, ids) if ids else []

    def items_of_scenes(self, scope: Scope, scene_ids: Sequence[str]) -> list[Item]:
        with self.snapshot():
            ids = self._linked(item_scenes.c.item_id, item_scenes.c.scene_id, scope, scene_ids)
            return self.items(scope, ids) if ids else []

    def _linked(self, want: Any, have: Any, scope: Scope, ids: Sequence[str]) -> list[str]:
        """Distinct ``want`` values of the link rows whose ``have`` is among ``ids``, sorted."""
        table = want.table
        out: set[str] = set()
        for chunk in self._chunks(ids):
            query = select(want.label("v")).distinct().where(self._in(table, scope), have.in_(chunk))
            out |= {str(r["v"]) for r in self._fetch(query)}
        return sorted(out)

    def delete_items(self, scope: Scope, ids: Sequence[str]) -> None:
        self._delete_nodes(scope, ids, items, [(item_scenes, "item_id")])

    # ------------------------------------------------------------------ triggers
    def put_triggers(self, scope: Scope, triggers_: Sequence[Trigger]) -> None:
        with self.transaction():
            self._put(triggers, scope, [mappers.trigger_row(t) for t in triggers_])
            for chunk in self._chunks([t.id for t in triggers_]):
                self._delete_in(trigger_views, scope, trigger_views.c.trigger_id, chunk)
            rows = [{"trigger_id": t.id, "position": pos, "name": v.name, "text": v.text} for t in triggers_
                    for pos, v in enumerate(t.views)]  # fmt: skip
            self._run_many(trigger_views.insert(), self._scoped(scope, rows))

    def triggers(
        self, scope: Scope, *, family: TriggerFamily | None = None, host_ids: Sequence[str] | None = None
    ) -> list[Trigger]:
        where: list[Any] = [self._in(triggers, scope)]
        if family is not None:
            where.append(triggers.c.family == family.value)
        chunks: list[list[Any]] = [where] if host_ids is None else [
            [*where, triggers.c.host_id.in_(chunk)] for chunk in self._chunks(host_ids)
        ]  # fmt: skip
        joined = trigger_views.join(
            triggers,
            (triggers.c.tenant == trigger_views.c.tenant) & (triggers.c.space == trigger_views.c.space)
            & (triggers.c.id == trigger_views.c.trigger_id),
        )  # fmt: skip
        rows: list[dict[str, Any]] = []
        views: dict[str, list[TriggerView]] = {}
        query = select(trigger_views.c.trigger_id, trigger_views.c.name, trigger_views.c.text).select_from(joined)
        with self.snapshot():  # the triggers and their views in one committed state
            for cond in chunks:
                rows += self._fetch(select(triggers).where(*cond))
                ordered = query.where(*cond).order_by(trigger_views.c.trigger_id, trigger_views.c.position)
                for v in self._fetch(ordered):
                    views.setdefault(v["trigger_id"], []).append(TriggerView(name=v["name"], text=v["text"]))
        out = [mappers.trigger(r, views.get(r["id"], [])) for r in rows]
        return sorted(out, key=lambda t: (t.host_id, t.family.value, t.group, t.id))

    def delete_triggers(self, scope: Scope, host_ids: Sequence[str]) -> None:
        with self.transaction():
            for chunk in self._chunks(host_ids):
                hosted = select(triggers.c.id).where(self._in(triggers, scope), triggers.c.host_id.in_(chunk))
                self._run(delete(trigger_views).where(self._in(trigger_views, scope),
                                                      trigger_views.c.trigger_id.in_(hosted)))  # fmt: skip
                self._delete_in(triggers, scope, triggers.c.host_id, chunk)

    # ------------------------------------------------------------------ persona
    def put_persona(self, scope: Scope, persona: Persona) -> None:
        with self.transaction():
            self._upsert(personas, ("tenant", "space", "speaker"), self._scoped(scope, [mappers.persona_row(persona)]))

    def personas(self, scope: Scope) -> list[Persona]:
        rows = self._fetch(select(personas).where(self._in(personas, scope)).order_by(personas.c.speaker))
        return [mappers.persona(r) for r in rows]

    def delete_personas(self, scope: Scope) -> None:
        with self.transaction():
            self._run(delete(personas).where(self._in(personas, scope)))
