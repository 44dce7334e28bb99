"""The extractive (no-LLM) build: scenes, topics, atomic items and Entity triggers, session by session.

This is the descriptive half of T-Mem only: no Bridge, Horizon or Scene triggers and no persona. Sessions are the
unit of work and of checkpointing: each new session is segmented, its scenes join topics online, its substantive
turns become items with Entity triggers, and everything it produced is written in one transaction together with the
cursor ``extractive.sessions``. A killed build resumes after the last committed session; a build after more sessions
were imported processes only those. Session breaks always close scenes in this mode; only the last built session
is reopened, when messages were appended to it (:mod:`tmem.construct.extractive.reopen`), and it is built aside:
its stored scenes stay readable until the rebuilt session replaces them in the same transaction. Topic centroids are rebuilt from stored memberships in arrival order, so an incremental build takes
the same decisions as a full one.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from tqdm import tqdm

from tmem.construct.extractive.cluster import JOIN_THRESHOLD, OnlineTopics
from tmem.construct.extractive.items import entity_triggers, is_substantive, item_from_turn
from tmem.construct.extractive.keyphrases import extract_keyphrases
from tmem.construct.extractive.reopen import grew_after_build, reopen_session
from tmem.construct.extractive.scenes import make_scene, make_topic, scene_topic_text, topic_id
from tmem.construct.extractive.segment import segment_session
from tmem.construct.report import STATE_MODE, STATE_SESSIONS, BuildReport, StageReport
from tmem.embed.base import Embedder, Matrix
from tmem.embed.cached import CachedEmbedder
from tmem.embed.texts import turn_embedding_text
from tmem.errors import BuildError
from tmem.models import BuildMode, Scene, Session, Topic, TopicSceneLink, Trigger, Turn
from tmem.scope import Scope
from tmem.store.base import Store

__all__ = ["STATE_CURSOR", "build_extractive", "turn_embedding_text"]

STATE_CURSOR = "extractive.sessions"  # sessions (in seq order) whose extractive nodes are committed
STATE_THRESHOLD = "extractive.topic_threshold"  # the clustering threshold the space was built with


def _embed(store: Store, space: Scope, embedder: Embedder, texts: Sequence[str]) -> Matrix:
    """Embed through the store's embedding cache (model id + text hash): a rerun embeds nothing twice."""
    cached = embedder if isinstance(embedder, CachedEmbedder) else CachedEmbedder(embedder, store, space)
    vectors = cached.embed(texts).vectors
    if vectors.shape != (len(texts), embedder.dim):
        raise BuildError(
            f"Embedder {embedder.model_id} returned shape {vectors.shape} for {len(texts)} texts; "
            "check the embedding model configuration."
        )
    return vectors


@dataclass
class _Counters:
    scenes: StageReport = field(default_factory=lambda: StageReport(stage="segment"))
    topics: StageReport = field(default_factory=lambda: StageReport(stage="topics"))
    items: StageReport = field(default_factory=lambda: StageReport(stage="items"))
    triggers: StageReport = field(default_factory=lambda: StageReport(stage="triggers"))

    def all(self) -> list[StageReport]:
        return [self.scenes, self.topics, self.items, self.triggers]


