"""One record per hit of a budgeted context (what MCP ``recall`` returns beside the text): what entered the context,
readable on its own - the id, kind, text, date, speaker, source turn ids and the routes that reached it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tmem.answer.budget import Context
from tmem.models import Item, MetaValue
from tmem.retrieve.filters import inherited_metadata, lookup_turns
from tmem.scope import Scope
from tmem.store.base import Store
from tmem.util.dates import period


class HitRecord(BaseModel):
    """A memory (item) or raw conversation (scene excerpt, turn) that entered a context."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(description="The item, scene or turn id (an item id works with get_memory / update_memory).")
    kind: str = Field(description="'item' (a distilled fact), 'scene' (an excerpt of turns) or 'turn' (a raw turn).")
    text: str = Field(description="The fact, or the turns that entered as 'Speaker: text' lines.")
    date: str | None = Field(
        description="The fact's date in the form of the period it names ('2025-03-02' a day, '2025-03' a month, "
        "'2025' a year, '2025-W10' a week, '2025-summer' a season, 'START/END' a range), or the time the first turn "
        "that entered was said."
    )
    speaker: str | None = Field(description="Who said it (None for an excerpt of several speakers).")
    turn_ids: list[str] = Field(description="Source turn ids (forget them with forget(turn_ids=...)).")
    routes: list[str] = Field(description="The ranked lists that reached it.")
    metadata: dict[str, MetaValue] = Field(default_factory=dict, description="Its turns' metadata (latest wins).")
    item_kind: str | None = Field(default=None, description="An item's kind: 'atomic' or 'connected'.")


def item_record(item: Item, turn_ids: list[str], routes: list[str], metadata: dict[str, MetaValue]) -> HitRecord:
    return HitRecord(
        id=item.id,
        kind="item",
        text=item.text,
        date=when.form if (when := period(item.date, item.date_end, item.date_precision)) else item.date,
        speaker=item.speaker,
        turn_ids=turn_ids,
        routes=routes,
        metadata=metadata,
        item_kind=item.kind.value,
    )


def hit_records(store: Store, space: Scope, ctx: Context) -> list[HitRecord]:
    """The hits of ``ctx`` as records, in the order they entered (id-scoped reads of their items and turns)."""
    item_ids = [h.id for h in ctx.hits if h.kind == "item"]
    items = {i.id: i for i in store.items(space, item_ids)} if item_ids else {}
    sources = {i: list(items[i].turn_ids) for i in items}
    turns = lookup_turns(store, space, [t for h in ctx.hits for t in (*h.turn_ids, *sources.get(h.id, []))])
    out: list[HitRecord] = []
    for hit in ctx.hits:
        routes = [r.name for r in hit.routes]
        if hit.kind == "item" and hit.id in items:
            source_ids = sources[hit.id] or list(hit.turn_ids)
            meta = inherited_metadata([turns[t] for t in source_ids if t in turns])
            out.append(item_record(items[hit.id], source_ids, routes, meta))
            continue
        entered = [turns[t] for t in hit.turn_ids if t in turns]
        speakers = {t.speaker for t in entered}
        out.append(
            HitRecord(
                id=hit.id,
                kind=hit.kind,
                text="\n".join(f"{t.speaker}: {t.text}" for t in entered),
                date=entered[0].time.isoformat() if entered else None,
                speaker=speakers.pop() if len(speakers) == 1 else None,
                turn_ids=list(hit.turn_ids),
                routes=routes,
                metadata=inherited_metadata(entered),
            )
        )
    return out
