"""Reopening the last built session when messages were appended to it (``Memory.add_messages``).

The extractive build works session by session. A session that grew after it was built (its new turns are in no
scene, and come after all its built ones) is reopened: the build processes the whole session again, with topic
clustering restored from the stored memberships in arrival order as if its scenes were gone, so the memory ends
exactly as if the session had arrived complete. Its stored scenes stay in place while that runs - a reader never
finds the session missing (docs/reliability.md) - and are removed in the transaction that writes the rebuilt
session: their items, triggers and topic links go, topics left without scenes are deleted and the other touched
topics relabelled from their remaining scenes (:func:`reopen_session`).
"""

from __future__ import annotations

from collections.abc import Sequence

from tmem.construct.extractive.scenes import make_topic
from tmem.errors import BuildError
from tmem.models import Scene, Turn
from tmem.scope import Scope
from tmem.store.base import Store


def grew_after_build(session_turns: Sequence[Turn], in_scenes: set[str]) -> bool:
    """True when the session has unbuilt turns, all after its built ones; BuildError for any other gap."""
    built = [t.seq for t in session_turns if t.id in in_scenes]
    unbuilt = [t.seq for t in session_turns if t.id not in in_scenes]
    if not unbuilt:
        return False
    if not built or min(unbuilt) < max(built):  # the cursor says built, but the scenes disagree: not an append
        raise BuildError(
            f"Session {session_turns[0].session_id} is recorded as built but has turns in no scene"
            f"{' before built ones' if built else ''}; run `tmem check` on the space, then rebuild it "
            "(`tmem build SPACE --rebuild`)."
        )
    return True


def reopen_session(
    store: Store, space: Scope, scenes: list[Scene], session_turns: Sequence[Turn], speakers: Sequence[str]
) -> list[Scene]:
    """Remove the session's built nodes from the stored ``scenes`` (the caller holds the transaction that writes the
    rebuilt session); returns the scenes that remain."""
    ids = {t.id for t in session_turns}
    doomed = [s.id for s in scenes if set(s.turn_ids) & ids]
    if not doomed:
        return scenes
    items = store.items_of_scenes(space, doomed)
    if items:
        store.delete_items(space, [i.id for i in items])
    touched = sorted({link.topic_id for link in store.topic_links_of(space, scene_ids=doomed)})
    store.delete_scenes(space, doomed)
    remaining = [s for s in scenes if s.id not in set(doomed)]
    if touched:
        members: dict[str, list[str]] = {t: [] for t in touched}
        for link in store.topic_links_of(space, topic_ids=touched):
            members[link.topic_id].append(link.scene_id)
        empty = [t for t, m in members.items() if not m]
        if empty:
            store.delete_topics(space, empty)
        by_id = {s.id: s for s in remaining}
        relabelled = []
        for topic in store.topics(space, [t for t in touched if t not in empty]):
            member_scenes = sorted((by_id[s] for s in members[topic.id] if s in by_id), key=lambda s: s.seq)
            turns = store.find_turns(space, [tid for s in member_scenes for tid in s.turn_ids])
            relabelled.append(make_topic(topic.id, topic.seq, turns, speakers))
        store.put_topics(space, relabelled)
    return remaining