class _Run:
    """State of one build call over one space."""

    def __init__(self, store: Store, space: Scope, embedder: Embedder, threshold: float) -> None:
        self.store = store
        self.space = space
        self.embedder = embedder
        self.speakers = list(store.get_space(space).speakers)
        self.turns_by_session: dict[str, list[Turn]] = {}
        for t in store.turns(space):
            self.turns_by_session.setdefault(t.session_id, []).append(t)
        self.turn_by_id = {t.id: t for ts in self.turns_by_session.values() for t in ts}
        self.scenes = store.scenes(space)
        self.clusters = OnlineTopics(threshold=threshold)
        self.c = _Counters()

    def restore_topics(self, reopened: frozenset[str] = frozenset()) -> None:
        """Rebuild the online clustering state from the stored topics and memberships, as if the ``reopened`` scenes
        (still stored until the session built again replaces them) and the topics only they belonged to were gone."""
        topics = self.store.topics(self.space)
        if not topics:
            return
        scene_seq = {s.id: s.seq for s in self.scenes}
        members: dict[str, list[str]] = {t.id: [] for t in topics}
        emptied: set[str] = set()
        for link in self.store.topic_links(self.space):
            if link.scene_id in reopened:
                emptied.add(link.topic_id)
                continue
            if link.topic_id not in members or link.scene_id not in scene_seq:
                raise BuildError(
                    f"Space {self.space.key!r} holds a topic link {link.topic_id} -> {link.scene_id} to a missing "
                    f"record; run `tmem check {self.space.key}` and rebuild the space."
                )
            members[link.topic_id].append(link.scene_id)
        topics = [t for t in topics if members[t.id] or t.id not in emptied]
        member_ids = {sid for m in members.values() for sid in m}
        vectors = self.scene_vectors([s for s in self.scenes if s.id in member_ids])
        for topic in sorted(topics, key=lambda t: t.seq):
            ordered = sorted(members[topic.id], key=lambda sid: scene_seq[sid])
            self.clusters.restore(topic.id, topic.seq, [(sid, vectors[sid]) for sid in ordered])

    def scene_vectors(self, scenes: Sequence[Scene]) -> dict[str, Matrix]:
        """Each scene's topic vector (the embedding of its keyphrases; cached vectors are reused)."""
        texts = [scene_topic_text([self.turn_by_id[tid] for tid in s.turn_ids], self.speakers) for s in scenes]
        vecs = _embed(self.store, self.space, self.embedder, texts)
        return {scene.id: vecs[row] for row, scene in enumerate(scenes)}

    def build_session(self, session: Session, cursor: int, reopened: Sequence[Scene] = ()) -> None:
        """Build ``session`` and write it with the cursor in one transaction; ``reopened`` are the stored scenes of
        an earlier build of it, removed in that same transaction (readers see them until the new ones commit)."""
        t0 = time.perf_counter()
        turns = self.turns_by_session.get(session.id, [])
        if not turns:  # every turn of the session was forgotten
            self.store.set_state(self.space, STATE_CURSOR, str(cursor))
            return
        vectors = _embed(self.store, self.space, self.embedder, [turn_embedding_text(t) for t in turns])
        ranges = segment_session(vectors)
        next_seq = max((s.seq for s in self.scenes), default=-1) + 1
        new_scenes = [
            make_scene(turns[a:b], vectors[a:b], next_seq + k, self.speakers) for k, (a, b) in enumerate(ranges)
        ]
        self.scenes.extend(new_scenes)
        t1 = time.perf_counter()
        before = {t.id for t in self.clusters.topics}
        links: list[TopicSceneLink] = []
        touched: set[str] = set()
        scene_vectors = self.scene_vectors(new_scenes)
        for scene in new_scenes:
            for topic in self.clusters.assign(scene.id, scene_vectors[scene.id], topic_id(scene.id)):
                links.append(TopicSceneLink(topic_id=topic.id, scene_id=scene.id))
                touched.add(topic.id)
        topics = self._topics(touched)
        t2 = time.perf_counter()
        scene_of_turn = {tid: s.id for s in new_scenes for tid in s.turn_ids}
        session_phrases = {
            k.key: k
            for k in extract_keyphrases(
                [t.text + (f"\n{t.caption}" if t.caption else "") for t in turns], exclude=self.speakers
            )
        }
        items = [
            item_from_turn(t, scene_of_turn[t.id], self.speakers) for t in turns if is_substantive(t, self.speakers)
        ]
        t3 = time.perf_counter()
        triggers: list[Trigger] = []
        for item in items:
            turn = self.turn_by_id[item.turn_ids[0]]
            triggers.extend(entity_triggers(item, turn, session_phrases, self.speakers))
        t4 = time.perf_counter()
        with self.store.transaction():
            if reopened:
                stored = [*reopened, *(sc for sc in self.scenes if sc not in new_scenes)]
                reopen_session(self.store, self.space, stored, turns, self.speakers)
            self.store.put_scenes(self.space, new_scenes)
            self.store.put_topics(self.space, topics)
            self.store.link_topics(self.space, links)
            self.store.put_items(self.space, items)
            self.store.put_triggers(self.space, triggers)
            self.store.set_state(self.space, STATE_CURSOR, str(cursor))
        t5 = time.perf_counter()
        opened = sum(1 for t in topics if t.id not in before)
        self.c.scenes.created += len(new_scenes)
        self.c.topics.created += opened
        self.c.topics.updated += len(topics) - opened
        self.c.items.created += len(items)
        self.c.triggers.created += len(triggers)
        self.c.scenes.seconds += t1 - t0 + (t5 - t4)  # the write is counted with segmentation
        self.c.topics.seconds += t2 - t1
        self.c.items.seconds += t3 - t2
        self.c.triggers.seconds += t4 - t3

    def _topics(self, touched: set[str]) -> list[Topic]:
        """Records of every topic that gained a scene, relabelled over all its members."""
        by_id = {s.id: s for s in self.scenes}
        out: list[Topic] = []
        for state in self.clusters.topics:
            if state.id not in touched:
                continue
            member_turns = [self.turn_by_id[tid] for sid in state.members for tid in by_id[sid].turn_ids]
            out.append(make_topic(state.id, state.seq, member_turns, self.speakers))
        return out


