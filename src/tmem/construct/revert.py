"""Undo a provisional scene (the tail a previous build had to close) and everything built on it."""

from __future__ import annotations

import json

from tmem.construct.report import STATE_FALLBACK, load_fallback
from tmem.models import Scene
from tmem.scope import Scope
from tmem.store.base import Store

STATE_COVERED = "items.covered"  # JSON {topic_id: [scene ids whose items were extracted in that topic]}


def load_covered(store: Store, space: Scope) -> dict[str, list[str]]:
    raw = store.get_state(space, STATE_COVERED)
    if raw is None:
        return {}
    loaded: dict[str, list[str]] = json.loads(raw)
    return loaded


def save_covered(store: Store, space: Scope, covered: dict[str, list[str]]) -> None:
    store.set_state(space, STATE_COVERED, json.dumps({k: covered[k] for k in sorted(covered)}))


def revert_scene(store: Store, space: Scope, scene: Scene) -> None:
    """Remove ``scene``, its topic links, topics only it belonged to, items citing it (with their triggers, and the
    supersession and conflict marks they set on older items) and its scene triggers. The caller holds a
    transaction."""
    items = store.items(space)
    doomed = {it.id for it in items if scene.id in it.scene_ids}
    restored = [
        it.model_copy(
            update={
                "superseded_by": None if it.superseded_by in doomed else it.superseded_by,
                "conflicts_with": [c for c in it.conflicts_with if c not in doomed],
            }
        )
        for it in items
        if it.id not in doomed and (it.superseded_by in doomed or doomed & set(it.conflicts_with))
    ]
    if restored:
        store.put_items(space, restored)
    if doomed:
        store.delete_items(space, sorted(doomed))
    links = store.topic_links(space)
    own = {link.topic_id for link in links if link.scene_id == scene.id}
    shared = {link.topic_id for link in links if link.scene_id != scene.id}
    store.delete_scenes(space, [scene.id])
    orphans = sorted(own - shared)
    if orphans:
        store.delete_topics(space, orphans)
    covered = load_covered(store, space)
    for topic_id in list(covered):
        if topic_id in orphans:
            del covered[topic_id]
        else:
            covered[topic_id] = [sid for sid in covered[topic_id] if sid != scene.id]
    save_covered(store, space, covered)
    fallback = load_fallback(store.state_keys(space))
    if fallback.pop(scene.id, None) is not None:
        store.set_state(space, STATE_FALLBACK, json.dumps(fallback) if fallback else None)
