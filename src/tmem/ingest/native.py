"""tmem's native conversation format, as one JSON document or as JSONL (one session per line).

JSON document: one space object, or a list of them::

    {"space": "alice", "speakers": ["Alice", "Assistant"],
     "sessions": [{"id": "s1", "started_at": "2024-03-02T18:30:00+01:00",
                   "turns": [{"id": "s1:1", "speaker": "Alice", "text": "...", "time": "...", "caption": "..."}]}]}

JSONL: one session object per line, carrying its space: ``{"space": "alice", "id": "s1", "started_at": "...",
"turns": [...]}`` (an optional ``speakers`` list on a line adds declared speakers).

Required: ``started_at`` per session, ``speaker`` and ``text`` per turn, and ``space`` unless the caller names the
space (``--space``). Optional: ``speakers``; session ``id`` (default ``session_<started_at as YYYYMMDDTHHMMSS>``);
turn ``id`` (default ``<session id>:<n>``, n from 1), ``time`` (default the session start) and ``caption``. Dates
are LoCoMo style or ISO 8601 (see :mod:`tmem.ingest.timestamps`). Unknown fields are errors, so that a misspelt
field is never silently dropped. Full description with examples: docs/ingest.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tmem.errors import InputError
from tmem.ingest.limits import MAX_CAPTION_CHARS, MAX_ID_CHARS, MAX_TURN_CHARS, MAX_TURNS_PER_SESSION, check_name
from tmem.ingest.source import (
    Loc,
    expect_list,
    expect_name,
    expect_object,
    expect_text,
    expect_timestamp,
    reject_unknown,
    required,
)
from tmem.ingest.types import SpaceInput
from tmem.models import SessionInput, TurnInput

_SPACE_FIELDS = {"space", "speakers", "sessions"}
_SESSION_FIELDS = {"id", "started_at", "turns"}
_LINE_FIELDS = _SESSION_FIELDS | {"space", "speakers"}
_TURN_FIELDS = {"id", "speaker", "text", "time", "caption"}


def looks_like_native(data: Any) -> bool:
    """True for a space object with ``sessions`` (or a list of them)."""
    if isinstance(data, dict):
        return "sessions" in data
    return isinstance(data, list) and bool(data) and all(isinstance(s, dict) and "sessions" in s for s in data)


@dataclass
class _SpaceAcc:
    """Collects one space's sessions across records, checking ids are unique within the space."""

    name: str
    speakers: list[str] = field(default_factory=list)
    sessions: list[SessionInput] = field(default_factory=list)
    session_locs: dict[str, Loc] = field(default_factory=dict)
    turn_locs: dict[str, Loc] = field(default_factory=dict)

    def add_speakers(self, names: Iterable[str]) -> None:
        self.speakers.extend(n for n in names if n not in self.speakers)