async def build_extractive(
    store: Store,
    space: Scope,
    *,
    embedder: Embedder,
    progress: bool = False,
    topic_threshold: float | None = None,
) -> BuildReport:
    """Build (or extend) the extractive memory of ``space``: only sessions not yet covered are processed.

    ``topic_threshold`` (default :data:`~tmem.construct.extractive.cluster.JOIN_THRESHOLD`) is fixed by the first build
    of a space; a later build must use the same value (or leave it unset) so that old and new scenes are clustered
    alike. Raises BuildError when the space already holds an LLM-built memory (the two modes are not mixed).
    """
    started = time.perf_counter()
    mode = store.get_state(space, STATE_MODE)
    recorded = store.get_state(space, STATE_THRESHOLD)
    threshold = topic_threshold if topic_threshold is not None else JOIN_THRESHOLD
    if recorded is not None:
        if topic_threshold is not None and float(recorded) != topic_threshold:
            raise BuildError(
                "Space {space!r} was built with topic threshold {recorded}; build it again with that value, or "
                "delete the space, import it again and rebuild with the new threshold.",
                space=space,
                recorded=recorded,
            )
        threshold = float(recorded)
    run = _Run(store, space, embedder, threshold)
    if mode == BuildMode.LLM.value or any(s.mode is not BuildMode.EXTRACTIVE for s in run.scenes):
        raise BuildError(
            "Space {space!r} was built with an LLM; the extractive mode does not extend it. Build it with the "
            "configured LLM, or delete the space, import it again and build with --llm none.",
            space=space,
        )
    sessions = store.sessions(space)
    cursor = int(store.get_state(space, STATE_CURSOR) or 0)
    if cursor > len(sessions):
        raise BuildError(
            "Space {space!r} records {cursor} built sessions but holds {held}; delete and rebuild it.",
            space=space,
            cursor=cursor,
            held=len(sessions),
        )
    reopened: list[Scene] = []
    if cursor:
        last = run.turns_by_session.get(sessions[cursor - 1].id, [])
        in_scenes = {tid for sc in run.scenes for tid in sc.turn_ids}
        if grew_after_build(last, in_scenes):  # messages were appended to the last built session: build it again
            # Built aside: its stored scenes stay readable until the rebuilt session replaces them in one commit.
            ids = {t.id for t in last}
            reopened = [sc for sc in run.scenes if set(sc.turn_ids) & ids]
            run.scenes = [sc for sc in run.scenes if sc not in reopened]
            cursor -= 1
    run.c.scenes.skipped = cursor  # sessions found already built
    store.set_state(space, STATE_THRESHOLD, repr(threshold))
    run.restore_topics(frozenset(sc.id for sc in reopened))
    todo = sessions[cursor:]
    bar = tqdm(total=len(todo), desc=f"extractive {space.key}", unit="session", disable=not progress)
    try:
        for offset, session in enumerate(todo):
            run.build_session(session, cursor + offset + 1, reopened if offset == 0 else ())
            bar.update(1)
    finally:
        bar.close()
    store.set_state(space, STATE_MODE, BuildMode.EXTRACTIVE.value)
    store.set_state(space, STATE_SESSIONS, str(len(sessions)))
    from tmem.construct.pipeline import memory_counts  # same counts as an LLM build reports (import here: no cycle)

    counts = memory_counts(store, space)
    return BuildReport(
        space=space.space,
        mode=BuildMode.EXTRACTIVE.value,
        stages=run.c.all(),
        seconds=time.perf_counter() - started,
        descriptive_only=True,
        counts=counts,
    )
