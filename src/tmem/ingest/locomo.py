"""Reader for LoCoMo's JSON (``locomo10.json`` and its splits).

The file is a list of samples; each sample becomes one space named by its ``sample_id``. Inside ``conversation``,
every ``session_N`` list is a session dated by ``session_N_date_time`` (``"1:56 pm on 8 May, 2023"``); sessions are
ordered by N and keep the id ``session_N``. Turns keep ``dia_id`` (``D3:7``) as their id, their speaker and text, and
``blip_caption`` as the image caption. Decisions (docs/ingest.md): ``img_url``, ``query`` and ``re-download`` are
not kept (``query`` is the search term the dataset's authors used to find the picture, not something a speaker said
or saw); a ``session_N_date_time`` without a ``session_N`` list and an empty ``session_N`` list are ignored (the
official data has both as placeholders); the other sample fields (``qa``, ``observation``, summaries) are the
benchmark's, not the conversation's, and are read by the evaluation harness instead.
"""

from __future__ import annotations

import re
from typing import Any

from tmem.ingest.limits import MAX_CAPTION_CHARS, MAX_ID_CHARS, MAX_TURN_CHARS, MAX_TURNS_PER_SESSION
from tmem.ingest.source import (
    Loc,
    expect_list,
    expect_name,
    expect_object,
    expect_text,
    expect_timestamp,
    read_spaces,
    required,
)
from tmem.ingest.types import SpaceInput
from tmem.models import SessionInput, TurnInput

_SESSION_KEY = re.compile(r"^session_(\d+)$")


def looks_like_locomo(data: Any) -> bool:
    """True for a list of objects with a ``conversation`` (or one such object)."""
    if isinstance(data, dict):
        return "conversation" in data
    return isinstance(data, list) and bool(data) and all(isinstance(s, dict) and "conversation" in s for s in data)


def read_locomo(data: Any, file: str) -> list[SpaceInput]:
    """Validate a parsed LoCoMo document; raises InputError naming the JSON path of the first problem."""
    return read_spaces(
        data,
        file,
        what="LoCoMo samples",
        empty="contains no samples; a LoCoMo file is a list of objects with a 'conversation'.",
        id_key="sample_id",
        read=_read_sample,
    )


def _read_sample(raw: Any, loc: Loc) -> SpaceInput:
    sample = expect_object(raw, loc, "a LoCoMo sample")
    name = expect_name(required(sample, "sample_id", loc, "the conversation's id"), loc.key("sample_id"), "a sample_id")
    conv_loc = loc.key("conversation")
    conv = expect_object(required(sample, "conversation", loc, "the dialogue"), conv_loc, "the dialogue")
    speakers = [
        expect_name(required(conv, key, conv_loc, "a speaker's name"), conv_loc.key(key), "a speaker's name")
        for key in ("speaker_a", "speaker_b")
    ]
    numbered: list[tuple[int, str]] = []
    for key in conv:
        if m := _SESSION_KEY.match(key):
            if len(m.group(1)) > 6:
                raise conv_loc.key(key).error("has a session number of more than 6 digits; number sessions 1, 2, ...")
            numbered.append((int(m.group(1)), key))
    numbered.sort()
    sessions: list[SessionInput] = []
    seen_turns: dict[str, Loc] = {}
    for number, key in numbered:
        turns_raw = expect_list(conv[key], conv_loc.key(key), "the session's turns")
        if not turns_raw:
            continue  # an empty placeholder session in the dataset (documented above)
        if len(turns_raw) > MAX_TURNS_PER_SESSION:
            raise conv_loc.key(key).error(
                f"has {len(turns_raw):,} turns; a session may have at most {MAX_TURNS_PER_SESSION:,}."
            )
        date_key = f"{key}_date_time"
        what = f"when session {number} started"
        started = expect_timestamp(required(conv, date_key, conv_loc, what), conv_loc.key(date_key), what)
        turns = []
        for j, turn_raw in enumerate(turns_raw):
            turn_loc = conv_loc.key(key).index(j)
            turn = _read_turn(turn_raw, turn_loc)
            if turn.id in seen_turns:
                raise turn_loc.key("dia_id").error(
                    f"dia_id {turn.id!r} is already used at {seen_turns[turn.id].path}; turn ids must be unique "
                    "within a conversation."
                )
            seen_turns[turn.id] = turn_loc
            turns.append(turn)
        sessions.append(SessionInput(id=key, started_at=started, turns=turns))
    if not sessions:
        raise conv_loc.error("has no non-empty 'session_N' list; a LoCoMo conversation needs at least one session.")
    return SpaceInput(name=name, speakers=speakers, sessions=sessions)


def _read_turn(raw: Any, loc: Loc) -> TurnInput:
    turn = expect_object(raw, loc, "a turn")
    speaker = expect_name(required(turn, "speaker", loc, "who said the turn"), loc.key("speaker"), "the speaker")
    text = expect_text(required(turn, "text", loc, "what was said"), loc.key("text"), "a turn", MAX_TURN_CHARS)
    dia_id = expect_name(
        required(turn, "dia_id", loc, "the turn id, e.g. 'D1:3'"), loc.key("dia_id"), "a dia_id", limit=MAX_ID_CHARS
    )
    raw_caption = turn.get("blip_caption")
    caption = (
        None
        if raw_caption is None
        else expect_text(raw_caption, loc.key("blip_caption"), "a caption", MAX_CAPTION_CHARS)
    )
    return TurnInput(id=dia_id, speaker=speaker, text=text, caption=caption or None)
