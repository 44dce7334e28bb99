"""One mapper per record: a stored row (read by column name) to its frozen pydantic record, and a record to the
column values it is written as. Both backends store times as ISO text and JSON as text (:mod:`tmem.store.schema`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from tmem import models as m

Row = Mapping[str, Any]


def ts(value: datetime) -> str:
    return value.isoformat()


def dt(value: str | datetime) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


def _pick(record: Any, fields: tuple[str, ...]) -> dict[str, Any]:
    return {f: getattr(record, f) for f in fields}


def _take(r: Row, fields: tuple[str, ...]) -> dict[str, Any]:
    return {f: r[f] for f in fields}


_SESSION = ("id", "seq", "content_hash")
_TURN = ("id", "session_id", "seq", "speaker", "text", "caption")
_SCENE = ("id", "seq", "title", "summary", "narrative")
_TOPIC = ("id", "seq", "label", "description")
_ITEM = (
    "id", "seq", "text", "topic_id", "speaker", "date", "supersedes", "superseded_by", "date_end", "date_precision",
    "slot",
)  # fmt: skip


# An imported session and its turns are written as tuples of these columns (after tenant, space), in the order of
# tmem.store.schema (the bulk insert, SQLOps._insert_rows, checks it): no dict per row on the import path.
SESSION_COLUMNS = ("tenant", "space", "id", "seq", "started_at", "content_hash")
TURN_COLUMNS = ("tenant", "space", "id", "session_id", "seq", "speaker", "text", "time", "caption", "metadata")


def session_values(key: tuple[str, str], s: m.Session) -> tuple[Any, ...]:
    """The SESSION_COLUMNS of ``s`` in the space whose (tenant, space) is ``key``."""
    return (*key, s.id, s.seq, s.started_at.isoformat(), s.content_hash)


def session(r: Row) -> m.Session:
    return m.Session(**_take(r, _SESSION), started_at=dt(r["started_at"]))


def turn_values(key: tuple[str, str], t: m.Turn) -> tuple[Any, ...]:
    """The TURN_COLUMNS of ``t`` in the space whose (tenant, space) is ``key``."""
    meta = json.dumps(t.metadata, ensure_ascii=False) if t.metadata else "{}"  # most turns carry none
    return (*key, t.id, t.session_id, t.seq, t.speaker, t.text, t.time.isoformat(), t.caption, meta)


def turn(r: Row) -> m.Turn:
    meta = r["metadata"]
    return m.Turn(**_take(r, _TURN), time=dt(r["time"]), metadata=json.loads(meta) if meta != "{}" else {})


def scene_row(s: m.Scene) -> dict[str, Any]:
    return {**_pick(s, _SCENE), "start": ts(s.start), "end": ts(s.end), "mode": s.mode.value}


def scene(r: Row, turn_ids: list[str]) -> m.Scene:
    times = {"start": dt(r["start"]), "end": dt(r["end"])}
    return m.Scene(**_take(r, _SCENE), **times, mode=m.BuildMode(r["mode"]), turn_ids=turn_ids)


def topic_row(t: m.Topic) -> dict[str, Any]:
    return _pick(t, _TOPIC)


def topic(r: Row) -> m.Topic:
    return m.Topic(**_take(r, _TOPIC))


def item_row(it: m.Item) -> dict[str, Any]:
    lists = {"turn_ids": json.dumps(it.turn_ids), "conflicts_with": json.dumps(it.conflicts_with)}
    return {**_pick(it, _ITEM), "kind": it.kind.value, "mode": it.mode.value, **lists}


def item(r: Row, scene_ids: list[str]) -> m.Item:
    lists = {"turn_ids": json.loads(r["turn_ids"]), "conflicts_with": json.loads(r["conflicts_with"])}
    kinds = {"kind": m.ItemKind(r["kind"]), "mode": m.BuildMode(r["mode"])}
    return m.Item(**_take(r, _ITEM), **kinds, **lists, scene_ids=scene_ids)


_TRIGGER = ("id", "host_kind", "host_id")
_PENDING = ("space", "request_hash", "stage", "body")
_EDIT = ("item_id", "version", "old_text", "new_text")
_CALL = (
    "space", "stage", "model", "request_hash", "tokens_in", "tokens_out", "latency_ms", "attempts", "outcome",
    "response", "error",
)  # fmt: skip


def trigger_row(tr: m.Trigger) -> dict[str, Any]:
    return {**_pick(tr, _TRIGGER), "family": tr.family.value, "grp": tr.group, "fields": json.dumps(tr.fields)}


def trigger(r: Row, views: list[m.TriggerView]) -> m.Trigger:
    fields = {"family": m.TriggerFamily(r["family"]), "group": r["grp"], "fields": json.loads(r["fields"])}
    return m.Trigger(**_take(r, _TRIGGER), **fields, views=views)


def persona_row(p: m.Persona) -> dict[str, Any]:
    return {"speaker": p.speaker, "traits": json.dumps([t.model_dump() for t in p.traits]), "summary": p.summary}


def persona(r: Row) -> m.Persona:
    traits = [m.PersonaTrait(**t) for t in json.loads(r["traits"])]
    return m.Persona(speaker=r["speaker"], traits=traits, summary=r["summary"])


def llm_call_row(c: m.LLMCall) -> dict[str, Any]:
    return {**_pick(c, _CALL), "created_at": ts(c.created_at)}


def llm_call(r: Row) -> m.LLMCall:
    return m.LLMCall(**_take(r, _CALL), created_at=dt(r["created_at"]))


def pending_row(p: m.PendingRequest) -> dict[str, Any]:
    return _pick(p, _PENDING)


def pending(r: Row) -> m.PendingRequest:
    return m.PendingRequest(**_take(r, _PENDING))


def item_edit_row(e: m.ItemEdit) -> dict[str, Any]:
    return {**_pick(e, _EDIT), "change": "edited", "at": ts(e.at)}


def item_edit(r: Row) -> m.ItemEdit:
    return m.ItemEdit(**_take(r, _EDIT), at=dt(r["at"]))


def erasure(r: Row) -> m.Erasure:
    return m.Erasure(seq=r["seq"], space=r["space"], kind=r["kind"], erased=bool(r["erased"]))
