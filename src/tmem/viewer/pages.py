"""What each page shows, computed from one space's records (``Memory.export``); the templates only lay it out.

Nothing here reads a store: every function takes the records the ``Memory`` facade returned, so the viewer shows
exactly what the library holds.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date

from tmem.memory import SpaceExport
from tmem.models import ITEM_FAMILIES, SCENE_FAMILIES, Item, PersonaTrait, Scene, Session, Topic, Trigger, Turn

FAMILY_LABELS = {
    "entity": "Entity (Q I: item, descriptive)",
    "bridge": "Bridge (Q II: item, associative)",
    "horizon": "Horizon (Q III: scene, associative)",
    "scene": "Scene (Q IV: scene, descriptive)",
}


@dataclass
class SceneView:
    scene: Scene
    topics: list[Topic]
    turns: list[Turn]
    triggers: dict[str, list[Trigger]]
    items: list[Item]


@dataclass
class DayView:
    day: date
    sessions: list[str]
    scenes: list[SceneView]


@dataclass
class ItemView:
    item: Item
    scenes: list[Scene]
    topic: Topic | None
    turns: list[Turn]
    triggers: dict[str, list[Trigger]]
    supersedes: Item | None
    superseded_by: Item | None
    cited_by: list[tuple[str, PersonaTrait]] = field(default_factory=list)
    conflicts: list[Item] = field(default_factory=list)
    date: str = "undated"


@dataclass
class TopicView:
    topic: Topic
    scenes: list[Scene]
    items: int


@dataclass
class TraitView:
    trait: PersonaTrait
    items: list[Item]
    missing: list[str]


@dataclass
class PersonaView:
    speaker: str
    summary: str
    traits: dict[str, list[TraitView]]


@dataclass
class SessionView:
    session: Session
    turns: int
    first: Turn | None
    built: bool = True


class Records:
    """Lookups over one export, built once per request."""

    def __init__(self, export: SpaceExport) -> None:
        self.export = export
        self.turn = {t.id: t for t in export.turns}
        self.scene = {s.id: s for s in export.scenes}
        self.topic = {t.id: t for t in export.topics}
        self.item = {i.id: i for i in export.items}
        self.scene_topics: dict[str, list[Topic]] = defaultdict(list)
        self.topic_scenes: dict[str, list[Scene]] = defaultdict(list)
        for link in export.topic_links:
            if link.topic_id in self.topic and link.scene_id in self.scene:
                self.scene_topics[link.scene_id].append(self.topic[link.topic_id])
                self.topic_scenes[link.topic_id].append(self.scene[link.scene_id])
        self.host_triggers: dict[str, dict[str, list[Trigger]]] = defaultdict(lambda: defaultdict(list))
        for trig in export.triggers:
            self.host_triggers[trig.host_id][trig.family.value].append(trig)
        self.scene_items: dict[str, list[Item]] = defaultdict(list)
        for item in export.items:
            for sid in item.scene_ids:
                self.scene_items[sid].append(item)
        self.citations: dict[str, list[tuple[str, PersonaTrait]]] = defaultdict(list)
        for persona in export.personas:
            for trait in persona.traits:
                for iid in trait.item_ids:
                    self.citations[iid].append((persona.speaker, trait))

    def built_turn_ids(self) -> set[str]:
        """Turns held by a scene; the others were imported after the last build."""
        return {t for s in self.export.scenes for t in s.turn_ids}

    def unbuilt_turns(self) -> list[Turn]:
        held = self.built_turn_ids()
        return [t for t in self.export.turns if t.id not in held]

    def triggers_of(self, host_id: str, families: tuple[str, ...]) -> dict[str, list[Trigger]]:
        """The host's triggers by family, in the order of ``families``, families without triggers left out."""
        found = self.host_triggers.get(host_id, {})
        return {fam: found[fam] for fam in families if found.get(fam)}

    def scene_view(self, scene: Scene) -> SceneView:
        return SceneView(
            scene=scene,
            topics=self.scene_topics.get(scene.id, []),
            turns=[self.turn[t] for t in scene.turn_ids if t in self.turn],
            triggers=self.triggers_of(scene.id, tuple(f.value for f in SCENE_FAMILIES)),
            items=self.scene_items.get(scene.id, []),
        )

    def item_view(self, item: Item) -> ItemView:
        turn_ids = item.turn_ids or [t for sid in item.scene_ids if sid in self.scene for t in self.scene[sid].turn_ids]
        return ItemView(
            item=item,
            scenes=[self.scene[s] for s in item.scene_ids if s in self.scene],
            topic=self.topic.get(item.topic_id) if item.topic_id else None,
            turns=[self.turn[t] for t in turn_ids if t in self.turn],
            triggers=self.triggers_of(item.id, tuple(f.value for f in ITEM_FAMILIES)),
            supersedes=self.item.get(item.supersedes) if item.supersedes else None,
            superseded_by=self.item.get(item.superseded_by) if item.superseded_by else None,
            cited_by=self.citations.get(item.id, []),
            conflicts=[self.item[i] for i in item.conflicts_with if i in self.item],
            date=date_label(item),
        )


