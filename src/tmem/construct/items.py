"""Item extraction per topic (paper §3.2.2).

One call per topic label over its new scenes returns atomic items (one source scene) and connected items (several
source scenes) in the same response. Only topics that gained scenes since the last build are read; the extractor
sees the topic's earlier scenes and existing items, so it adds new facts only and marks a changed fact as updating
the older item (recorded as ``supersedes`` / ``superseded_by``). A topic with more than ``item_scenes_per_call`` new
scenes is read chunk by chunk, in order, each chunk seeing the items of the previous ones.

Item ids derive from kind, normalised text and source scenes, so a fact produced twice (by two topics sharing a
scene, or by a rerun) is stored once; the first topic (in topic order) to produce it owns it. A restatement of a fact
an item of the same scene(s) already holds is dropped too (:mod:`tmem.construct.dedup`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from functools import partial

from pydantic import BaseModel, Field

from tmem.construct.common import StageRun, check_when, checked, chunks, fmt_span, fmt_turns, render, stable_id
from tmem.construct.dedup import DuplicateFilter
from tmem.construct.options import BuildOptions
from tmem.construct.revert import load_covered, save_covered
from tmem.construct.slots import link_slots, normalise_slot
from tmem.llm.base import Message
from tmem.models import BuildMode, Item, ItemKind, Scene, Topic, Turn
from tmem.scope import Scope
from tmem.store.base import Store
from tmem.util.dates import DATE_CONVENTION, When
from tmem.util.fence import Trusted, fence, fence_inline, shown_id

STAGE = "items"


class AtomicItemOut(BaseModel):
    text: str = Field(description="One self-contained fact naming its people, with absolute dates.")
    speaker: str | None = Field(description="The speaker the fact is about, exactly as in the dialogue, or null.")
    date: str | None = Field(
        description="When the fact happened, as precise as the dialogue says: YYYY-MM-DD, YYYY-Www, YYYY-MM, "
        "YYYY-spring|summer|autumn|winter, YYYY or YYYY-MM-DD/YYYY-MM-DD; null only for timeless facts."
    )
    scene: str = Field(description="Reference of the one new source scene, e.g. 'S4'.")
    turns: list[str] = Field(description="Ids of the turns stating the fact, e.g. ['D3:7'].")
    slot: str | None = Field(
        default=None,
        description="What the fact is the current value of, 'subject / attribute' (e.g. 'dana / employer'), when it "
        "holds one value at a time and can change; null for events and anything that can hold many times over.",
    )
    updates: str | None = Field(description="Reference of the existing item this fact changes, e.g. 'E2', or null.")
    conflicts: str | None = Field(
        default=None,
        description="Reference of an existing item this fact contradicts while neither replaces the other (the "
        "conversation says both), e.g. 'E5', or null. A change over time is `updates`, not a conflict.",
    )


class ConnectedItemOut(BaseModel):
    text: str = Field(description="One self-contained statement linking facts of several scenes, with dates.")
    speaker: str | None = Field(description="The speaker the statement is about, or null.")
    date: str | None = Field(
        description="When the latest fact it links happened, in the same forms as an atomic item's date, or null."
    )
    scenes: list[str] = Field(description="References of all source scenes (two or more, at least one new).")
    turns: list[str] = Field(description="Ids of the turns of the new scenes that support it.")
    updates: str | None = Field(description="Reference of the existing item this statement changes, or null.")
    conflicts: str | None = Field(
        default=None, description="Reference of an existing item this statement contradicts (both stay), or null."
    )


class ItemReply(BaseModel):
    atomic_items: list[AtomicItemOut] = Field(description="Facts of one new scene each.")
    connected_items: list[ConnectedItemOut] = Field(description="Statements linking two or more scenes.")


@dataclass(frozen=True)
class ExtractionRequest:
    """One call's view: scenes by reference, which are new, existing items by reference, the speakers."""

    topic: Topic
    old: list[Scene]
    new: list[Scene]
    existing: list[Item]
    speakers: list[str]
    scene_refs: dict[str, Scene] = field(init=False)
    item_refs: dict[str, Item] = field(init=False)

    def __post_init__(self) -> None:
        shown = sorted([*self.old, *self.new], key=lambda s: s.seq)
        object.__setattr__(self, "scene_refs", {f"S{n + 1}": s for n, s in enumerate(shown)})
        object.__setattr__(self, "item_refs", {f"E{n + 1}": it for n, it in enumerate(self.existing)})

    def ref_of(self, scene: Scene) -> str:
        return next(ref for ref, s in self.scene_refs.items() if s.id == scene.id)

    @property
    def new_refs(self) -> list[str]:
        return [self.ref_of(s) for s in self.new]


