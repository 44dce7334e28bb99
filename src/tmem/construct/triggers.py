"""Trigger instantiation (paper §3.2.3).

- Entity + Bridge, jointly per item: N tuples (concept, bridge situation, one-clause rationale). Tuple g becomes an
  ENTITY trigger (view ``concept``) and a BRIDGE trigger (views ``bridge`` and ``joint`` = concept | bridge |
  rationale), both with ``group = g``.
- Scene + Horizon, jointly per scene (from its narrative): a SCENE trigger with views ``situation``, ``object``,
  ``event``, ``emotion`` and a HORIZON trigger with views ``horizon:0`` .. ``horizon:n``.

Several items (scenes) share one call to meet the cost target; each node still gets its own triggers. Only nodes
without triggers are sent, so an incremental build pays for new nodes only; superseded items are never sent (the
index leaves them out).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from pydantic import BaseModel, Field

from tmem.construct.common import StageRun, checked, chunks, fmt_span, render, stable_id
from tmem.construct.names import with_names
from tmem.construct.options import BuildOptions
from tmem.llm.base import Message
from tmem.models import Item, Scene, Trigger, TriggerFamily, TriggerView
from tmem.scope import Scope
from tmem.store.base import Store
from tmem.util.fence import Trusted, fence

ITEM_STAGE = "triggers.item"
SCENE_STAGE = "triggers.scene"
SCENE_VIEWS = ("situation", "object", "event", "emotion")


# ------------------------------------------------------------------------------------------- Entity + Bridge


class TriggerTuple(BaseModel):
    concept: str = Field(description="Superordinate concept naming what the item is an instance of, 1 to 6 words.")
    bridge: str = Field(
        description="One-sentence future situation where knowing the item would matter; it may name the item's "
        "people and places but shares none of the item's other distinctive words."
    )
    rationale: str = Field(description="One clause: why the item matters in that situation.")


class ItemTriggersOut(BaseModel):
    item: str = Field(description="The item's reference as given, e.g. 'I1'.")
    triggers: list[TriggerTuple] = Field(description="Exactly the requested number of distinct triggers.")


class ItemTriggerReply(BaseModel):
    items: list[ItemTriggersOut] = Field(description="One entry per item, in the order given.")


def _refs_in_order(got: Sequence[str], refs: Sequence[str], what: str) -> None:
    cleaned = [g.strip().strip("[]").upper() for g in got]
    if cleaned != list(refs):
        raise ValueError(f"{what} must list {list(refs)} once each, in order; got {list(got)}")


def check_item_reply(reply: ItemTriggerReply, refs: Sequence[str], n: int) -> None:
    _refs_in_order([e.item for e in reply.items], refs, "items")
    for entry in reply.items:
        if len(entry.triggers) != n:
            raise ValueError(f"item {entry.item}: write exactly {n} triggers, got {len(entry.triggers)}")
        for g, tup in enumerate(entry.triggers):
            for name in ("concept", "bridge", "rationale"):
                if not getattr(tup, name).strip():
                    raise ValueError(f"item {entry.item}: triggers[{g}].{name} is empty")


def item_reply_model(refs: Sequence[str], n: int) -> type[ItemTriggerReply]:
    return checked(ItemTriggerReply, lambda reply: check_item_reply(reply, refs, n))


def item_messages(items: Sequence[Item], refs: Sequence[str], n: int) -> list[Message]:
    lines = [f"[{ref}] {it.text}" for ref, it in zip(refs, items, strict=True)]
    return render(
        "item_triggers.md", n=n, items=fence("items", "\n".join(lines)), count=len(items), refs=Trusted(", ".join(refs))
    )


def item_trigger_records(item: Item, tuples: Sequence[TriggerTuple], speakers: Sequence[str] = ()) -> list[Trigger]:
    """ENTITY and BRIDGE records of an item. The ``bridge`` view is the model's bridge followed by the item's proper
    names it lacks (``fields`` keep the bridge as written): measured on the LLM-built dev memories, that view is found
    by more cue probes and questions than the bare bridge (bench/bridge_names.py, docs/construction.md)."""
    out: list[Trigger] = []
    for g, tup in enumerate(tuples):
        concept, bridge, rationale = (" ".join(x.split()) for x in (tup.concept, tup.bridge, tup.rationale))
        out.append(
            Trigger(
                id=stable_id("tr", item.id, TriggerFamily.ENTITY.value, str(g)),
                family=TriggerFamily.ENTITY,
                host_kind="item",
                host_id=item.id,
                group=g,
                fields={"concept": concept},
                views=[TriggerView(name="concept", text=concept)],
            )
        )
        out.append(
            Trigger(
                id=stable_id("tr", item.id, TriggerFamily.BRIDGE.value, str(g)),
                family=TriggerFamily.BRIDGE,
                host_kind="item",
                host_id=item.id,
                group=g,
                fields={"concept": concept, "bridge": bridge, "rationale": rationale},
                views=[
                    TriggerView(name="bridge", text=with_names(bridge, item.text, speakers)),
                    TriggerView(name="joint", text=f"{concept} | {bridge} | {rationale}"),
                ],
            )
        )
    return out


async def run_item_triggers(store: Store, space: Scope, run: StageRun, options: BuildOptions) -> None:
    done = {t.host_id for t in store.triggers(space, family=TriggerFamily.ENTITY)}
    items = store.items(space)
    # Superseded items are left out of every index: their triggers could never be used.
    todo = [it for it in items if it.id not in done and it.superseded_by is None]
    run.report.skipped += len(items) - len(todo)
    n = options.item_triggers_n
    speakers = list(store.get_space(space).speakers)

    async def call(group: list[Item]) -> list[Trigger] | None:
        refs = [f"I{k + 1}" for k in range(len(group))]

        async def ask() -> list[Trigger]:
            result = await run.ask(item_messages(group, refs, n), item_reply_model(refs, n))
            return [
                tr
                for it, entry in zip(group, result.output.items, strict=True)
                for tr in item_trigger_records(it, entry.triggers, speakers)
            ]

        # a failed batch leaves its items without triggers: the next build sends them again
        return await run.attempt(f"triggers.item:{group[0].id}", [it.id for it in group], ask)

    groups = chunks(todo, options.items_per_trigger_call)
    run.start(total=len(groups))
    results = await run.gather([partial(call, g) for g in groups])
    records = [tr for batch in results if batch is not None for tr in batch]
    store.put_triggers(space, records)
    run.report.created += len(records)
    run.close()


# ------------------------------------------------------------------------------------------- Scene + Horizon


class SceneTriggerOut(BaseModel):
    scene: str = Field(description="The scene's reference as given, e.g. 'S1'.")
    situation: str = Field(description="One sentence: setting and circumstances (who, where, when, life phase).")
    object: str = Field(description="One sentence: the main things, people, places or works of the scene.")
    event: str = Field(description="One sentence: what happened or was decided.")
    emotion: str = Field(description="One sentence: how the people felt and why.")
    horizon: list[str] = Field(
        description="Forward-looking dimensions, one sentence each: future situations, needs or decisions under "
        "which this scene should come back, even without shared words."
    )


class SceneTriggerReply(BaseModel):
    scenes: list[SceneTriggerOut] = Field(description="One entry per scene, in the order given.")


def check_scene_reply(reply: SceneTriggerReply, refs: Sequence[str], horizon_max: int) -> None:
    _refs_in_order([e.scene for e in reply.scenes], refs, "scenes")
    for entry in reply.scenes:
        for name in SCENE_VIEWS:
            if not getattr(entry, name).strip():
                raise ValueError(f"scene {entry.scene}: {name} is empty")
        dims = [h for h in entry.horizon if h.strip()]
        if not 2 <= len(dims) <= horizon_max or len(dims) != len(entry.horizon):
            raise ValueError(
                f"scene {entry.scene}: horizon needs 2 to {horizon_max} non-empty sentences, got {len(entry.horizon)}"
            )


def scene_reply_model(refs: Sequence[str], horizon_max: int) -> type[SceneTriggerReply]:
    return checked(SceneTriggerReply, lambda reply: check_scene_reply(reply, refs, horizon_max))


def scene_messages(scenes: Sequence[Scene], refs: Sequence[str], horizon_max: int) -> list[Message]:
    blocks = [
        f"[{ref}] {fmt_span(s.start, s.end)} · {s.title}\n{s.narrative}" for ref, s in zip(refs, scenes, strict=True)
    ]
    return render(
        "scene_triggers.md",
        horizon_max=horizon_max,
        scenes=fence("scenes", "\n\n".join(blocks)),
        count=len(scenes),
        refs=Trusted(", ".join(refs)),
    )


def scene_trigger_records(scene: Scene, out: SceneTriggerOut) -> list[Trigger]:
    attrs = {name: " ".join(getattr(out, name).split()) for name in SCENE_VIEWS}
    dims = {f"horizon:{k}": " ".join(h.split()) for k, h in enumerate(out.horizon)}
    return [
        Trigger(
            id=stable_id("tr", scene.id, TriggerFamily.SCENE.value),
            family=TriggerFamily.SCENE,
            host_kind="scene",
            host_id=scene.id,
            fields=attrs,
            views=[TriggerView(name=k, text=v) for k, v in attrs.items()],
        ),
        Trigger(
            id=stable_id("tr", scene.id, TriggerFamily.HORIZON.value),
            family=TriggerFamily.HORIZON,
            host_kind="scene",
            host_id=scene.id,
            fields=dims,
            views=[TriggerView(name=k, text=v) for k, v in dims.items()],
        ),
    ]


async def run_scene_triggers(store: Store, space: Scope, run: StageRun, options: BuildOptions) -> None:
    done = {t.host_id for t in store.triggers(space, family=TriggerFamily.SCENE)}
    scenes = store.scenes(space)
    todo = [s for s in scenes if s.id not in done]
    run.report.skipped += len(scenes) - len(todo)

    async def call(group: list[Scene]) -> list[Trigger] | None:
        refs = [f"S{k + 1}" for k in range(len(group))]

        async def ask() -> list[Trigger]:
            result = await run.ask(
                scene_messages(group, refs, options.horizon_max), scene_reply_model(refs, options.horizon_max)
            )
            return [
                tr for s, out in zip(group, result.output.scenes, strict=True) for tr in scene_trigger_records(s, out)
            ]

        return await run.attempt(f"triggers.scene:{group[0].turn_ids[0]}", [s.id for s in group], ask)

    groups = chunks(todo, options.scenes_per_trigger_call)
    run.start(total=len(groups))
    results = await run.gather([partial(call, g) for g in groups])
    records = [tr for batch in results if batch is not None for tr in batch]
    store.put_triggers(space, records)
    run.report.created += len(records)
    run.close()