def date_label(item: Item) -> str:
    """The item's date with the period and precision it names (``2023-05-01 – 2023-05-31 (month)``); ``undated``
    when it has none."""
    if not item.date:
        return "undated"
    end, precision = item.date_end, item.date_precision
    text = f"{item.date} – {end}" if end and end != item.date else item.date
    return f"{text} ({precision})" if precision and precision != "day" else text


def sessions(records: Records) -> list[SessionView]:
    counts: dict[str, list[Turn]] = defaultdict(list)
    for turn in records.export.turns:
        counts[turn.session_id].append(turn)
    held = records.built_turn_ids()
    return [
        SessionView(
            session=s,
            turns=len(counts[s.id]),
            first=counts[s.id][0] if counts[s.id] else None,
            built=bool(counts[s.id]) and all(t.id in held for t in counts[s.id]),
        )
        for s in records.export.sessions
    ]


def timeline(records: Records) -> list[DayView]:
    """Scenes along the conversation's dates (by start, then arrival), grouped by day with that day's sessions."""
    by_day: dict[date, list[Scene]] = defaultdict(list)
    for scene in sorted(records.export.scenes, key=lambda s: (s.start, s.seq)):
        by_day[scene.start.date()].append(scene)
    session_days: dict[date, list[str]] = defaultdict(list)
    for s in records.export.sessions:
        session_days[s.started_at.date()].append(s.id)
    return [
        DayView(day=day, sessions=session_days.get(day, []), scenes=[records.scene_view(s) for s in scenes])
        for day, scenes in sorted(by_day.items())
    ]


def topics(records: Records) -> list[TopicView]:
    per_topic: dict[str, int] = defaultdict(int)
    for item in records.export.items:
        if item.topic_id:
            per_topic[item.topic_id] += 1
    return [
        TopicView(
            topic=t,
            scenes=sorted(records.topic_scenes.get(t.id, []), key=lambda s: (s.start, s.seq)),
            items=per_topic[t.id],
        )
        for t in sorted(records.export.topics, key=lambda t: t.seq)
    ]


@dataclass(frozen=True)
class ItemFilter:
    """The items page's filters (all optional; empty strings mean 'any')."""

    q: str = ""
    kind: str = ""
    speaker: str = ""
    family: str = ""
    superseded: bool = True

    def keep(self, records: Records, item: Item) -> bool:
        if self.q and self.q.casefold() not in item.text.casefold() and self.q != item.id:
            return False
        if self.kind and item.kind.value != self.kind:
            return False
        if self.speaker and (item.speaker or "") != self.speaker:
            return False
        if self.family and not records.host_triggers.get(item.id, {}).get(self.family):
            return False
        return self.superseded or item.superseded_by is None


@dataclass(frozen=True)
class Pager:
    """One page of a list: 1-based ``page`` of ``pages``, rows ``start:stop``."""

    page: int
    pages: int
    start: int
    stop: int

    @classmethod
    def of(cls, count: int, page: int, size: int) -> Pager:
        pages = max(1, -(-count // size))
        page = min(max(1, page), pages)
        return cls(page=page, pages=pages, start=(page - 1) * size, stop=min(count, page * size))

    def numbers(self) -> list[int]:
        return list(range(1, self.pages + 1))


def items(records: Records, flt: ItemFilter) -> list[ItemView]:
    """Items in arrival order, filtered."""
    return [records.item_view(i) for i in records.export.items if flt.keep(records, i)]


def speakers(records: Records) -> list[str]:
    return sorted({i.speaker for i in records.export.items if i.speaker})


def personas(records: Records) -> list[PersonaView]:
    out = []
    for persona in records.export.personas:
        traits: dict[str, list[TraitView]] = defaultdict(list)
        for trait in persona.traits:
            cited = [records.item[i] for i in trait.item_ids if i in records.item]
            missing = [i for i in trait.item_ids if i not in records.item]
            traits[trait.category].append(TraitView(trait=trait, items=cited, missing=missing))
        out.append(PersonaView(speaker=persona.speaker, summary=persona.summary, traits=dict(traits)))
    return out


def counts(records: Records) -> dict[str, int]:
    e = records.export
    return {
        "sessions": len(e.sessions),
        "turns": len(e.turns),
        "scenes": len(e.scenes),
        "topics": len(e.topics),
        "items": len(e.items),
        "connected items": sum(1 for i in e.items if i.kind.value == "connected"),
        "superseded items": sum(1 for i in e.items if i.superseded_by),
        "triggers": len(e.triggers),
        "personas": len(e.personas),
    }


def trigger_counts(records: Records) -> dict[str, int]:
    out = {fam: 0 for fam in FAMILY_LABELS}
    for trig in records.export.triggers:
        out[trig.family.value] += 1
    return out


def built_turns(records: Records) -> int:
    """Turns held by a scene: the rest were imported after the last build (the memory is stale for them)."""
    return len(records.built_turn_ids())


SHOWN_STATE = ("build.mode", "build.sessions", "build.digest")


def build_records(state: dict[str, str]) -> dict[str, str]:
    """Other ``build.*`` state keys a build left (e.g. units it could not complete), shown as recorded."""
    return {k: v for k, v in sorted(state.items()) if k.startswith("build.") and k not in SHOWN_STATE}
