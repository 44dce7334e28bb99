"""One mapper per record: a stored row (read by column name) to its frozen pydantic record, and a record to the
column values it is written as. Both backends store times as ISO text and JSON as text (:mod:`tmem.store.schema`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from tmem.models import (
    BuildMode,
    Erasure,
    Item,
    ItemEdit,
    ItemKind,
    LLMCall,
    PendingRequest,
    Persona,
    PersonaTrait,
    Scene,
    Session,
    Topic,
    Trigger,
    TriggerFamily,
    TriggerView,
    Turn,
)

Row = Mapping[str, Any]


def ts(value: datetime) -> str:
    return value.isoformat()


def dt(value: str | datetime) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


def session_row(s: Session) -> dict[str, Any]:
    return {"id": s.id, "seq": s.seq, "started_at": ts(s.started_at), "content_hash": s.content_hash}


def session(r: Row) -> Session:
    return Session(id=r["id"], seq=r["seq"], started_at=dt(r["started_at"]), content_hash=r["content_hash"])


def turn_row(t: Turn) -> dict[str, Any]:
    return {
        "id": t.id,
        "session_id": t.session_id,
        "seq": t.seq,
        "speaker": t.speaker,
        "text": t.text,
        "time": ts(t.time),
        "caption": t.caption,
        "metadata": json.dumps(t.metadata, sort_keys=True),
    }


def turn(r: Row) -> Turn:
    return Turn(
        id=r["id"],
        session_id=r["session_id"],
        seq=r["seq"],
        speaker=r["speaker"],
        text=r["text"],
        time=dt(r["time"]),
        caption=r["caption"],
        metadata=json.loads(r["metadata"]),
    )


def scene_row(s: Scene) -> dict[str, Any]:
    return {
        "id": s.id,
        "seq": s.seq,
        "title": s.title,
        "summary": s.summary,
        "narrative": s.narrative,
        "start": ts(s.start),
        "end": ts(s.end),
        "mode": s.mode.value,
    }


def scene(r: Row, turn_ids: list[str]) -> Scene:
    return Scene(
        id=r["id"],
        seq=r["seq"],
        title=r["title"],
        summary=r["summary"],
        narrative=r["narrative"],
        start=dt(r["start"]),
        end=dt(r["end"]),
        mode=BuildMode(r["mode"]),
        turn_ids=turn_ids,
    )


def topic_row(t: Topic) -> dict[str, Any]:
    return {"id": t.id, "seq": t.seq, "label": t.label, "description": t.description}


def topic(r: Row) -> Topic:
    return Topic(id=r["id"], seq=r["seq"], label=r["label"], description=r["description"])


def item_row(it: Item) -> dict[str, Any]:
    return {
        "id": it.id,
        "seq": it.seq,
        "text": it.text,
        "kind": it.kind.value,
        "topic_id": it.topic_id,
        "speaker": it.speaker,
        "date": it.date,
        "supersedes": it.supersedes,
        "superseded_by": it.superseded_by,
        "turn_ids": json.dumps(it.turn_ids),
        "mode": it.mode.value,
        "date_end": it.date_end,
        "date_precision": it.date_precision,
        "conflicts_with": json.dumps(it.conflicts_with),
        "slot": it.slot,
    }


def item(r: Row, scene_ids: list[str]) -> Item:
    return Item(
        id=r["id"],
        seq=r["seq"],
        text=r["text"],
        kind=ItemKind(r["kind"]),
        topic_id=r["topic_id"],
        speaker=r["speaker"],
        date=r["date"],
        supersedes=r["supersedes"],
        superseded_by=r["superseded_by"],
        turn_ids=json.loads(r["turn_ids"]),
        mode=BuildMode(r["mode"]),
        scene_ids=scene_ids,
        date_end=r["date_end"],
        date_precision=r["date_precision"],
        conflicts_with=json.loads(r["conflicts_with"]),
        slot=r["slot"],
    )


def trigger_row(tr: Trigger) -> dict[str, Any]:
    return {
        "id": tr.id,
        "family": tr.family.value,
        "host_kind": tr.host_kind,
        "host_id": tr.host_id,
        "grp": tr.group,
        "fields": json.dumps(tr.fields),
    }


def trigger(r: Row, views: list[TriggerView]) -> Trigger:
    return Trigger(
        id=r["id"],
        family=TriggerFamily(r["family"]),
        host_kind=r["host_kind"],
        host_id=r["host_id"],
        group=r["grp"],
        fields=json.loads(r["fields"]),
        views=views,
    )


def persona_row(p: Persona) -> dict[str, Any]:
    return {"speaker": p.speaker, "traits": json.dumps([t.model_dump() for t in p.traits]), "summary": p.summary}


def persona(r: Row) -> Persona:
    traits = [PersonaTrait(**t) for t in json.loads(r["traits"])]
    return Persona(speaker=r["speaker"], traits=traits, summary=r["summary"])


_CALL_FIELDS = (
    "space", "stage", "model", "request_hash", "tokens_in", "tokens_out", "latency_ms", "attempts", "outcome",
    "response", "error",
)  # fmt: skip


def llm_call_row(c: LLMCall) -> dict[str, Any]:
    return {**{f: getattr(c, f) for f in _CALL_FIELDS}, "created_at": ts(c.created_at)}


def llm_call(r: Row) -> LLMCall:
    return LLMCall(**{f: r[f] for f in _CALL_FIELDS}, created_at=dt(r["created_at"]))


def pending_row(p: PendingRequest) -> dict[str, Any]:
    return {"space": p.space, "request_hash": p.request_hash, "stage": p.stage, "body": p.body}


def pending(r: Row) -> PendingRequest:
    return PendingRequest(space=r["space"], request_hash=r["request_hash"], stage=r["stage"], body=r["body"])


def item_edit_row(e: ItemEdit) -> dict[str, Any]:
    return {
        "item_id": e.item_id,
        "version": e.version,
        "change": "edited",
        "old_text": e.old_text,
        "new_text": e.new_text,
        "at": ts(e.at),
    }


def item_edit(r: Row) -> ItemEdit:
    return ItemEdit(item_id=r["item_id"], version=r["version"], old_text=r["old_text"], new_text=r["new_text"],
                    at=dt(r["at"]))  # fmt: skip


def erasure(r: Row) -> Erasure:
    return Erasure(seq=r["seq"], space=r["space"], kind=r["kind"], erased=bool(r["erased"]))
