"""SQLite implementation of :class:`tmem.store.base.Store`: one file in the memory directory, WAL journal, busy
timeout, foreign keys on. Every statement names its space. Spaces, sessions and turns, build checkpoints, the
embedding cache and the LLM log live here; the connection in :mod:`tmem.store.sqlite_base`, the built records in
:mod:`tmem.store.sqlite_records`, the agent operations in :mod:`tmem.store.sqlite_agent`."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from tmem.errors import NotFoundError, StoreError
from tmem.models import (
    LLMCall,
    PendingRequest,
    Session,
    Space,
    SpaceSummary,
    Turn,
)
from tmem.store.base import Vector, iter_batches
from tmem.store.rules import build_state, check_session_turns, check_space_name, missing_space
from tmem.store.sqlite_agent import AgentOps
from tmem.store.sqlite_base import _CHUNK, _dt, _placeholders, _ts, store_error
from tmem.util.state import STATE_MODE, STATE_TURN_SEQ

__all__ = ["SQLiteStore", "store_error"]


SCRUB_WAIT_MS = 1000  # how long a scrub's checkpoint waits for another connection's open read


class SQLiteStore(AgentOps):
    """The default store. Open with :meth:`open`; ``":memory:"`` gives a private in-memory database (tests)."""

    # ------------------------------------------------------------------ spaces
    def ensure_space(self, name: str) -> Space:
        check_space_name(name)
        with self.transaction():
            self._exec("INSERT INTO spaces(name) VALUES (?) ON CONFLICT(name) DO NOTHING", (name,))
        return self.get_space(name)

    def get_space(self, name: str) -> Space:
        rows = self._rows("SELECT name, speakers FROM spaces WHERE name = ?", (name,))
        if not rows:
            raise missing_space(name, [r[0] for r in self._rows("SELECT name FROM spaces ORDER BY name")])
        return Space(name=rows[0][0], speakers=json.loads(rows[0][1]))

    def has_space(self, name: str) -> bool:
        return bool(self._rows("SELECT 1 FROM spaces WHERE name = ?", (name,)))

    def set_speakers(self, space: str, speakers: Sequence[str]) -> None:
        self.get_space(space)
        with self.transaction():
            self._exec("UPDATE spaces SET speakers = ? WHERE name = ?", (json.dumps(list(speakers)), space))

    def list_spaces(self) -> list[SpaceSummary]:
        out: list[SpaceSummary] = []
        for (name,) in self._rows("SELECT name FROM spaces ORDER BY name"):
            n_sessions = self._rows("SELECT COUNT(*) FROM sessions WHERE space = ?", (name,))[0][0]
            n_turns, first, last = self._rows(
                "SELECT COUNT(*), MIN(time), MAX(time) FROM turns WHERE space = ?", (name,)
            )[0]
            state = self.state_keys(name, "build.")
            appended = self.count_turns_after(name, int(state[STATE_TURN_SEQ])) if STATE_TURN_SEQ in state else 0
            out.append(
                SpaceSummary(
                    name=name,
                    sessions=n_sessions,
                    turns=n_turns,
                    first_date=_dt(first) if first else None,
                    last_date=_dt(last) if last else None,
                    build_state=build_state(n_sessions, state, appended_turns=appended),
                    build_mode=state.get(STATE_MODE),
                )
            )
        return out

    def delete_space(self, name: str) -> None:
        self.get_space(name)
        with self.transaction():
            # Children first: composite foreign keys cascade from their parents, but be explicit and cheap.
            for table in ("scene_turns", "topic_scenes", "item_scenes", "trigger_views"):
                self._exec(f"DELETE FROM {table} WHERE space = ?", (name,))
            self._exec("DELETE FROM spaces WHERE name = ?", (name,))

    def scrub(self, *, vacuum: bool = True) -> bool:
        """Leave no bytes of deleted content in the database files (see docs/reliability.md, "Erasure").

        Deletions overwrite content (``secure_delete`` is on for every connection tmem opens); this then checkpoints
        the WAL into the main file and truncates it, so no older page image survives in the WAL. ``vacuum`` (the
        default) also rebuilds the file, which is needed for content written while ``secure_delete`` was off (by an
        older tmem or another tool): such content may survive in free pages and unused parts of pages. Returns False
        when another connection's open read kept the WAL from being emptied (then run it again once it is closed).
        Must not be called inside a transaction.
        """
        with self._lock:
            if self._depth:
                raise StoreError("scrub() cannot run inside a transaction: call it after the deletion has committed.")
            self._db.execute("PRAGMA secure_delete = ON")
            if self._path == ":memory:":
                return True
            busy = self._checkpoint()
            if vacuum:
                self._db.execute("VACUUM")
                busy = self._checkpoint()
            return not busy

    def _checkpoint(self) -> bool:
        """TRUNCATE checkpoint, waiting at most ``SCRUB_WAIT_MS`` for other connections' readers (not the store's
        write timeout: an erasure a reader blocks is left pending and retried, never a request held for a minute);
        True when it could not complete."""
        (timeout,) = self._db.execute("PRAGMA busy_timeout").fetchone()
        self._db.execute(f"PRAGMA busy_timeout = {min(int(timeout), SCRUB_WAIT_MS)}")
        try:
            busy, _log, _done = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            self._db.execute(f"PRAGMA busy_timeout = {int(timeout)}")
        return bool(busy)

    # ------------------------------------------------------------------ sessions and turns
    def add_session(self, space: str, session: Session, turns: Sequence[Turn]) -> None:
        check_session_turns(session, turns)
        self.get_space(space)
        with self.transaction():
            self._exec(
                "INSERT INTO sessions(space, id, seq, started_at, content_hash) VALUES (?, ?, ?, ?, ?)",
                (space, session.id, session.seq, _ts(session.started_at), session.content_hash),
            )
            self._many(
                "INSERT INTO turns(space, id, session_id, seq, speaker, text, time, caption, metadata) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        space,
                        t.id,
                        t.session_id,
                        t.seq,
                        t.speaker,
                        t.text,
                        _ts(t.time),
                        t.caption,
                        json.dumps(t.metadata, ensure_ascii=False),
                    )
                    for t in turns
                ],
            )

    def sessions(self, space: str) -> list[Session]:
        return [
            Session(id=r[1], seq=r[2], started_at=_dt(r[3]), content_hash=r[4])
            for r in self._rows(
                "SELECT space, id, seq, started_at, content_hash FROM sessions WHERE space = ? ORDER BY seq",
                (space,),
            )
        ]

    def turns(self, space: str, ids: Sequence[str] | None = None) -> list[Turn]:
        rows = self._select_ids("turns", space, ids, "seq")
        found = [
            Turn(
                id=r[1],
                session_id=r[2],
                seq=r[3],
                speaker=r[4],
                text=r[5],
                time=_dt(r[6]),
                caption=r[7],
                metadata=json.loads(r[8]),  # SELECT *: migration 005_turn_metadata appended the column
            )
            for r in rows
        ]
        if ids is not None:
            missing = set(ids) - {t.id for t in found}
            if missing:
                raise NotFoundError(f"Unknown turn ids in space {space!r}: {sorted(missing)[:10]}")
        return sorted(found, key=lambda t: t.seq)

    # ------------------------------------------------------------------ build checkpoints
    def get_state(self, space: str, key: str) -> str | None:
        rows = self._rows("SELECT value FROM build_state WHERE space = ? AND key = ?", (space, key))
        return str(rows[0][0]) if rows else None

    def set_state(self, space: str, key: str, value: str | None) -> None:
        with self.transaction():
            if value is None:
                self._exec("DELETE FROM build_state WHERE space = ? AND key = ?", (space, key))
            else:
                self._exec(
                    "INSERT INTO build_state(space, key, value) VALUES (?, ?, ?) "
                    "ON CONFLICT(space, key) DO UPDATE SET value = excluded.value",
                    (space, key, value),
                )

    def state_keys(self, space: str, prefix: str = "") -> dict[str, str]:
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return {
            r[0]: r[1]
            for r in self._rows(
                "SELECT key, value FROM build_state WHERE space = ? AND key LIKE ? ESCAPE '\\' ORDER BY key",
                (space, escaped + "%"),
            )
        }

    # ------------------------------------------------------------------ embeddings cache
    def get_embeddings(self, space: str, model_id: str, text_hashes: Sequence[str]) -> dict[str, Vector]:
        out: dict[str, Vector] = {}
        for chunk in iter_batches(list(dict.fromkeys(text_hashes)), _CHUNK):
            for text_hash, dim, blob in self._rows(
                "SELECT text_hash, dim, vector FROM embeddings WHERE space = ? AND model_id = ? "
                f"AND text_hash IN ({_placeholders(len(chunk))})",
                (space, model_id, *chunk),
            ):
                vec = np.frombuffer(blob, dtype=np.float32)
                if vec.shape[0] != dim:
                    raise StoreError(f"Corrupt embedding for {text_hash} ({model_id}); delete it and rebuild.")
                out[text_hash] = vec.copy()
        return out

    def put_embeddings(self, space: str, model_id: str, vectors: dict[str, Vector]) -> None:
        with self.transaction():
            self._many(
                "INSERT INTO embeddings(space, model_id, text_hash, dim, vector) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(space, model_id, text_hash) DO UPDATE SET dim = excluded.dim, vector = excluded.vector",
                [
                    (space, model_id, h, int(v.shape[0]), np.ascontiguousarray(v, dtype=np.float32).tobytes())
                    for h, v in vectors.items()
                ],
            )

    # ------------------------------------------------------------------ LLM log, cache and batch protocol
    def log_llm_call(self, call: LLMCall) -> None:
        with self.transaction():
            # The log belongs to a space; calls made before any import (e.g. an evaluation judge) create it.
            self._exec("INSERT INTO spaces(name) VALUES (?) ON CONFLICT(name) DO NOTHING", (call.space,))
            self._exec(
                "INSERT INTO llm_calls(space, stage, model, request_hash, tokens_in, tokens_out, latency_ms, "
                "attempts, outcome, created_at, response, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    call.space,
                    call.stage,
                    call.model,
                    call.request_hash,
                    call.tokens_in,
                    call.tokens_out,
                    call.latency_ms,
                    call.attempts,
                    call.outcome,
                    _ts(call.created_at),
                    call.response,
                    call.error,
                ),
            )

    def cached_response(self, space: str, request_hash: str) -> str | None:
        rows = self._rows(
            "SELECT response FROM llm_calls WHERE space = ? AND request_hash = ? AND outcome IN ('ok', 'batch') "
            "AND response IS NOT NULL ORDER BY id DESC LIMIT 1",
            (space, request_hash),
        )
        return str(rows[0][0]) if rows else None

    def llm_calls(self, space: str | None = None) -> list[LLMCall]:
        sql = (
            "SELECT space, stage, model, request_hash, tokens_in, tokens_out, latency_ms, attempts, outcome, "
            "created_at, response, error FROM llm_calls"
        )
        rows = self._rows(sql + " WHERE space = ? ORDER BY id", (space,)) if space else self._rows(sql + " ORDER BY id")
        return [
            LLMCall(
                space=r[0],
                stage=r[1],
                model=r[2],
                request_hash=r[3],
                tokens_in=r[4],
                tokens_out=r[5],
                latency_ms=r[6],
                attempts=r[7],
                outcome=r[8],
                created_at=_dt(r[9]),
                response=r[10],
                error=r[11],
            )
            for r in rows
        ]

    def put_pending(self, requests: Sequence[PendingRequest]) -> None:
        with self.transaction():
            for space in {r.space for r in requests}:
                self._exec("INSERT INTO spaces(name) VALUES (?) ON CONFLICT(name) DO NOTHING", (space,))
            self._many(
                "INSERT INTO pending_requests(space, request_hash, stage, body) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(space, request_hash) DO UPDATE SET stage = excluded.stage, body = excluded.body",
                [(r.space, r.request_hash, r.stage, r.body) for r in requests],
            )

    def pending(self, space: str | None = None) -> list[PendingRequest]:
        sql = "SELECT space, request_hash, stage, body FROM pending_requests"
        rows = (
            self._rows(sql + " WHERE space = ? ORDER BY rowid", (space,))
            if space
            else self._rows(sql + " ORDER BY rowid")
        )
        return [PendingRequest(space=r[0], request_hash=r[1], stage=r[2], body=r[3]) for r in rows]

    def delete_pending(self, request_hashes: Sequence[str], *, space: str | None = None) -> None:
        where, scope = ("space = ? AND ", (space,)) if space is not None else ("", ())
        with self.transaction():
            for chunk in iter_batches(list(request_hashes), _CHUNK):
                self._exec(
                    f"DELETE FROM pending_requests WHERE {where}request_hash IN ({_placeholders(len(chunk))})",
                    (*scope, *chunk),
                )