@dataclass(frozen=True)
class Extracted:
    kind: ItemKind
    text: str
    speaker: str | None
    date: When | None
    scene_ids: list[str]
    turn_ids: list[str]
    updates: str | None  # id of the existing item it supersedes
    conflicts: str | None = None  # id of an existing item it disagrees with (both stay)
    slot: str | None = None  # normalised 'subject / attribute' (tmem.construct.slots)


def _norm_ref(ref: str) -> str:
    return ref.strip().strip("[]").upper()


def _name_in(speaker: str, text: str) -> bool:
    first = speaker.split()[0] if speaker.split() else speaker
    return re.search(rf"\b{re.escape(first)}", text, flags=re.IGNORECASE) is not None


def check_reply(reply: ItemReply, req: ExtractionRequest) -> list[Extracted]:
    """Validate a reply against its request; raises ValueError the model can act on."""
    new_ids = {s.id for s in req.new}
    out: list[Extracted] = []

    def common(
        where: str,
        text: str,
        speaker: str | None,
        date: str | None,
        updates: str | None,
        conflicts: str | None,
        scene_refs: list[str],
        turns: list[str],
        kind: ItemKind,
        slot: str | None = None,
    ) -> Extracted:
        if not text.strip():
            raise ValueError(f"{where}.text is empty")
        if speaker is not None and speaker not in req.speakers:
            shown = {shown_id(s): s for s in req.speakers}  # a name quoted as the fence showed it (escaped)
            if speaker not in shown:
                raise ValueError(f"{where}.speaker {speaker!r} is not one of {req.speakers} (or null)")
            if not _name_in(speaker, text):
                raise ValueError(f"{where}.text must name {speaker} (items are read without the dialogue)")
            speaker = shown[speaker]
        elif speaker is not None and not _name_in(speaker, text):
            raise ValueError(f"{where}.text must name {speaker} (items are read without the dialogue)")
        when = check_when(date, f"{where}")
        scenes: list[Scene] = []
        for ref in scene_refs:
            scene = req.scene_refs.get(_norm_ref(ref))
            if scene is None:
                raise ValueError(f"{where}: scene {ref!r} is not one of {list(req.scene_refs)}")
            if scene not in scenes:
                scenes.append(scene)
        if kind is ItemKind.ATOMIC and scenes[0].id not in new_ids:
            raise ValueError(f"{where}: scene {scene_refs[0]} is not new; extract from the new scenes {req.new_refs}")
        if kind is ItemKind.CONNECTED:
            if len(scenes) < 2:
                raise ValueError(f"{where}: a connected item needs two or more distinct scenes")
            if not new_ids & {s.id for s in scenes}:
                raise ValueError(f"{where}: a connected item must draw on at least one new scene {req.new_refs}")
        allowed = {tid: tid for s in scenes for tid in s.turn_ids}
        # A model may quote an id as the fence showed it (escaped).
        allowed |= {shown_id(tid): tid for tid in list(allowed) if shown_id(tid) not in allowed}
        quoted = [t.strip().strip("[]") for t in turns]
        bad = [t for t in quoted if t not in allowed]
        turn_ids = [allowed[t] for t in quoted if t in allowed]
        if bad or not turn_ids:
            raise ValueError(
                f"{where}.turns {turns} must list ids of turns of its source scene(s)"
                + (f"; unknown: {bad}" if bad else "")
            )
        target = None
        if updates is not None:
            old = req.item_refs.get(_norm_ref(updates))
            if old is None:
                raise ValueError(f"{where}.updates {updates!r} is not an existing item ({list(req.item_refs)} or null)")
            target = old.id
        disagrees = None
        if conflicts is not None:
            other = req.item_refs.get(_norm_ref(conflicts))
            if other is None:
                raise ValueError(
                    f"{where}.conflicts {conflicts!r} is not an existing item ({list(req.item_refs)} or null)"
                )
            if other.id == target:
                raise ValueError(
                    f"{where}: {conflicts} is both updated and contradicted; a change over time is `updates` only, "
                    "two statements that cannot both hold are `conflicts` only"
                )
            disagrees = other.id
        return Extracted(
            kind,
            " ".join(text.split()),
            speaker,
            when,
            [s.id for s in scenes],
            list(dict.fromkeys(turn_ids)),
            target,
            disagrees,
            normalise_slot(slot, speaker),
        )

    for n, a in enumerate(reply.atomic_items):
        out.append(
            common(
                f"atomic_items[{n}]",
                a.text,
                a.speaker,
                a.date,
                a.updates,
                a.conflicts,
                [a.scene],
                a.turns,
                ItemKind.ATOMIC,
                a.slot,
            )
        )
    for n, c in enumerate(reply.connected_items):
        out.append(
            common(
                f"connected_items[{n}]",
                c.text,
                c.speaker,
                c.date,
                c.updates,
                c.conflicts,
                c.scenes,
                c.turns,
                ItemKind.CONNECTED,
            )
        )
    return out


