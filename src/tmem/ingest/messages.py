"""Messages as they arrive: ``Memory.add_messages(space, messages)`` (docs/agents.md).

* A message is appended to the space's open session (the last one, by seq), or starts a new session when it comes
  more than the idle gap (``Settings.session_gap_minutes``) after the previous message.
* Idempotent by ``id``: a message whose id is already stored is skipped; one whose id was forgotten (tombstoned) is
  not stored again. A message without an id is always stored (its turn id is ``m-`` + a hash of its content and its
  position in the space): identical messages sent twice ("ok", "ok") are two turns, as the sender meant. A client
  that retries a call it got no answer for gets exactly-once by sending ids - any stable string of its own, or
  :func:`with_request_ids` (the service's ``Idempotency-Key`` header), which names the messages of one request
  ``KEY:0``, ``KEY:1``, ... (docs/agents.md).
* Dates come from the conversation: a message without ``time`` takes ``received_at`` when the caller passes it (a
  live agent's arrival time, e.g. the service's receive time), otherwise the previous message's time. The first
  message of a space with neither is refused. tmem itself never reads the machine clock here.
* Cost: a handful of indexed reads (last turn, last session, the call's own ids, their tombstones) and the inserts;
  nothing reads the space's other sessions or turns, so adding one message costs the same in any size of space.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tmem.errors import InputError
from tmem.ingest.limits import MAX_CAPTION_CHARS, MAX_ID_CHARS, MAX_TURN_CHARS, check_date, check_name, check_text
from tmem.ingest.metadata import metadata_problem
from tmem.ingest.timestamps import parse_timestamp
from tmem.models import Session, Turn
from tmem.scope import Scope
from tmem.store.base import Store
from tmem.util.state import STATE_TURN_SEQ
from tmem.util.text import text_hash

LIVE_SESSION_PREFIX = "live-"


class MessageInput(BaseModel):
    """One message of a conversation as an agent writes it."""

    model_config = ConfigDict(extra="forbid")

    speaker: str = Field(description="Who said it (a name, or e.g. 'user' / 'assistant').")
    text: str = Field(description="What was said.")
    time: datetime | None = Field(
        default=None, description="When it was said (ISO 8601; a zone is converted to UTC). Optional."
    )
    id: str | None = Field(default=None, description="The caller's stable id; makes retries idempotent.")
    caption: str | None = Field(default=None, description="Caption of an image shared with the message.")
    metadata: dict[str, Any] | None = Field(
        default=None,
        description="Labels of the message: string keys, string / number / boolean values (tmem.ingest.metadata); "
        "filters select by them.",
    )

    @field_validator("time", mode="before")
    @classmethod
    def _parse_time(cls, value: object) -> object:
        if isinstance(value, str):
            return parse_timestamp(value)
        if isinstance(value, datetime) and value.tzinfo is not None:
            try:
                return value.astimezone(UTC).replace(tzinfo=None)
            except OverflowError as exc:  # e.g. 0001-01-01T00:00+01:00 leaves the calendar in UTC
                raise ValueError(f"{value.isoformat()} lies outside years 1-9999 in UTC") from exc
        return value


class MessagesReport(BaseModel):
    """What one ``add_messages`` call did, message by message (ids in input order)."""

    space: str
    added: list[str] = Field(default_factory=list, description="Turn ids stored by this call.")
    skipped: list[str] = Field(default_factory=list, description="Already stored (same id): unchanged.")
    forgotten: list[str] = Field(default_factory=list, description="Forgotten earlier: not stored again.")
    sessions_created: list[str] = Field(default_factory=list)
    session_id: str | None = Field(default=None, description="The open session after this call.")


def message_key(message: MessageInput, seq: int) -> str:
    """The turn id of a message: its own id, or ``m-`` + a hash of its content and its position ``seq`` in the
    space (unique: an id-less message is never taken for another)."""
    if message.id is not None:
        return message.id
    canonical = [
        message.speaker,
        message.text,
        None if message.time is None else message.time.isoformat(),
        message.caption,
        seq,
    ]
    return "m-" + text_hash(json.dumps(canonical, ensure_ascii=False, separators=(",", ":")))[:24]


MAX_REQUEST_KEY = 100


def with_request_ids(
    messages: Sequence[MessageInput | dict[str, object]], request_key: str
) -> list[MessageInput | dict[str, object]]:
    """``messages`` with every missing id set to ``REQUEST_KEY:N`` (N: its position in the request), so that a
    client that resends a request under the same key stores its messages once."""
    problem = check_name(request_key, "an idempotency key", MAX_REQUEST_KEY)
    if problem:
        raise InputError(f"The idempotency key {problem}")
    out: list[MessageInput | dict[str, object]] = []
    for n, m in enumerate(messages):
        named = f"{request_key}:{n}"
        if isinstance(m, MessageInput):
            out.append(m if m.id is not None else m.model_copy(update={"id": named}))
        else:
            out.append(m if m.get("id") is not None else {**m, "id": named})
    return out


def _check(messages: Sequence[MessageInput]) -> None:
    for n, m in enumerate(messages):
        where = f"messages[{n}]"
        if not m.speaker.strip():
            raise InputError(f"{where}: speaker is empty; name who said the message.")
        if not m.text.strip() and not (m.caption or "").strip():
            raise InputError(f"{where}: text is empty; send what was said (or a caption for an image).")
        if m.id is not None and not m.id.strip():
            raise InputError(f"{where}: id is empty; leave it out (the message is then stored on every call).")
        # The importer's limits (tmem.ingest.limits) hold for messages too.
        problems = [
            ("speaker", check_name(m.speaker, "the speaker")),
            ("text", check_text(m.text, "a message", MAX_TURN_CHARS)),
            ("caption", check_text(m.caption or "", "a caption", MAX_CAPTION_CHARS)),
            ("id", None if m.id is None else check_name(m.id, "a message id", MAX_ID_CHARS)),
            ("time", None if m.time is None else check_date(m.time)),
            ("metadata", None if m.metadata is None else metadata_problem(m.metadata)),
        ]
        for name, problem in problems:
            if problem:
                raise InputError(f"{where}.{name}: {problem}")


def parse_messages(messages: Sequence[MessageInput | dict[str, object]]) -> list[MessageInput]:
    """Messages as given (models or dicts), validated; InputError naming the first bad one (nothing is stored)."""
    parsed: list[MessageInput] = []
    for n, m in enumerate(messages):
        try:
            parsed.append(m if isinstance(m, MessageInput) else MessageInput.model_validate(m))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'message'}: {e['msg']}" for e in exc.errors())
            raise InputError(
                f"messages[{n}]: {problems}. A message is {{speaker, text, time?, id?, caption?, metadata?}}; "
                "nothing of this call was stored."
            ) from None
    return parsed


def add_messages(
    store: Store,
    space: Scope,
    messages: Sequence[MessageInput],
    *,
    gap: timedelta,
    received_at: datetime | None = None,
) -> MessagesReport:
    """Store ``messages`` in ``space`` (created if new) in one transaction; see the module docstring."""
    problem = check_name(space.key, "the space's name")
    if problem:
        raise InputError("space {space!r}: {problem}", space=space, problem=problem)
    _check(messages)
    if received_at is not None and received_at.tzinfo is not None:
        received_at = received_at.astimezone(UTC).replace(tzinfo=None)
    report = MessagesReport(space=space.space)
    keys = [m.id for m in messages if m.id is not None]
    with store.transaction():
        stored_space = store.ensure_space(space)
        last = store.last_turn(space)
        session = store.last_session(space)
        known = {t.id: t for t in store.find_turns(space, keys)}
        forgotten = store.tombstoned(space, "turn", keys)
        watermark = int(store.get_state(space, STATE_TURN_SEQ) or -1)
        next_seq = max(last.seq if last is not None else -1, watermark) + 1
        prev_time = last.time if last is not None else None
        speakers = list(stored_space.speakers)
        new_sessions: dict[str, Session] = {}
        appended: dict[str, list[Turn]] = {}
        for n, m in enumerate(messages):
            key = base = message_key(m, next_seq)
            bump = 0
            while m.id is None and (key in known or store.tombstoned(space, "turn", [key])):
                bump += 1  # a forgotten turn's position and content again: a new turn, not the forgotten one
                key = f"{base}-{bump}"
            if key in forgotten:
                report.forgotten.append(key)
                continue
            if key in known:
                old = known[key]
                if (old.speaker, old.text) != (m.speaker, m.text):
                    raise InputError(
                        f"messages[{n}]: id {key!r} is already stored for another message ({old.speaker}: "
                        f"{old.text[:60]!r}); give each message its own id. Nothing of this call was stored."
                    )
                report.skipped.append(key)
                continue
            when = m.time or received_at or prev_time
            if when is None:
                raise InputError(
                    "messages[{n}]: the first message of space {space!r} has no time; send its ISO 8601 time "
                    "(later messages without one take the previous message's time).",
                    n=n,
                    space=space,
                )
            if session is None or prev_time is None or when - prev_time > gap:
                session = _new_session(store, space, key, when, session)
                new_sessions[session.id] = session
                report.sessions_created.append(session.id)
            turn = Turn(
                id=key, session_id=session.id, seq=next_seq, speaker=m.speaker, text=m.text, time=when,
                caption=m.caption, metadata=m.metadata or {},
            )  # fmt: skip
            known[key] = turn
            appended.setdefault(session.id, []).append(turn)
            report.added.append(key)
            next_seq += 1
            prev_time = when
            if m.speaker not in speakers:
                speakers.append(m.speaker)
        for session_id, turns in appended.items():
            if session_id in new_sessions:
                store.add_session(space, new_sessions[session_id], turns)
            else:
                store.add_turns(space, session_id, turns)
        if speakers != list(stored_space.speakers):
            store.set_speakers(space, speakers)
    report.session_id = session.id if session is not None else None
    return report


def _new_session(store: Store, space: Scope, first_key: str, when: datetime, previous: Session | None) -> Session:
    seq = previous.seq + 1 if previous is not None else 0
    base = f"{LIVE_SESSION_PREFIX}{seq + 1}"
    candidate, n = base, 1
    while store.find_sessions(space, [candidate]):
        n += 1
        candidate = f"{base}-{n}"
    # The hash of a live session names its first message: it never equals an imported session's content hash, and it
    # stays fixed while messages are appended (re-importing a file never collides with a session that grew).
    return Session(
        id=candidate, seq=seq, started_at=when, content_hash=text_hash(f"live\x1f{space.key}\x1f{first_key}")
    )
