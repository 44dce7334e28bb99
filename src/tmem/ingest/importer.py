"""Writing validated sessions into a store: idempotent, append-only, all-or-nothing.

* A session whose content hash (start time and turns: ids, speakers, texts, times, captions) is already stored in
  the space is skipped; importing the same file twice changes nothing.
* A session whose id is stored with different content is an InputError: sessions are never overwritten.
* New sessions append: session and turn ``seq`` continue after the stored ones, in input order.
* Turn ids are unique within a space; a turn without its own time gets the session's start.
* A turn id that was forgotten (``Memory.forget``) is never stored again.
* ``Space.speakers`` keeps the stored order, then the declared speakers, then any other speaker by first appearance.
* Everything one call writes is inside one store transaction: on any error nothing is written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from tmem.errors import InputError
from tmem.ingest.limits import (
    MAX_CAPTION_CHARS,
    MAX_ID_CHARS,
    MAX_TURN_CHARS,
    MAX_TURNS_PER_SESSION,
    check_date,
    check_name,
    check_text,
)
from tmem.ingest.reader import Format, read_file
from tmem.ingest.types import ImportReport, SpaceImportReport, SpaceInput
from tmem.models import Session, SessionInput, Turn
from tmem.scope import LOCAL_TENANT, Scope
from tmem.store.base import Store
from tmem.store.rules import space_name_problem
from tmem.util.state import STATE_TURN_SEQ
from tmem.util.text import text_hash


def session_content_hash(session: SessionInput) -> str:
    """Hash of what a session says (its id excluded): start time and every turn field, in order."""
    canonical = {
        "started_at": session.started_at.isoformat(),
        "turns": [
            [t.id, t.speaker, t.text, None if t.time is None else t.time.isoformat(), t.caption] for t in session.turns
        ],
    }
    return text_hash(json.dumps(canonical, ensure_ascii=False, separators=(",", ":")))


def import_file(store: Store, path: str | Path, fmt: Format = "auto", space: str | None = None) -> ImportReport:
    """Read ``path`` (see :func:`tmem.ingest.read_file`) and import every space in it in one transaction."""
    spaces = read_file(path, fmt, space=space)
    return import_spaces(store, spaces, source=str(path))


def import_sessions(
    store: Store,
    space: Scope,
    sessions: Sequence[SessionInput],
    *,
    speakers: Sequence[str] = (),
    source: str = "sessions given by the caller",
) -> ImportReport:
    """Import sessions built in code (e.g. the evaluation harness's stitched sessions) into ``space``.

    Input is checked as a file would be: non-empty space name, speakers and turns, session and turn ids unique.
    """
    space_input = SpaceInput(name=space.space, speakers=list(speakers), sessions=list(sessions))
    return import_spaces(store, [space_input], source=source, tenant=space.tenant)


def import_spaces(
    store: Store, spaces: Sequence[SpaceInput], *, source: str, tenant: str = LOCAL_TENANT
) -> ImportReport:
    """Import validated spaces in one transaction (as ``tenant``'s; the local tenant reads each name as
    :meth:`Scope.local` does); raises InputError (and writes nothing) on a conflict."""
    for space in spaces:  # readers check as they read; sessions built in code are checked here
        _check_input(space, source)
    report = ImportReport(source=source)
    with store.transaction():
        for space in spaces:
            scope = Scope(tenant, space.name) if tenant else Scope.local(space.name)
            report.spaces.append(_import_space(store, space, scope, source))
    return report


def _problem(where: str, problem: str | None) -> None:
    if problem:
        raise InputError(f"{where}: {problem}")


def _check_input(space: SpaceInput, source: str) -> None:
    if not space.name.strip():
        raise InputError(f"{source}: the space name is empty; name the space.")
    _problem(f"{source}: space name {space.name!r}", check_name(space.name, "the space's name"))
    _problem(f"{source}: space name {space.name!r}", space_name_problem(space.name))
    for name in space.speakers:
        _problem(f"{source}: space {space.name!r}, speaker {name!r}", check_name(name, "a speaker's name"))
    session_ids: set[str] = set()
    turn_ids: set[str] = set()
    for session in space.sessions:
        where = f"{source}: space {space.name!r}, session {session.id!r}"
        if not session.id.strip():
            raise InputError(f"{source}: space {space.name!r} has a session with an empty id; give it an id.")
        if session.id in session_ids:
            raise InputError(f"{where}: the session id appears twice; give each session its own id.")
        session_ids.add(session.id)
        if not session.turns:
            raise InputError(f"{where}: has no turns; a session needs at least one turn.")
        _problem(where, check_name(session.id, "a session id", MAX_ID_CHARS))
        _problem(where, check_date(session.started_at))
        if len(session.turns) > MAX_TURNS_PER_SESSION:
            raise InputError(
                f"{where}: has {len(session.turns):,} turns, at most {MAX_TURNS_PER_SESSION:,} are allowed."
            )
        for turn in session.turns:
            if not turn.id.strip() or not turn.speaker.strip():
                raise InputError(f"{where}, turn {turn.id!r}: turn id and speaker must be non-empty.")
            at = f"{where}, turn {turn.id!r}"
            _problem(at, check_name(turn.id, "a turn id", MAX_ID_CHARS))
            _problem(at, check_name(turn.speaker, "the speaker"))
            _problem(at + " text", check_text(turn.text, "a turn", MAX_TURN_CHARS))
            _problem(at + " caption", check_text(turn.caption or "", "a caption", MAX_CAPTION_CHARS))
            _problem(at, None if turn.time is None else check_date(turn.time))
            if turn.id in turn_ids:
                raise InputError(f"{where}: turn id {turn.id!r} appears twice; turn ids are unique in a space.")
            turn_ids.add(turn.id)


# Sessions are written in bulk, about this many turns per store call: a fifth of the calls of one per 20-turn session
# (each checks the space and runs one INSERT per table), while the records held between writes stay too few to set
# off the garbage collector, which larger batches did (5,000 turns: +0.4 s of collections in a 100k-turn import;
# bench/results/store_perf.md).
WRITE_TURNS = 100


def _import_space(store: Store, space: SpaceInput, scope: Scope, source: str) -> SpaceImportReport:
    created = not store.has_space(scope)
    stored_space = store.ensure_space(scope)
    stored_sessions = store.sessions(scope)
    stored_turns = store.turns(scope)
    by_hash = {s.content_hash: s for s in stored_sessions}
    by_id = {s.id: s for s in stored_sessions}
    turn_owner = {t.id: t.session_id for t in stored_turns}
    next_session_seq = max((s.seq for s in stored_sessions), default=-1) + 1
    # seq continues after the stored turns and after the last build's watermark (a forgotten last turn's seq is
    # never reused); forgotten (tombstoned) turn ids are never stored again
    watermark = int(store.get_state(scope, STATE_TURN_SEQ) or -1)
    next_turn_seq = max(max((t.seq for t in stored_turns), default=-1), watermark) + 1
    forgotten = store.tombstoned(scope, "turn", [t.id for s in space.sessions for t in s.turns])

    report = SpaceImportReport(space=space.name, created=created)
    new_sessions: list[tuple[Session, Sequence[Turn]]] = []  # not yet written: `held` turns
    held = 0
    speakers = list(stored_space.speakers)
    for name in space.speakers:
        if name not in speakers:
            speakers.append(name)
    for session in space.sessions:
        content_hash = session_content_hash(session)
        if content_hash in by_hash:
            report.sessions_skipped.append(session.id)
            continue
        if session.id in by_id:
            old = by_id[session.id]
            raise InputError(
                f"{source}: space {space.name!r}: session {session.id!r} is already stored with different content "
                f"(stored: started {old.started_at.isoformat()}; file: started {session.started_at.isoformat()}, "
                f"{len(session.turns)} turns). Stored sessions are never overwritten: give the new session another "
                "id to append it, or import it into another space."
            )
        turns: list[Turn] = []
        for turn in session.turns:
            if turn.id in forgotten:
                continue
            if turn.id in turn_owner:
                raise InputError(
                    f"{source}: space {space.name!r}: turn id {turn.id!r} of session {session.id!r} is already used "
                    f"by session {turn_owner[turn.id]!r}; turn ids must be unique within a space (give the turn "
                    "another id, or leave it out to get '<session id>:<n>')."
                )
            turn_owner[turn.id] = session.id
            turns.append(
                Turn(
                    id=turn.id,
                    session_id=session.id,
                    seq=next_turn_seq,
                    speaker=turn.speaker,
                    text=turn.text,
                    time=turn.time or session.started_at,
                    caption=turn.caption,
                )
            )
            next_turn_seq += 1
            if turn.speaker not in speakers:
                speakers.append(turn.speaker)
        if not turns:  # every turn of it was forgotten
            report.sessions_skipped.append(session.id)
            continue
        stored = Session(id=session.id, seq=next_session_seq, started_at=session.started_at, content_hash=content_hash)
        new_sessions.append((stored, turns))
        held += len(turns)
        if held >= WRITE_TURNS:
            store.add_sessions(scope, new_sessions)
            new_sessions, held = [], 0
        next_session_seq += 1
        by_hash[content_hash] = stored
        by_id[session.id] = stored
        report.sessions_added.append(session.id)
        report.turns_added += len(turns)
    if new_sessions:
        store.add_sessions(scope, new_sessions)
    if speakers != list(stored_space.speakers):
        store.set_speakers(scope, speakers)
    for key, value in space.state.items():
        if store.get_state(scope, key) != value:
            store.set_state(scope, key, value)
    report.speakers = speakers
    return report