def reply_model(req: ExtractionRequest) -> type[ItemReply]:
    return checked(ItemReply, lambda reply: check_reply(reply, req))


def messages_for(req: ExtractionRequest, turns: dict[str, Turn]) -> list[Message]:
    old = (
        "\n".join(f"[{req.ref_of(s)}] {fmt_span(s.start, s.end)} · {s.title}: {s.summary}" for s in req.old) or "(none)"
    )
    existing = (
        "\n".join(
            f"[{ref}] {it.text}" + (f" ({when_form(it)})" if it.date else "") for ref, it in req.item_refs.items()
        )
        or "(none)"
    )
    blocks = []
    for s in req.new:
        body = fmt_turns([turns[t] for t in s.turn_ids])
        blocks.append(
            f"[{req.ref_of(s)}] (new) {fmt_span(s.start, s.end)} · {s.title}\nNarrative: {s.narrative}\nTurns:\n{body}"
        )
    return render(
        "items.md",
        speakers=fence_inline("speakers", " and ".join(req.speakers) if req.speakers else "(not recorded)"),
        topic=fence_inline(
            "topic", f"{req.topic.label}: {req.topic.description}" if req.topic.description else req.topic.label
        ),
        old_scenes=fence("earlier_scenes", old),
        existing=fence("existing_items", existing),
        new_scenes=fence("scenes", "\n\n".join(blocks)),
        new_refs=Trusted(", ".join(req.new_refs)),
        date_rules=Trusted(DATE_CONVENTION.rstrip()),
    )


def when_form(item: Item) -> str:
    """An item's date in the form the extractor writes it (``2023-05``, ``2023-W19``, ``2022-summer``, ...)."""
    if not item.date or item.date_precision in (None, "day"):
        return item.date or ""
    try:
        return When(
            date.fromisoformat(item.date), date.fromisoformat(item.date_end or item.date), item.date_precision
        ).form
    except (ValueError, StopIteration):
        return item.date


def item_id(kind: ItemKind, text: str, scene_ids: Sequence[str]) -> str:
    return stable_id("i", kind.value, " ".join(text.casefold().split()), *sorted(scene_ids))


@dataclass
class TopicResult:
    topic: Topic
    items: list[Item]
    supersede: dict[str, str]  # old item id -> new item id
    covered: list[str]


