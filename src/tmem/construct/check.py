"""Integrity checker of one space's memory (``tmem check SPACE``).

:func:`check_space` loads a :class:`MemorySnapshot` of the space from the store and runs :func:`check_snapshot`, a
pure function over the typed records, so each rule is testable on hand-made records (a store may refuse to hold some
corruptions in the first place; another backend may not).

Violation codes (each with a message naming the records involved):

- turns and scenes: ``turn_unassigned``, ``turn_in_several_scenes``, ``scene_empty``, ``scene_unknown_turn``,
  ``scene_turn_order``, ``scene_bad_times``, ``scene_without_topic``;
- topics: ``topic_link_unknown_topic``, ``topic_link_unknown_scene``, ``topic_empty``;
- items: ``item_no_scene``, ``item_unknown_scene``, ``atomic_scene_count``, ``connected_scene_count``,
  ``item_unknown_turn``, ``item_unknown_topic``, ``item_bad_date`` (also a precision that is not one of day, week,
  month, season, year, range, or a period ending before it starts), ``supersedes_unknown``,
  ``supersedes_inconsistent``, ``conflict_unknown``, ``conflict_one_sided``;
- triggers: ``trigger_unknown_host``, ``trigger_family_host_kind``, ``trigger_empty_view``;
- persona: ``persona_unknown_item``, ``persona_unknown_speaker``;
- build state and mode: ``state_bad_mode``, ``state_bad_sessions``, ``state_bad_failed``, ``state_bad_fallback``,
  ``extractive_not_descriptive``, ``mode_mixed``;
- LLM call log: ``llm_call_no_stage``, ``llm_call_no_model``, ``llm_call_bad_tokens``, ``llm_call_bad_outcome``,
  ``llm_call_bad_attempts``, ``llm_ok_without_response``, ``llm_error_without_message``, ``llm_paid_twice``,
  ``llm_cache_without_source``, ``llm_call_wrong_space``.

"Every turn in exactly one scene" applies to the sessions a completed build covers (state ``build.sessions``). After
them, segmentation proceeds in turn order, so a build that was interrupted (killed, out of budget, waiting for a
batch) or is still running leaves a suffix of unassigned turns: they are counted as ``pending_turns``, not reported
as violations (`tmem build SPACE` resumes). An unassigned turn *before* a segmented one is a gap no build leaves, and
is a ``turn_unassigned`` violation. ``scene_without_topic`` likewise applies to scenes of completed sessions only.

Failed units of the last build (``build.failed``: replies that stayed invalid after the retries) are listed in
``failed_units`` (the memory is incomplete, not corrupt; ``tmem build SPACE`` retries them): the turns a failed
segmentation window left open (with ``--no-fallback``; in the sequential plan the later turns are a pending suffix)
and the scenes a failed topic request left without topics are not violations. Scenes segmented without the model are listed in
``fallback_scenes``.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from datetime import date

from pydantic import BaseModel, ConfigDict, Field

from tmem.construct.report import STATE_MODE, STATE_SESSIONS, FailedUnit, load_failed, load_fallback
from tmem.models import (
    ITEM_FAMILIES,
    BuildMode,
    Item,
    ItemKind,
    LLMCall,
    Persona,
    Scene,
    Session,
    Space,
    Topic,
    TopicSceneLink,
    Trigger,
    TriggerFamily,
    Turn,
)
from tmem.scope import Scope
from tmem.store.base import Store
from tmem.util.dates import DATE_PRECISIONS
from tmem.util.state import STATE_TURN_SEQ

__all__ = ["CheckReport", "MemorySnapshot", "Violation", "check_snapshot", "check_space", "load_snapshot"]

_OUTCOMES = {"ok", "error", "cached", "batch"}


class Violation(BaseModel):
    model_config = ConfigDict(frozen=True)

    code: str = Field(description="Stable machine-readable code (see the module docstring).")
    message: str
    record: str | None = Field(default=None, description="Id of the offending record, when there is one.")


class CheckReport(BaseModel):
    space: str
    mode: str | None = Field(description="build.mode of the space ('llm', 'extractive'), None when never built.")
    descriptive_only: bool = Field(description="True for an extractive memory: no Bridge, Horizon or persona.")
    checked: dict[str, int] = Field(default_factory=dict, description="Records examined, per type.")
    violations: list[Violation] = Field(default_factory=list)
    pending_turns: int = Field(
        default=0,
        description="Turns after the last segmented one, not covered by a completed build: a build was interrupted "
        "or is running. Not a violation: `tmem build SPACE` resumes it.",
    )

    @property
    def ok(self) -> bool:
        return not self.violations

    failed_units: list[FailedUnit] = Field(
        default_factory=list,
        description="Units the last build could not complete (state build.failed): the memory is consistent but "
        "incomplete there; `tmem build SPACE` retries them. What they left undone is not reported as violations.",
    )
    fallback_scenes: dict[str, str] = Field(
        default_factory=dict, description="Scenes segmented without the model (state build.fallback): id -> reason."
    )

    @property
    def build_incomplete(self) -> bool:
        return self.pending_turns > 0

    @property
    def complete(self) -> bool:
        """No failed unit is recorded (a pending, interrupted build is reported by ``build_incomplete``)."""
        return not self.failed_units


class MemorySnapshot(BaseModel):
    """Every record of one space, as the checker sees it."""

    model_config = ConfigDict(frozen=True)

    space: Space
    key: str = Field(description="The space's store key, which its LLM calls record (T/S for a tenant's space).")
    sessions: list[Session]
    turns: list[Turn]
    scenes: list[Scene]
    topics: list[Topic]
    links: list[TopicSceneLink]
    items: list[Item]
    triggers: list[Trigger]
    personas: list[Persona]
    calls: list[LLMCall]
    state: dict[str, str]


def load_snapshot(store: Store, space: Scope) -> MemorySnapshot:
    """Read the whole space in one snapshot of the store (raises NotFoundError naming the known spaces when it does
    not exist): a build committing meanwhile is seen whole or not at all."""
    with store.snapshot():
        return _read(store, space)


def _read(store: Store, space: Scope) -> MemorySnapshot:
    return MemorySnapshot(
        space=store.get_space(space),
        key=space.key,
        sessions=store.sessions(space),
        turns=store.turns(space),
        scenes=store.scenes(space),
        topics=store.topics(space),
        links=store.topic_links(space),
        items=store.items(space),
        triggers=store.triggers(space),
        personas=store.personas(space),
        calls=store.llm_calls(space),
        state=store.state_keys(space),
    )


def check_space(store: Store, space: Scope) -> CheckReport:
    return check_snapshot(load_snapshot(store, space))


class _Checker:
    def __init__(self, snap: MemorySnapshot) -> None:
        self.s = snap
        self.out: list[Violation] = []
        self.turn_ids = {t.id for t in snap.turns}
        self.scene_ids = {s.id for s in snap.scenes}
        self.topic_ids = {t.id for t in snap.topics}
        self.item_by_id = {i.id: i for i in snap.items}
        self.pending_turns = 0
        self.completed: set[str] = set()
        try:
            self.failed = load_failed(snap.state)
        except ValueError:
            self.failed = []
            self.add("state_bad_failed", "build.failed is not a JSON list of failed units")
        # what failed units left undone is reported by them, not as violations
        self.failed_turns = {r for u in self.failed if u.stage == "segment" for r in u.refs}
        self.failed_scenes = {r for u in self.failed if u.stage == "topics" for r in u.refs}

    def add(self, code: str, message: str, record: str | None = None) -> None:
        self.out.append(Violation(code=code, message=message, record=record))

    # ------------------------------------------------------------------ state
    def built_sessions(self) -> int | None:
        raw = self.s.state.get(STATE_SESSIONS)
        if raw is None:
            return None
        try:
            value = int(raw)
        except ValueError:
            self.add("state_bad_sessions", f"{STATE_SESSIONS} is {raw!r}, not a number of sessions")
            return None
        if not 0 <= value <= len(self.s.sessions):
            self.add(
                "state_bad_sessions",
                f"{STATE_SESSIONS} is {value} but the space holds {len(self.s.sessions)} sessions",
            )
            return None
        return value

    def state(self) -> str | None:
        mode = self.s.state.get(STATE_MODE)
        if mode is not None and mode not in {m.value for m in BuildMode}:
            self.add("state_bad_mode", f"{STATE_MODE} is {mode!r}; expected 'llm' or 'extractive'")
        return mode

    # ------------------------------------------------------------------ turns and scenes
    def scenes(self) -> None:
        seq = {t.id: t.seq for t in self.s.turns}
        owners: dict[str, list[str]] = defaultdict(list)
        for scene in self.s.scenes:
            if not scene.turn_ids:
                self.add("scene_empty", f"scene {scene.id} has no turns", scene.id)
            unknown = [t for t in scene.turn_ids if t not in self.turn_ids]
            if unknown:
                self.add("scene_unknown_turn", f"scene {scene.id} lists unknown turns {unknown[:5]}", scene.id)
            known = [seq[t] for t in scene.turn_ids if t in seq]
            if known != sorted(known) or len(set(scene.turn_ids)) != len(scene.turn_ids):
                self.add("scene_turn_order", f"scene {scene.id} lists its turns out of order or twice", scene.id)
            if scene.start > scene.end:
                self.add(
                    "scene_bad_times", f"scene {scene.id} starts {scene.start} after it ends {scene.end}", scene.id
                )
            for tid in dict.fromkeys(scene.turn_ids):
                owners[tid].append(scene.id)
        for tid, scene_ids in owners.items():
            if len(scene_ids) > 1:
                self.add("turn_in_several_scenes", f"turn {tid} is in scenes {sorted(scene_ids)}", tid)
        # Sessions a completed build covers: every turn in a scene. Beyond them, segmentation runs in turn order, so
        # an interrupted (or running) build leaves a suffix of unassigned turns: pending, not corruption. An
        # unassigned turn before an assigned one is a gap, which no build leaves. Messages appended to a built
        # session after the build (the build.turn_seq watermark) are stale, not unassigned.
        completed = self.completed_sessions()
        last_assigned = max((t.seq for t in self.s.turns if t.id in owners), default=-1)
        watermark = int(self.s.state.get(STATE_TURN_SEQ, str(1 << 62)))
        for turn in self.s.turns:
            if turn.id in owners or turn.id in self.failed_turns:
                continue
            if (turn.session_id in completed or turn.seq < last_assigned) and turn.seq <= watermark:
                self.add("turn_unassigned", f"turn {turn.id} (session {turn.session_id}) is in no scene", turn.id)
            elif self.s.scenes:
                self.pending_turns += 1
        self.completed = completed

    def completed_sessions(self) -> set[str]:
        built = self.built_sessions()
        ordered = sorted(self.s.sessions, key=lambda s: s.seq)
        return {s.id for s in ordered[:built]} if built is not None else set()

    # ------------------------------------------------------------------ topics
    def topics(self, completed: bool) -> None:
        linked_topics: Counter[str] = Counter()
        linked_scenes: set[str] = set()
        for link in self.s.links:
            if link.topic_id not in self.topic_ids:
                self.add(
                    "topic_link_unknown_topic",
                    f"link {link.topic_id} -> {link.scene_id} names an unknown topic",
                    link.topic_id,
                )
            if link.scene_id not in self.scene_ids:
                self.add(
                    "topic_link_unknown_scene",
                    f"link {link.topic_id} -> {link.scene_id} names an unknown scene",
                    link.scene_id,
                )
            linked_topics[link.topic_id] += 1
            linked_scenes.add(link.scene_id)
        for topic in self.s.topics:
            if linked_topics[topic.id] == 0:
                self.add("topic_empty", f"topic {topic.id} ({topic.label!r}) has no scene", topic.id)
        if completed:
            session_of = {t.id: t.session_id for t in self.s.turns}
            for scene in self.s.scenes:
                # Scenes of sessions after the last completed build may still await the topic stage (pending).
                if not all(session_of.get(t) in self.completed for t in scene.turn_ids):
                    continue
                if scene.id not in linked_scenes and scene.id not in self.failed_scenes:
                    self.add("scene_without_topic", f"scene {scene.id} belongs to no topic", scene.id)

    # ------------------------------------------------------------------ items
    def items(self) -> None:
        for item in self.s.items:
            if not item.scene_ids:
                self.add("item_no_scene", f"item {item.id} is linked to no scene", item.id)
            missing = [s for s in item.scene_ids if s not in self.scene_ids]
            if missing:
                self.add("item_unknown_scene", f"item {item.id} names unknown scenes {missing}", item.id)
            n = len(set(item.scene_ids))
            if item.kind is ItemKind.ATOMIC and n != 1:
                self.add("atomic_scene_count", f"atomic item {item.id} has {n} source scenes, not 1", item.id)
            if item.kind is ItemKind.CONNECTED and n < 2:
                self.add(
                    "connected_scene_count", f"connected item {item.id} has {n} source scene(s), not >= 2", item.id
                )
            bad_turns = [t for t in item.turn_ids if t not in self.turn_ids]
            if bad_turns:
                self.add("item_unknown_turn", f"item {item.id} names unknown turns {bad_turns[:5]}", item.id)
            if item.topic_id is not None and item.topic_id not in self.topic_ids:
                self.add("item_unknown_topic", f"item {item.id} names unknown topic {item.topic_id}", item.id)
            if item.date is not None:
                self.item_date(item)
            for other in item.conflicts_with:
                peer = self.item_by_id.get(other)
                if peer is None or other == item.id:
                    self.add("conflict_unknown", f"item {item.id} conflicts with {other}, not another item", item.id)
                elif item.id not in peer.conflicts_with:
                    self.add("conflict_one_sided", f"item {item.id} conflicts with {other} but not back", item.id)
            self.supersession(item)

    def item_date(self, item: Item) -> None:
        try:
            start = date.fromisoformat(item.date or "")
            end = date.fromisoformat(item.date_end) if item.date_end else start
        except ValueError:
            self.add(
                "item_bad_date", f"item {item.id} has date {item.date!r}..{item.date_end!r}, not YYYY-MM-DD", item.id
            )
            return
        if item.date_precision not in (*DATE_PRECISIONS, None) or end < start:
            self.add(
                "item_bad_date",
                f"item {item.id}: precision {item.date_precision!r} with {item.date}..{item.date_end} is not a period",
                item.id,
            )

    def supersession(self, item: Item) -> None:
        for attr, back in (("supersedes", "superseded_by"), ("superseded_by", "supersedes")):
            other_id: str | None = getattr(item, attr)
            if other_id is None:
                continue
            other = self.item_by_id.get(other_id)
            if other is None or other_id == item.id:
                self.add("supersedes_unknown", f"item {item.id}.{attr} names {other_id}, not another item", item.id)
            elif getattr(other, back) != item.id:
                self.add(
                    "supersedes_inconsistent",
                    f"item {item.id}.{attr} = {other_id} but {other_id}.{back} = {getattr(other, back)}",
                    item.id,
                )

    # ------------------------------------------------------------------ triggers and persona
    def triggers(self) -> None:
        for trig in self.s.triggers:
            wants_item = trig.family in ITEM_FAMILIES
            if trig.host_kind != ("item" if wants_item else "scene"):
                self.add(
                    "trigger_family_host_kind",
                    f"trigger {trig.id} of family {trig.family.value} is hosted by a {trig.host_kind}",
                    trig.id,
                )
            hosts = self.item_by_id.keys() if trig.host_kind == "item" else self.scene_ids
            if trig.host_id not in hosts:
                self.add(
                    "trigger_unknown_host", f"trigger {trig.id} names unknown {trig.host_kind} {trig.host_id}", trig.id
                )
            if not trig.views or any(not v.text.strip() or not v.name.strip() for v in trig.views):
                self.add("trigger_empty_view", f"trigger {trig.id} has no views or an empty one", trig.id)

    def personas(self) -> None:
        speakers = set(self.s.space.speakers)
        for persona in self.s.personas:
            if speakers and persona.speaker not in speakers:
                self.add(
                    "persona_unknown_speaker",
                    f"persona of {persona.speaker!r}, who is not a speaker of the space",
                    persona.speaker,
                )
            for trait in persona.traits:
                missing = [i for i in trait.item_ids if i not in self.item_by_id]
                if missing:
                    self.add(
                        "persona_unknown_item",
                        f"{persona.speaker}'s trait {trait.category}: {trait.value!r} cites unknown items {missing}",
                        persona.speaker,
                    )

    def extractive(self) -> None:
        associative = Counter(t.family.value for t in self.s.triggers if t.family is not TriggerFamily.ENTITY)
        if associative or self.s.personas:
            self.add(
                "extractive_not_descriptive",
                f"an extractive memory holds {dict(associative)} non-Entity triggers and {len(self.s.personas)} "
                "personas; it must be descriptive only",
            )
        llm_nodes = [s.id for s in self.s.scenes if s.mode is not BuildMode.EXTRACTIVE]
        llm_nodes += [i.id for i in self.s.items if i.mode is not BuildMode.EXTRACTIVE]
        if llm_nodes:
            self.add("mode_mixed", f"an extractive memory holds LLM-built nodes {llm_nodes[:5]}")

    # ------------------------------------------------------------------ LLM log
    def calls(self) -> None:
        paid: Counter[str] = Counter()
        sources: set[str] = set()
        for n, call in enumerate(self.s.calls):
            ref = f"call #{n} ({call.stage or '?'}, {call.request_hash[:12]})"
            if call.space != self.s.key:
                self.add("llm_call_wrong_space", f"{ref} is logged for space {call.space!r}", call.request_hash)
            if not call.stage.strip():
                self.add("llm_call_no_stage", f"{ref} has no stage", call.request_hash)
            if not call.model.strip():
                self.add("llm_call_no_model", f"{ref} has no model", call.request_hash)
            if call.tokens_in < 0 or call.tokens_out < 0 or call.latency_ms < 0:
                self.add("llm_call_bad_tokens", f"{ref} has negative tokens or latency", call.request_hash)
            if call.outcome not in _OUTCOMES:
                self.add("llm_call_bad_outcome", f"{ref} has outcome {call.outcome!r}", call.request_hash)
            if call.outcome in ("ok", "batch") and call.attempts < 1:
                # an error may have no reply at all (a transient failure), but a success had at least one
                self.add("llm_call_bad_attempts", f"{ref} succeeded after {call.attempts} replies", call.request_hash)
            if call.outcome == "ok" and (call.response is None or not _is_json(call.response)):
                # a live call logs its validated output, so its response is always JSON
                self.add("llm_ok_without_response", f"{ref} succeeded without a JSON response", call.request_hash)
            if call.outcome == "batch" and not (call.response or "").strip():
                # a batch result is the raw message content (validated and repaired when a build reads it), so it
                # may be fenced or chatty; it must exist
                self.add("llm_ok_without_response", f"{ref} is a batch result without a reply", call.request_hash)
            if call.outcome in ("ok", "batch"):
                sources.add(call.request_hash)
            if call.outcome == "ok":
                paid[call.request_hash] += 1
            if call.outcome == "error" and not (call.error or "").strip():
                self.add("llm_error_without_message", f"{ref} failed without an error message", call.request_hash)
            if call.outcome == "cached" and call.request_hash not in sources:
                self.add(
                    "llm_cache_without_source",
                    f"{ref} is a cache hit with no earlier successful call to answer it",
                    call.request_hash,
                )
        for request_hash, count in paid.items():
            if count > 1:
                self.add(
                    "llm_paid_twice",
                    f"request {request_hash[:12]} was paid {count} times; the response cache should have answered",
                    request_hash,
                )


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def check_snapshot(snap: MemorySnapshot) -> CheckReport:
    """All violations of the memory's invariants (an empty list means the memory is consistent)."""
    checker = _Checker(snap)
    mode = checker.state()
    checker.scenes()
    checker.topics(completed=mode is not None and STATE_SESSIONS in snap.state)
    checker.items()
    checker.triggers()
    checker.personas()
    if mode == BuildMode.EXTRACTIVE.value:
        checker.extractive()
    checker.calls()
    counts = {
        "sessions": len(snap.sessions),
        "turns": len(snap.turns),
        "scenes": len(snap.scenes),
        "topics": len(snap.topics),
        "topic_links": len(snap.links),
        "items": len(snap.items),
        "triggers": len(snap.triggers),
        "personas": len(snap.personas),
        "llm_calls": len(snap.calls),
    }
    try:
        fallback = load_fallback(snap.state)
    except ValueError:
        fallback = {}
        checker.add("state_bad_fallback", "build.fallback is not a JSON object of scene ids")
    return CheckReport(
        space=snap.space.name,
        mode=mode,
        descriptive_only=mode == BuildMode.EXTRACTIVE.value,
        checked=counts,
        violations=checker.out,
        pending_turns=checker.pending_turns,
        failed_units=checker.failed,
        fallback_scenes=fallback,
    )