class _Reader:
    def __init__(self, file: str, default_space: str | None) -> None:
        self.file = file
        self.default_space = default_space
        self.spaces: dict[str, _SpaceAcc] = {}

    def space_for(self, obj: dict[str, Any], loc: Loc) -> _SpaceAcc:
        if "space" in obj:
            name = expect_name(obj["space"], loc.key("space"), "the space's name")
        elif self.default_space is not None:
            name = self.default_space
        else:
            raise loc.key("space").error(
                'missing; add "space" (the name of the memory to import into) or pass --space NAME.'
            )
        if name not in self.spaces:
            self.spaces[name] = _SpaceAcc(name)
        acc = self.spaces[name]
        if "speakers" in obj:
            speakers_loc = loc.key("speakers")
            raw = expect_list(obj["speakers"], speakers_loc, "speaker names")
            acc.add_speakers(expect_name(v, speakers_loc.index(i), "a speaker's name") for i, v in enumerate(raw))
        return acc

    def read_space(self, raw: Any, loc: Loc) -> None:
        obj = expect_object(raw, loc, "a space with its sessions")
        reject_unknown(obj, _SPACE_FIELDS, loc)
        acc = self.space_for(obj, loc)
        sessions_loc = loc.key("sessions")
        sessions = expect_list(required(obj, "sessions", loc, "the space's sessions"), sessions_loc, "sessions")
        if not sessions:
            raise sessions_loc.error("is empty; a space needs at least one session.")
        for i, session in enumerate(sessions):
            self.read_session(session, sessions_loc.index(i), acc)

    def read_line(self, raw: Any, loc: Loc) -> None:
        obj = expect_object(raw, loc, "a session, one per line")
        reject_unknown(obj, _LINE_FIELDS, loc)
        self.read_session(obj, loc, self.space_for(obj, loc))

    def read_session(self, raw: Any, loc: Loc, acc: _SpaceAcc) -> None:
        obj = expect_object(raw, loc, "a session")
        if loc.line is None:
            reject_unknown(obj, _SESSION_FIELDS, loc)
        what = "when the session started"
        started = expect_timestamp(required(obj, "started_at", loc, what), loc.key("started_at"), what)
        if "id" in obj:
            session_id = expect_name(obj["id"], loc.key("id"), "the session's id", limit=MAX_ID_CHARS)
        else:
            session_id = "session_" + started.strftime("%Y%m%dT%H%M%S")
        if session_id in acc.session_locs:
            raise loc.error(
                f"session id {session_id!r} of space {acc.name!r} is already used at {acc.session_locs[session_id]}"
                '; give each session its own "id" (sessions without one are named by their start time).'
            )
        acc.session_locs[session_id] = loc
        turns_loc = loc.key("turns")
        turns_raw = expect_list(required(obj, "turns", loc, "the session's turns"), turns_loc, "turns")
        if not turns_raw:
            raise turns_loc.error("is empty; a session needs at least one turn.")
        if len(turns_raw) > MAX_TURNS_PER_SESSION:
            raise turns_loc.error(
                f"has {len(turns_raw):,} turns; a session may have at most {MAX_TURNS_PER_SESSION:,}: split it into "
                "several sessions."
            )
        turns = [self.read_turn(t, turns_loc.index(n), session_id, n + 1, acc) for n, t in enumerate(turns_raw)]
        acc.sessions.append(SessionInput(id=session_id, started_at=started, turns=turns))

    def read_turn(self, raw: Any, loc: Loc, session_id: str, number: int, acc: _SpaceAcc) -> TurnInput:
        obj = expect_object(raw, loc, "a turn")
        reject_unknown(obj, _TURN_FIELDS, loc)
        speaker = expect_name(required(obj, "speaker", loc, "who said the turn"), loc.key("speaker"), "the speaker")
        text = expect_text(required(obj, "text", loc, "what was said"), loc.key("text"), "a turn", MAX_TURN_CHARS)
        turn_id = (
            expect_name(obj["id"], loc.key("id"), "the turn's id", limit=MAX_ID_CHARS)
            if "id" in obj
            else f"{session_id}:{number}"
        )
        if turn_id in acc.turn_locs:
            raise loc.error(
                f"turn id {turn_id!r} is already used at {acc.turn_locs[turn_id]}; turn ids must be unique within "
                "a space."
            )
        acc.turn_locs[turn_id] = loc
        time = obj.get("time")
        return TurnInput(
            id=turn_id,
            speaker=speaker,
            text=text,
            time=None if time is None else expect_timestamp(time, loc.key("time"), "when the turn was said"),
            caption=_caption(obj.get("caption"), loc.key("caption")),
        )

    def result(self) -> list[SpaceInput]:
        problem = None if self.default_space is None else check_name(self.default_space, "the space's name")
        if problem:
            raise InputError(f"--space {self.default_space!r}: {problem}")
        return [SpaceInput(name=a.name, speakers=a.speakers, sessions=a.sessions) for a in self.spaces.values()]


def _caption(value: Any, loc: Loc) -> str | None:
    if value is None:
        return None
    return expect_text(value, loc, "a caption", MAX_CAPTION_CHARS)


def read_native(data: Any, file: str, *, default_space: str | None = None) -> list[SpaceInput]:
    """Validate a parsed native JSON document (one space object or a list of them)."""
    root = Loc(file)
    reader = _Reader(file, default_space)
    if isinstance(data, list):
        if not data:
            raise root.error("is an empty list; write at least one space with its sessions.")
        for i, raw in enumerate(data):
            reader.read_space(raw, root.index(i))
    else:
        reader.read_space(data, root)
    return reader.result()


def read_native_lines(
    records: list[tuple[int, Any]], file: str, *, default_space: str | None = None
) -> list[SpaceInput]:
    """Validate parsed JSONL records (line number, value), one session per line."""
    if not records:
        raise Loc(file).error("has no records; write one session object per line.")
    reader = _Reader(file, default_space)
    for line, raw in records:
        reader.read_line(raw, Loc(file, "$", line))
    return reader.result()


# --------------------------------------------------------------------------------------------- writing


def _turn_json(turn: TurnInput) -> dict[str, Any]:
    out: dict[str, Any] = {"id": turn.id, "speaker": turn.speaker, "text": turn.text}
    if turn.time is not None:
        out["time"] = turn.time.isoformat()
    if turn.caption is not None:
        out["caption"] = turn.caption
    return out


def _session_json(session: SessionInput) -> dict[str, Any]:
    return {
        "id": session.id,
        "started_at": session.started_at.isoformat(),
        "turns": [_turn_json(t) for t in session.turns],
    }


def dump_native(spaces: Iterable[SpaceInput]) -> str:
    """The native JSON document for ``spaces`` (a list of space objects); :func:`read_native` reads it back."""
    doc = []
    for space in spaces:
        obj: dict[str, Any] = {"space": space.name}
        if space.speakers:
            obj["speakers"] = list(space.speakers)
        obj["sessions"] = [_session_json(s) for s in space.sessions]
        doc.append(obj)
    return json.dumps(doc, ensure_ascii=False, indent=2) + "\n"


def dump_native_lines(spaces: Iterable[SpaceInput]) -> str:
    """Native JSONL, one session per line; the space's declared speakers ride on its first line."""
    lines = []
    for space in spaces:
        for n, session in enumerate(space.sessions):
            obj: dict[str, Any] = {"space": space.name}
            if n == 0 and space.speakers:
                obj["speakers"] = list(space.speakers)
            obj.update(_session_json(session))
            lines.append(json.dumps(obj, ensure_ascii=False))
    return "".join(line + "\n" for line in lines)
