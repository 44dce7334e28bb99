"""Reader for LongMemEval's JSON (``longmemeval_s*.json``, ``longmemeval_m*.json``, ``longmemeval_oracle.json``).

The file is a list of instances; each becomes one space named by its ``question_id`` with the speakers ``user`` and
``assistant``. Session ``haystack_session_ids[i]`` is dated by ``haystack_dates[i]`` (``"2023/05/20 (Sat) 02:21"``)
and keeps its id; its turns get the ids the official retrieval script gives them, ``<session id>_<n>`` with ``n``
counting every turn from 1, so retrieved turns map onto the official turn-level labels. The benchmark's fields
(question, answer, type, question date, ``answer_session_ids`` and the ids of the ``has_answer`` turns) are
evaluation metadata: they are kept in the space's state under :data:`STATE_KEY` (a JSON object) and never become
turns, so retrieval cannot see them. Sessions stay in file order (S and M files are sorted by time, the oracle file
is not; a session's seq is its position in the history the benchmark gives). A session id repeated within one
history (the official S file has 13 such filler sessions, the same chat at two dates) is kept each time, the
repeats as ``<id>#2``, ``<id>#3``, ...
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from tmem.ingest.limits import MAX_TURN_CHARS, MAX_TURNS_PER_SESSION, check_date
from tmem.ingest.source import (
    Loc,
    expect_list,
    expect_name,
    expect_object,
    expect_str,
    expect_text,
    read_spaces,
    required,
)
from tmem.ingest.types import SpaceInput
from tmem.models import SessionInput, TurnInput

STATE_KEY = "eval.longmemeval"
SPEAKERS = ("user", "assistant")
_DATE = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]{2,9}\))?\s*(\d{1,2}):(\d{2})\s*$")
DATE_EXAMPLE = "'2023/05/20 (Sat) 02:21'"


def looks_like_longmemeval(data: Any) -> bool:
    """True for a list of objects with ``haystack_sessions`` (or one such object)."""
    if isinstance(data, dict):
        return "haystack_sessions" in data
    return isinstance(data, list) and bool(data) and all(isinstance(x, dict) and "haystack_sessions" in x for x in data)


def parse_date(value: Any, loc: Loc, what: str) -> datetime:
    """A LongMemEval timestamp (``2023/05/20 (Sat) 02:21``; the weekday is optional and not checked)."""
    text = expect_str(value, loc, what)
    match = _DATE.match(text) if len(text) <= 40 else None
    problem = None
    if match is not None:
        year, month, day, hour, minute = (int(g) for g in match.groups())
        try:
            parsed = datetime(year, month, day, hour, minute)
        except ValueError as exc:
            problem = f"is not a real date ({exc})"
        else:
            problem = check_date(parsed)
            if problem is None:
                return parsed
    raise loc.error(
        f"cannot read the date {json.dumps(text[:40])} ({what})"
        + (f": it {problem}" if problem else f"; write it as {DATE_EXAMPLE}")
        + "."
    )


def read_longmemeval(data: Any, file: str) -> list[SpaceInput]:
    """Validate a parsed LongMemEval document; raises InputError naming the JSON path of the first problem."""
    return read_spaces(
        data,
        file,
        what="LongMemEval instances",
        empty="contains no instances; a LongMemEval file is a list of objects with 'haystack_sessions'.",
        id_key="question_id",
        read=read_instance,
    )


def read_instance(raw: Any, loc: Loc) -> SpaceInput:
    """One instance -> its space (sessions, and the evaluation metadata in ``state``)."""
    obj = expect_object(raw, loc, "a LongMemEval instance")
    qid = expect_name(required(obj, "question_id", loc, "the instance's id"), loc.key("question_id"), "a question_id")
    qtype = expect_name(required(obj, "question_type", loc, "e.g. 'multi-session'"), loc.key("question_type"), "a type")
    question = expect_str(required(obj, "question", loc, "the question"), loc.key("question"), "the question")
    answer = required(obj, "answer", loc, "the expected answer")
    if isinstance(answer, bool) or not isinstance(answer, str | int | float):
        raise loc.key("answer").error("expected a string or a number (the expected answer).")
    asked = parse_date(required(obj, "question_date", loc, "when it is asked"), loc.key("question_date"), "the date")
    ids = _list(obj, "haystack_session_ids", loc, "the sessions' ids")
    dates = _list(obj, "haystack_dates", loc, "the sessions' dates")
    bodies = _list(obj, "haystack_sessions", loc, "the sessions")
    if not len(ids) == len(dates) == len(bodies):
        raise loc.error(
            f"has {len(ids)} haystack_session_ids, {len(dates)} haystack_dates and {len(bodies)} haystack_sessions; "
            "the three lists must have one entry per session."
        )
    gold_raw = _list(obj, "answer_session_ids", loc, "the evidence sessions' ids")
    gold = [expect_name(g, loc.key("answer_session_ids").index(j), "a session id") for j, g in enumerate(gold_raw)]
    sessions: list[SessionInput] = []
    evidence_turns: list[str] = []
    seen: dict[str, int] = {}
    for j, (sid_raw, date_raw, body) in enumerate(zip(ids, dates, bodies, strict=True)):
        sid = expect_name(sid_raw, loc.key("haystack_session_ids").index(j), "a session id")
        seen[sid] = seen.get(sid, 0) + 1
        if seen[sid] > 1:  # the official S file repeats a filler session in 13 histories (two dates): keep both
            sid = f"{sid}#{seen[sid]}"
        started = parse_date(date_raw, loc.key("haystack_dates").index(j), f"when session {sid!r} took place")
        session, labelled = _read_session(sid, started, body, loc.key("haystack_sessions").index(j))
        if session is not None:
            sessions.append(session)
            evidence_turns += labelled
    if not sessions:
        raise loc.key("haystack_sessions").error("has no session with a turn; an instance needs a history.")
    meta = {
        "question_id": qid,
        "question_type": qtype,
        "abstention": qid.endswith("_abs"),
        "question": question,
        "answer": answer,
        "question_date": asked.isoformat(),
        "answer_session_ids": gold,
        "evidence_turn_ids": evidence_turns,
    }
    return SpaceInput(
        name=qid, speakers=list(SPEAKERS), sessions=sessions, state={STATE_KEY: json.dumps(meta, ensure_ascii=False)}
    )


def _list(obj: dict[str, Any], name: str, loc: Loc, what: str) -> list[Any]:
    return expect_list(required(obj, name, loc, what), loc.key(name), what)


def _read_session(sid: str, started: datetime, raw: Any, loc: Loc) -> tuple[SessionInput | None, list[str]]:
    turns_raw = expect_list(raw, loc, "the session's turns")
    if len(turns_raw) > MAX_TURNS_PER_SESSION:
        raise loc.error(f"has {len(turns_raw):,} turns; a session may have at most {MAX_TURNS_PER_SESSION:,}.")
    turns: list[TurnInput] = []
    labelled: list[str] = []
    for n, turn_raw in enumerate(turns_raw, start=1):
        tloc = loc.index(n - 1)
        turn = expect_object(turn_raw, tloc, "a turn")
        role = expect_str(required(turn, "role", tloc, "'user' or 'assistant'"), tloc.key("role"), "the role")
        if role not in SPEAKERS:
            raise tloc.key("role").error(f"is {role!r}; a LongMemEval role is 'user' or 'assistant'.")
        text = expect_text(
            required(turn, "content", tloc, "what was said"), tloc.key("content"), "a turn", MAX_TURN_CHARS
        )
        flag = turn.get("has_answer", False)
        if not isinstance(flag, bool):
            raise tloc.key("has_answer").error("expected true or false (whether the turn holds evidence).")
        turn_id = f"{sid}_{n}"
        if flag:
            labelled.append(turn_id)
        if text.strip():
            turns.append(TurnInput(id=turn_id, speaker=role, text=text))
    if not turns:  # an empty session (no turn with text) has nothing to remember
        return None, labelled
    return SessionInput(id=sid, started_at=started, turns=turns), labelled
