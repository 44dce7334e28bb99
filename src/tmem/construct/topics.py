"""Topic assignment in arrival order (paper §3.2.1).

New scenes go to the topic module in groups of ``topic_scenes_per_call``, in arrival order; the model sees every
current label with its description and admits each scene to one to three of them or opens new ones (a label opened
for an earlier scene of the same call is existing for the later ones, which keeps arrival-order semantics). Topic ids
derive from the normalised label, so a label opened again is the same topic.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import partial

from pydantic import BaseModel, Field

from tmem.construct.common import StageRun, checked, chunks, fmt_span, render, stable_id
from tmem.construct.options import BuildOptions
from tmem.llm.base import Message
from tmem.models import Scene, Topic, TopicSceneLink
from tmem.scope import Scope
from tmem.store.base import Store
from tmem.util.fence import Trusted, fence

STAGE = "topics"
MAX_TOPICS_PER_SCENE = 3


class TopicChoice(BaseModel):
    label: str = Field(
        description="An existing label copied exactly, or a new specific label of 2 to 8 words naming the subject."
    )
    description: str | None = Field(
        description="For a new label: one sentence saying what belongs under it. Null for an existing label."
    )


class SceneTopics(BaseModel):
    scene: str = Field(description="The scene's reference as given, e.g. 'S1'.")
    topics: list[TopicChoice] = Field(description="1 to 3 labels the scene is admitted to, most specific first.")


class TopicReply(BaseModel):
    assignments: list[SceneTopics] = Field(description="One entry per scene, in the order the scenes were given.")


def label_key(label: str) -> str:
    """Case- and spacing-insensitive form of a label; labels with the same key are the same topic."""
    return re.sub(r"\s+", " ", label.casefold()).strip(" .;:!?\"'")


def topic_id(label: str) -> str:
    return stable_id("t", label_key(label))


def check_reply(reply: TopicReply, refs: Sequence[str], existing: Sequence[Topic]) -> list[list[TopicChoice]]:
    """Validate against the request; returns, per scene, its distinct choices. Raises ValueError for the model."""
    got = [a.scene.strip().strip("[]").upper() for a in reply.assignments]
    if got != list(refs):
        raise ValueError(f"assignments must list the scenes {list(refs)} once each, in order; got {got}")
    known = {label_key(t.label) for t in existing}
    out: list[list[TopicChoice]] = []
    for ref, assignment in zip(refs, reply.assignments, strict=True):
        seen: dict[str, TopicChoice] = {}
        for choice in assignment.topics:
            key = label_key(choice.label)
            if not key:
                raise ValueError(f"scene {ref}: a topic label is empty")
            if key not in known and not (choice.description or "").strip():
                raise ValueError(
                    f"scene {ref}: {choice.label!r} is not an existing label, so it opens a new one and needs a "
                    "one-sentence description (or copy an existing label exactly)"
                )
            seen.setdefault(key, choice)
        if not 1 <= len(seen) <= MAX_TOPICS_PER_SCENE:
            raise ValueError(f"scene {ref}: give 1 to {MAX_TOPICS_PER_SCENE} distinct labels, got {len(seen)}")
        known.update(seen)
        out.append(list(seen.values()))
    return out


def reply_model(refs: Sequence[str], existing: Sequence[Topic]) -> type[TopicReply]:
    return checked(TopicReply, lambda reply: check_reply(reply, refs, existing))


def messages_for(scenes: Sequence[Scene], refs: Sequence[str], existing: Sequence[Topic]) -> list[Message]:
    topics = "\n".join(f"- {t.label}: {t.description}" for t in existing) or "(none yet)"
    blocks = [
        f"[{ref}] {fmt_span(s.start, s.end)} · {s.title}\n{s.summary}" for ref, s in zip(refs, scenes, strict=True)
    ]
    return render(
        "topics.md",
        topic_count=len(existing),
        topics=fence("topics", topics),
        scenes=fence("scenes", "\n\n".join(blocks)),
        scene_count=len(scenes),
        refs=Trusted(", ".join(refs)),
    )


async def run_topics(store: Store, space: Scope, run: StageRun, options: BuildOptions) -> None:
    """Admit every scene without a topic link: in arrival order, one group after the other (sequential plan), or all
    groups at once against the same existing labels (few-rounds plan)."""
    linked = {link.scene_id for link in store.topic_links(space)}
    scenes = store.scenes(space)
    todo = [s for s in scenes if s.id not in linked]
    run.report.skipped += len(scenes) - len(todo)
    run.start(total=len(todo))
    if options.plan_few_rounds:
        existing = store.topics(space)
        groups = chunks(todo, options.topic_scenes_per_round_call)
        answers = await run.gather([partial(_assign, run, group, existing) for group in groups])
        _store_choices(store, space, run, [a for a in answers if a is not None], existing)
    else:
        for group in chunks(todo, options.topic_scenes_per_call):
            existing = store.topics(space)
            answer = await _assign(run, group, existing)
            if answer is not None:
                _store_choices(store, space, run, [answer], existing)
    run.close()


Assignment = tuple[list[Scene], list[list[TopicChoice]]]


async def _assign(run: StageRun, group: list[Scene], existing: list[Topic]) -> Assignment | None:
    """One topic request for ``group``; None when its replies stayed invalid (recorded as a failed unit: the scenes
    stay without topics and the next build asks again)."""
    refs = [f"S{n + 1}" for n in range(len(group))]

    async def ask() -> Assignment:
        result = await run.ask(messages_for(group, refs, existing), reply_model(refs, existing))
        return group, check_reply(result.output, refs, existing)

    answer = await run.attempt(f"topics:{group[0].turn_ids[0]}", [s.id for s in group], ask)
    run.advance(len(group))
    return answer


def _store_choices(
    store: Store, space: Scope, run: StageRun, answers: Sequence[Assignment], existing: Sequence[Topic]
) -> None:
    """Open the new labels (in answer order; a label opened twice is one topic, its first description kept) and link
    the scenes, in one transaction."""
    by_key = {label_key(t.label): t for t in existing}
    opened: list[Topic] = []
    links: list[TopicSceneLink] = []
    for group, choices in answers:
        for scene, picks in zip(group, choices, strict=True):
            for choice in picks:
                key = label_key(choice.label)
                topic = by_key.get(key)
                if topic is None:
                    topic = Topic(
                        id=topic_id(choice.label),
                        seq=len(existing) + len(opened),
                        label=" ".join(choice.label.split()),
                        description=" ".join((choice.description or "").split()),
                    )
                    by_key[key] = topic
                    opened.append(topic)
                links.append(TopicSceneLink(topic_id=topic.id, scene_id=scene.id))
        run.report.updated += len(group)
    with store.transaction():
        store.put_topics(space, opened)
        store.link_topics(space, links)
    run.report.created += len(opened)