def _items_of(extracted: list[Extracted], topic: Topic, seen: set[str]) -> tuple[list[Item], dict[str, str]]:
    produced: list[Item] = []
    supersede: dict[str, str] = {}
    for ex in extracted:
        iid = item_id(ex.kind, ex.text, ex.scene_ids)
        if iid in seen:
            continue  # the same fact again: duplicates are not re-added
        seen.add(iid)
        produced.append(
            Item(
                id=iid,
                text=ex.text,
                kind=ex.kind,
                scene_ids=ex.scene_ids,
                topic_id=topic.id,
                speaker=ex.speaker,
                date=ex.date.start.isoformat() if ex.date else None,
                date_end=ex.date.end.isoformat() if ex.date and ex.date.precision != "day" else None,
                date_precision=ex.date.precision if ex.date else None,
                supersedes=ex.updates,
                conflicts_with=[ex.conflicts] if ex.conflicts else [],
                slot=ex.slot,
                turn_ids=ex.turn_ids,
                mode=BuildMode.LLM,
            )
        )
        if ex.updates is not None:
            supersede.setdefault(ex.updates, iid)
    return produced, supersede


async def _extract_topic(
    run: StageRun,
    topic: Topic,
    old: list[Scene],
    new: list[Scene],
    existing: list[Item],
    speakers: list[str],
    turns: dict[str, Turn],
    options: BuildOptions,
) -> TopicResult:
    """Chunks of a topic's new scenes: in order, each seeing the items of the previous ones (sequential plan), or all
    at once, each seeing the items the topic held before (few-rounds plan). A chunk whose replies stayed invalid is a
    failed unit: its scenes stay unread for the topic (the next build reads them), and in the sequential plan the
    chunks after it wait too."""
    produced: list[Item] = []
    supersede: dict[str, str] = {}
    seen = {it.id for it in existing}
    covered: list[str] = []

    def request(part: list[Scene], before: list[Scene]) -> ExtractionRequest:
        active = [it for it in [*existing, *produced] if it.id not in supersede and it.superseded_by is None]
        shown = active[-options.item_existing_max :] if options.item_existing_max else []
        return ExtractionRequest(topic=topic, old=before, new=part, existing=shown, speakers=speakers)

    async def ask(req: ExtractionRequest) -> list[Extracted] | None:
        async def once() -> list[Extracted]:
            result = await run.ask(messages_for(req, turns), reply_model(req))
            return check_reply(result.output, req)

        unit = f"items:{topic.label}:{req.new[0].turn_ids[0]}"
        return await run.attempt(unit, [s.id for s in req.new], once)

    parts = chunks(new, options.item_scenes_per_call)
    befores = [[*old, *new[: k * options.item_scenes_per_call]] for k in range(len(parts))]
    if options.plan_few_rounds:
        outcomes = await asyncio.gather(
            *(ask(request(p, b)) for p, b in zip(parts, befores, strict=True)), return_exceptions=True
        )
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        if errors:  # every chunk has run (in batch mode each queued its request); surface the first
            raise errors[0]
        answers = [o for o in outcomes if not isinstance(o, BaseException)]
    else:
        answers = []
        for part, before in zip(parts, befores, strict=True):
            answer = await ask(request(part, before))
            answers.append(answer)
            if answer is None:
                break
            items, marks = _items_of(answer, topic, seen)
            produced.extend(items)
            supersede.update({k: v for k, v in marks.items() if k not in supersede})
    for part, answer in zip(parts, answers, strict=False):
        if answer is None:
            continue
        if options.plan_few_rounds:
            items, marks = _items_of(answer, topic, seen)
            produced.extend(items)
            supersede.update({k: v for k, v in marks.items() if k not in supersede})
        covered.extend(s.id for s in part)
    return TopicResult(topic, produced, supersede, covered)


