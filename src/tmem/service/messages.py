"""``POST /v1/spaces/{space}/messages``: the request's messages appended to the space through ``Memory``."""

from __future__ import annotations

import json

from tmem.errors import InputError
from tmem.memory import Memory
from tmem.models import SessionInput, TurnInput
from tmem.service.schemas import MessagesIn, MessagesOut
from tmem.util.text import text_hash


def add_messages(memory: Memory, key: str, space: str, body: MessagesIn) -> MessagesOut:
    """Store the messages as one session of the space (idempotent by content)."""
    first = body.messages[0].time
    if first is None:
        raise InputError("messages.0.time: the first message needs an ISO 8601 time (it dates the session).")
    canonical = json.dumps([m.model_dump(mode="json") for m in body.messages], sort_keys=True)
    session_id = "m-" + text_hash(canonical)[:16]
    turns: list[TurnInput] = []
    last = first
    for n, message in enumerate(body.messages):
        last = message.time or last
        turns.append(
            TurnInput(id=message.id or f"{session_id}:{n}", speaker=message.speaker, text=message.text, time=last)
        )
    report = memory.add_sessions(key, [SessionInput(id=session_id, started_at=first, turns=turns)])
    added = report.turns_added
    return MessagesOut(
        space=space, added=added, skipped=len(body.messages) - added, detail={"sessions_added": report.sessions_added}
    )
