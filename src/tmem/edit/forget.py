"""Forgetting turns and items so that nothing brings them back and no copy of their text is left.

``forget(turn_ids=..., item_ids=...)`` in one transaction, then an erasure of the freed bytes (``Store.scrub``):

* **Turns**: the turn rows go (and with them their places in scenes' raw turns). Each scene that held one is
  rewritten from its remaining turns with the extractive scene texts (title, summary; in an LLM-built memory the
  narrative becomes that summary), keeping its id, and loses its Scene/Horizon triggers (the next LLM build writes new
  ones from the new narrative); a scene left without turns is deleted. Items citing a forgotten turn - and, in a
  memory from before items recorded their turns, every item of such a scene - are forgotten too.
* **Items**: the item, its triggers and its edit history go; an item it superseded becomes current again.
* Topics: a topic left without scenes is deleted; in an extractive memory every topic that lost or changed a scene is
  relabelled from its remaining turns (an LLM-written topic label is kept: labels name a theme, not a message).
* Persona: traits resting on a forgotten item go, and that speaker's summary is cleared.
* Caches: cached vectors of every removed text, every logged LLM response that contains a removed text (verbatim or
  JSON-escaped), every cached answer of the space (answers were written from contexts that may have held the turn)
  and every pending batch request of the space are deleted.
* **Tombstones** (ids only) make it final: ``add_messages`` and re-imports skip a forgotten turn id, and
  ``Store.put_items`` skips a forgotten item id, so no build or rebuild brings them back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, Field

from tmem.construct.extractive.scenes import make_scene, make_topic, scene_topic_text
from tmem.construct.revert import load_covered, save_covered
from tmem.edit.erasure import erasure_scope, finish_erasures
from tmem.edit.items import bump_edits, storable
from tmem.embed.texts import turn_embedding_text
from tmem.errors import NotFoundError
from tmem.index.space import scene_text
from tmem.models import BuildMode, Item, Persona, Scene, Trigger, Turn
from tmem.scope import Scope
from tmem.store.base import Store
from tmem.util.state import STATE_MODE
from tmem.util.text import text_hash

Embed = Callable[[Sequence[str]], npt.NDArray[np.float32]]
ANSWER_STAGES = ("answer", "judge")
_MIN_NEEDLE = 3


class ForgetReport(BaseModel):
    space: str
    turns_forgotten: list[str] = Field(default_factory=list)
    items_forgotten: list[str] = Field(default_factory=list)
    scenes_rewritten: list[str] = Field(default_factory=list)
    scenes_deleted: list[str] = Field(default_factory=list)
    topics_deleted: list[str] = Field(default_factory=list)
    llm_calls_deleted: int = 0
    already_forgotten: list[str] = Field(default_factory=list, description="Ids forgotten by an earlier call.")
    erasure: int = Field(default=0, description="This forget's entry in the store's erasure ledger.")
    erased: bool = Field(
        default=False,
        description="The freed bytes were erased (see ``scope``); False when another connection's open read kept "
        "them: the forgetting itself is done, the erasure is pending and finished later (tmem.edit.erasure).",
    )
    scope: str = Field(default="", description="What erased means on this backend.")


class _Removal:
    def __init__(self) -> None:
        self.texts: set[str] = set()

    def add(self, *texts: str | None) -> None:
        self.texts.update(t for t in texts if t and len(t.strip()) >= _MIN_NEEDLE)


def _trigger_texts(trigger: Trigger) -> list[str]:
    """The texts a trigger holds: its views and its generated fields (not bookkeeping such as ``source``)."""
    return [v.text for v in trigger.views] + [v for k, v in trigger.fields.items() if k != "source"]


def _known(store: Store, space: Scope, kind: str, ids: Sequence[str], found: set[str], report: ForgetReport) -> None:
    missing = [i for i in dict.fromkeys(ids) if i not in found]
    gone = store.tombstoned(space, "turn" if kind == "turn" else "item", storable(missing))
    report.already_forgotten += [i for i in missing if i in gone]
    unknown = [i for i in missing if i not in gone]
    if unknown:
        raise NotFoundError(
            "Space {space!r} has no {kind} {shown}; nothing was forgotten.",
            kind=kind,
            name=unknown[0],
            space=space,
            shown=", ".join(map(repr, unknown[:10])),
        )


def forget(
    store: Store, space: Scope, *, turn_ids: Sequence[str] = (), item_ids: Sequence[str] = (), embed: Embed
) -> ForgetReport:
    """Forget turns and items of ``space`` (see the module docstring). ``embed`` embeds remaining turns for the
    rewritten scenes (through the embedding cache)."""
    store.get_space(space)
    report = ForgetReport(space=space.space)
    removal = _Removal()
    with store.transaction():
        turns = store.find_turns(space, storable(turn_ids))
        _known(store, space, "turn", turn_ids, {t.id for t in turns}, report)
        direct_items = store.items(space, storable(item_ids)) if storable(item_ids) else []
        _known(store, space, "item", item_ids, {i.id for i in direct_items}, report)
        gone_turns = {t.id for t in turns}
        for t in turns:
            removal.add(t.text, t.caption, turn_embedding_text(t))
        scenes = store.scenes_of_turns(space, sorted(gone_turns)) if gone_turns else []
        doomed: dict[str, Item] = {i.id: i for i in direct_items}
        for it in store.items_of_scenes(space, [s.id for s in scenes]) if scenes else []:
            if set(it.turn_ids) & gone_turns or not it.turn_ids:
                doomed[it.id] = it
        _forget_items(store, space, list(doomed.values()), removal)
        report.items_forgotten = sorted(doomed)
        if scenes:
            _rewrite_scenes(store, space, scenes, gone_turns, embed, removal, report)
        if gone_turns:
            store.delete_turns(space, sorted(gone_turns))
            store.add_tombstones(space, "turn", sorted(gone_turns))
        report.turns_forgotten = sorted(gone_turns)
        for h in sorted({text_hash(t) for t in removal.texts}):
            store.delete_embeddings(space, [h])
        report.llm_calls_deleted = store.delete_llm_responses(
            space, containing=sorted(removal.texts), stage_prefixes=ANSWER_STAGES if gone_turns else ()
        )
        pending = store.pending(space)
        if pending:
            store.delete_pending([p.request_hash for p in pending], scope=space)
        bump_edits(store, space)
        report.erasure = store.add_erasure(space, "forget")  # last: the ledger's lock is held only to the commit
    report.erased = finish_erasures(store)
    report.scope = erasure_scope(store)
    return report


def _forget_items(store: Store, space: Scope, items: list[Item], removal: _Removal) -> None:
    if not items:
        return
    ids = {i.id for i in items}
    for it in items:
        removal.add(it.text)
    for tr in store.triggers(space, host_ids=sorted(ids)):
        removal.add(*_trigger_texts(tr))
    for edit in store.item_edits(space, sorted(ids)):
        removal.add(edit.old_text, edit.new_text)
    neighbours = {i.supersedes for i in items} | {i.superseded_by for i in items}
    fixes = []
    for other in store.items(space, sorted(n for n in neighbours if n and n not in ids)):
        fixes.append(
            other.model_copy(
                update={
                    "superseded_by": None if other.superseded_by in ids else other.superseded_by,
                    "supersedes": None if other.supersedes in ids else other.supersedes,
                }
            )
        )
    if fixes:
        store.put_items(space, fixes)
    store.delete_item_edits(space, sorted(ids))
    store.delete_items(space, sorted(ids))
    store.add_tombstones(space, "item", sorted(ids))
    _fix_personas(store, space, ids, removal)


def _fix_personas(store: Store, space: Scope, item_ids: set[str], removal: _Removal) -> None:
    for p in store.personas(space):
        kept = [t for t in p.traits if not set(t.item_ids) & item_ids]
        if len(kept) != len(p.traits):
            removal.add(p.summary, *(t.value for t in p.traits if t not in kept))
            store.put_persona(space, Persona(speaker=p.speaker, traits=kept, summary=""))


def _rewrite_scenes(
    store: Store,
    space: Scope,
    scenes: list[Scene],
    gone: set[str],
    embed: Embed,
    removal: _Removal,
    report: ForgetReport,
) -> None:
    speakers = store.get_space(space).speakers
    llm_mode = store.get_state(space, STATE_MODE) == BuildMode.LLM.value
    all_turns = {t.id: t for t in store.find_turns(space, [tid for s in scenes for tid in s.turn_ids])}
    for tr in store.triggers(space, host_ids=[s.id for s in scenes]):
        removal.add(*_trigger_texts(tr))
    rewritten: list[Scene] = []
    deleted: list[str] = []
    for s in scenes:
        removal.add(s.title, s.summary, s.narrative, scene_text(s))
        removal.add(scene_topic_text([all_turns[t] for t in s.turn_ids if t in all_turns], speakers))
        remaining = [all_turns[t] for t in s.turn_ids if t not in gone and t in all_turns]
        if not remaining:
            deleted.append(s.id)
            continue
        vectors = embed([turn_embedding_text(t) for t in remaining])
        fresh = make_scene(remaining, vectors, s.seq, speakers)
        narrative = fresh.summary if llm_mode or s.mode is BuildMode.LLM else ""
        rewritten.append(
            s.model_copy(
                update={"title": fresh.title, "summary": fresh.summary, "narrative": narrative,
                        "turn_ids": [t.id for t in remaining], "start": fresh.start, "end": fresh.end}
            )
        )  # fmt: skip
    links = store.topic_links_of(space, scene_ids=[s.id for s in scenes])
    touched = sorted({link.topic_id for link in links})
    store.delete_triggers(space, [s.id for s in scenes])
    if deleted:
        _drop_scene_refs(store, space, deleted)
        store.delete_scenes(space, deleted)
    if rewritten:
        store.put_scenes(space, rewritten)
    report.scenes_rewritten = sorted(s.id for s in rewritten)
    report.scenes_deleted = sorted(deleted)
    _fix_topics(store, space, touched, gone, speakers, llm_mode, removal, report)


def _drop_scene_refs(store: Store, space: Scope, deleted: list[str]) -> None:
    """Items that also cite other scenes keep those; the items-covered checkpoint forgets the scenes."""
    gone = set(deleted)
    for it in store.items_of_scenes(space, deleted):
        rest = [sid for sid in it.scene_ids if sid not in gone]
        if rest:
            store.put_items(space, [it.model_copy(update={"scene_ids": rest})])
    covered = load_covered(store, space)
    if covered:
        save_covered(store, space, {k: [s for s in v if s not in gone] for k, v in covered.items()})


def _fix_topics(
    store: Store,
    space: Scope,
    topic_ids: list[str],
    gone: set[str],
    speakers: list[str],
    llm_mode: bool,
    removal: _Removal,
    report: ForgetReport,
) -> None:
    if not topic_ids:
        return
    members: dict[str, list[str]] = {t: [] for t in topic_ids}
    for link in store.topic_links_of(space, topic_ids=topic_ids):
        members[link.topic_id].append(link.scene_id)
    empty = sorted(t for t, m in members.items() if not m)
    for topic in store.topics(space, topic_ids):
        removal.add(topic.label, topic.description)
    if empty:
        store.delete_topics(space, empty)
        report.topics_deleted = empty
    if llm_mode:
        return
    relabel = [t for t in store.topics(space, topic_ids) if t.id not in empty]
    scene_map = {s.id: s for s in store.scenes(space, sorted({sid for m in members.values() for sid in m}))}
    turn_ids = [tid for s in scene_map.values() for tid in s.turn_ids if tid not in gone]
    turn_map: dict[str, Turn] = {t.id: t for t in store.find_turns(space, turn_ids)}
    out = []
    for topic in relabel:
        ordered = sorted((scene_map[s] for s in members[topic.id] if s in scene_map), key=lambda s: s.seq)
        member_turns = [turn_map[t] for s in ordered for t in s.turn_ids if t in turn_map]
        out.append(make_topic(topic.id, topic.seq, member_turns, speakers))
    if out:
        store.put_topics(space, out)


def canary_free(raw: bytes, canary: str) -> bool:
    """True when ``raw`` holds no copy of ``canary`` (UTF-8 or JSON-escaped): the erasure tests' check."""
    forms = {canary.encode(), json.dumps(canary)[1:-1].encode()}
    return not any(f in raw for f in forms)