def _supersede_by_slot(known: dict[str, Item], changed: list[str], turns: dict[str, Turn]) -> int:
    """A newer item on the slot of an older current one supersedes it (tmem.construct.slots), whether the model saw
    the older one or not (a fresh build's requests see no existing items; two items of one round never see each
    other). Returns how many stored items that updated."""
    updated = 0
    for old_id, new_id in link_slots(list(known.values()), lambda t: turns[t].seq if t in turns else -1).items():
        known[old_id] = known[old_id].model_copy(update={"superseded_by": new_id})
        known[new_id] = known[new_id].model_copy(update={"supersedes": old_id})
        for iid in (old_id, new_id):
            if iid not in changed:
                changed.append(iid)
                updated += 1
    return updated


def _link_conflicts(known: dict[str, Item], changed: list[str]) -> int:
    """Conflicts are symmetric: the item a new one contradicts records it too (and is stored again). Returns how
    many stored items that updated."""
    updated = 0
    for iid in list(changed):
        item = known[iid]
        live = [other for other in item.conflicts_with if other in known]
        if live != item.conflicts_with:
            known[iid] = item = item.model_copy(update={"conflicts_with": live})
        for other in live:
            peer = known[other]
            if iid not in peer.conflicts_with:
                known[other] = peer.model_copy(update={"conflicts_with": [*peer.conflicts_with, iid]})
                if other not in changed:
                    changed.append(other)
                    updated += 1
    return updated


async def run_items(store: Store, space: Scope, run: StageRun, options: BuildOptions) -> None:
    """Extract items for every topic that gained scenes since its last extraction."""
    covered = load_covered(store, space)
    scenes = {s.id: s for s in store.scenes(space)}
    members: dict[str, list[Scene]] = {}
    for link in store.topic_links(space):
        members.setdefault(link.topic_id, []).append(scenes[link.scene_id])
    all_items = store.items(space)
    speakers = list(store.get_space(space).speakers) or sorted({t.speaker for t in store.turns(space)})
    turns = {t.id: t for t in store.turns(space)}
    jobs = []
    for topic in store.topics(space):
        mine = sorted(members.get(topic.id, []), key=lambda s: s.seq)
        done = set(covered.get(topic.id, []))
        new = [s for s in mine if s.id not in done]
        if not new:
            run.report.skipped += 1
            continue
        old = [s for s in mine if s.id in done]
        existing = [it for it in all_items if it.topic_id == topic.id]
        jobs.append(partial(_extract_topic, run, topic, old, new, existing, speakers, turns, options))
    run.start(total=len(jobs))
    results = await run.gather(jobs)
    known = {it.id: it for it in all_items}
    next_seq = max((it.seq for it in all_items), default=-1) + 1
    changed: list[str] = []
    repeats = DuplicateFilter(all_items)  # a fact another topic already holds, in other words (tmem.construct.dedup)
    for res in results:  # topic order: the first topic to produce a fact owns it
        for it in res.items:
            if it.id in known:
                continue
            repeated, replaced = repeats.admit(it)
            if repeated is not None:
                run.report.skipped += 1
                continue
            for gone in replaced:  # items of this run that ``it`` states with more: it takes their place
                del known[gone.id]
                changed.remove(gone.id)
                run.report.skipped += 1
            known[it.id] = it.model_copy(update={"seq": next_seq})
            next_seq += 1
            changed.append(it.id)
        for old_id, new_id in res.supersede.items():
            prior = known.get(old_id)
            if prior is not None and new_id in known and prior.superseded_by is None:
                known[old_id] = prior.model_copy(update={"superseded_by": new_id})
                if old_id not in changed:
                    changed.append(old_id)
                    run.report.updated += 1
        covered[res.topic.id] = sorted(set(covered.get(res.topic.id, [])) | set(res.covered))
    run.report.updated += _supersede_by_slot(known, changed, turns)
    run.report.updated += _link_conflicts(known, changed)
    fresh = [known[i] for i in changed]
    with store.transaction():
        store.put_items(space, fresh)
        save_covered(store, space, covered)
    run.report.created += len(fresh) - run.report.updated
    run.close()
