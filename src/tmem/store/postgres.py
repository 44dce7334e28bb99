"""PostgreSQL (+ pgvector) implementation of :class:`tmem.store.base.Store`, for many users and many processes.

Open with :meth:`PostgresStore.open` (or ``open_store("postgresql://...")``). Connections come from a psycopg pool;
transactions pin one connection per thread (:mod:`tmem.store.pg_base`). The schema (:mod:`tmem.store.pg_schema`)
keys every table by (tenant, space). Embeddings are pgvector ``vector`` values; the memory records are in
:mod:`tmem.store.pg_records`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

from tmem.errors import StoreError
from tmem.models import LLMCall, PendingRequest, Session, Space, SpaceSummary, Turn
from tmem.store.base import Vector
from tmem.store.pg_agent import PgAgentOps
from tmem.store.pg_base import pg_store_error
from tmem.store.rules import build_state, check_session_turns, check_space_name, missing_space
from tmem.util.state import STATE_MODE, STATE_TURN_SEQ

_SCOPE = "tenant = %s AND space = %s"
_CALL_COLS = (
    "space, stage, model, request_hash, tokens_in, tokens_out, latency_ms, attempts, outcome, created_at, "
    "response, error"
)


class PostgresStore(PgAgentOps):
    """The server store. ``max_size`` bounds the pool (connections this process may hold at once)."""

    @classmethod
    def open(cls, url: str, *, max_size: int = 8, timeout_s: float = 30.0) -> PostgresStore:
        return cls(cls.connect(url, max_size=max_size, timeout_s=timeout_s), url)

    # ------------------------------------------------------------------ spaces
    def _add_space(self, name: str) -> None:
        self._exec(
            "INSERT INTO spaces(tenant, name) VALUES (%s, %s) ON CONFLICT (tenant, name) DO NOTHING", self._key(name)
        )

    def ensure_space(self, name: str) -> Space:
        check_space_name(name)
        self._add_space(name)
        return self.get_space(name)

    def get_space(self, name: str) -> Space:
        rows = self._rows("SELECT name, speakers FROM spaces WHERE tenant = %s AND name = %s", self._key(name))
        if not rows:
            known = [r[0] for r in self._rows("SELECT name FROM spaces WHERE tenant = %s", (self._key(name)[0],))]
            raise missing_space(name, known)
        return Space(name=rows[0][0], speakers=json.loads(rows[0][1]))

    def has_space(self, name: str) -> bool:
        return bool(self._rows("SELECT 1 FROM spaces WHERE tenant = %s AND name = %s", self._key(name)))

    def set_speakers(self, space: str, speakers: Sequence[str]) -> None:
        self.get_space(space)
        self._exec(
            "UPDATE spaces SET speakers = %s WHERE tenant = %s AND name = %s",
            (json.dumps(list(speakers)), *self._key(space)),
        )

    def list_spaces(self) -> list[SpaceSummary]:
        rows = self._rows(
            "SELECT s.name, "
            "(SELECT COUNT(*) FROM sessions x WHERE x.tenant = s.tenant AND x.space = s.name), "
            "(SELECT COUNT(*) FROM turns t WHERE t.tenant = s.tenant AND t.space = s.name), "
            '(SELECT MIN(t.time COLLATE "C") FROM turns t WHERE t.tenant = s.tenant AND t.space = s.name), '
            '(SELECT MAX(t.time COLLATE "C") FROM turns t WHERE t.tenant = s.tenant AND t.space = s.name) '
            "FROM spaces s"
        )
        out: list[SpaceSummary] = []
        for name, n_sessions, n_turns, first, last in sorted(rows):
            state = self.state_keys(name, "build.")
            appended = self.count_turns_after(name, int(state[STATE_TURN_SEQ])) if STATE_TURN_SEQ in state else 0
            out.append(
                SpaceSummary(
                    name=name,
                    sessions=n_sessions,
                    turns=n_turns,
                    first_date=first,
                    last_date=last,
                    build_state=build_state(n_sessions, state, appended_turns=appended),
                    build_mode=state.get(STATE_MODE),
                )
            )
        return out

    def delete_space(self, name: str) -> None:
        self.get_space(name)
        with self.transaction():
            # Every table cascades from spaces; the link tables go first so the cascade has less to check.
            for table in ("scene_turns", "topic_scenes", "item_scenes", "trigger_views"):
                self._exec(f"DELETE FROM {table} WHERE {_SCOPE}", self._key(name))
            self._exec("DELETE FROM spaces WHERE tenant = %s AND name = %s", self._key(name))

    def scrub(self, *, vacuum: bool = True) -> bool:
        """The erasure primitive on PostgreSQL: ``VACUUM`` of tmem's tables, so deleted rows' dead tuples are pruned
        from their pages (``vacuum`` is accepted for the protocol; ``VACUUM FULL``, which would also rewrite the
        files, takes an exclusive lock on a shared server and is left to maintenance). False when another
        connection still holds a snapshot taken before the latest pending erasure of the ledger committed (VACUUM
        keeps the rows it may read): run it again later (``tmem.edit.erasure`` does); snapshots taken after it do not
        count, so a busy server's searches do not hold an erasure up. The server's WAL, replicas and backups keep older data
        until they rotate: see docs/scaling.md, "Erasure on PostgreSQL"."""
        del vacuum
        if self._pinned() is not None:
            raise StoreError("scrub() cannot run inside a transaction: call it after the deletion has committed.")
        tables = [r[0] for r in self._rows("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
        with self._pool.connection() as conn:
            conn.autocommit = True  # VACUUM cannot run inside a transaction block
            try:
                for table in tables:
                    conn.execute(f'VACUUM "{table}"')
                # VACUUM keeps every dead row that an open snapshot may still read: when another session's oldest
                # snapshot (backend_xmin) is not newer than the latest pending erasure's deleting transaction, the
                # deleted rows may have been kept, so the erasure is reported pending and retried (tmem.edit.erasure).
                # Sessions whose snapshots began after the deletion committed do not hold it up.
                row = conn.execute(
                    "SELECT COUNT(*) FROM pg_stat_activity a, "
                    "(SELECT MAX(xid) AS d FROM erasures WHERE NOT erased) e "
                    "WHERE e.d IS NOT NULL AND a.datname = current_database() AND a.pid <> pg_backend_pid() "
                    "AND a.backend_xmin IS NOT NULL AND age(a.backend_xmin) >= age(((e.d % 4294967296)::text)::xid)"
                ).fetchone()
            except psycopg.Error as exc:
                raise pg_store_error(exc, self._where, "vacuuming deleted rows away") from exc
            finally:
                conn.autocommit = False
        return not (row and row[0])

    # ------------------------------------------------------------------ sessions and turns
    def add_session(self, space: str, session: Session, turns: Sequence[Turn]) -> None:
        check_session_turns(session, turns)
        self.get_space(space)
        key = self._key(space)
        with self.transaction():
            self._exec(
                "INSERT INTO sessions(tenant, space, id, seq, started_at, content_hash) VALUES (%s, %s, %s, %s, %s, %s)",
                (*key, session.id, session.seq, session.started_at.isoformat(), session.content_hash),
            )
            self._many(
                "INSERT INTO turns(tenant, space, id, session_id, seq, speaker, text, time, caption, metadata) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    (
                        *key,
                        t.id,
                        t.session_id,
                        t.seq,
                        t.speaker,
                        t.text,
                        t.time.isoformat(),
                        t.caption,
                        json.dumps(t.metadata, ensure_ascii=False),
                    )
                    for t in turns
                ],
            )

    def sessions(self, space: str) -> list[Session]:
        rows = self._rows(
            f"SELECT id, seq, started_at, content_hash FROM sessions WHERE {_SCOPE} ORDER BY seq", self._key(space)
        )
        return [Session(id=r[0], seq=r[1], started_at=r[2], content_hash=r[3]) for r in rows]

    # ------------------------------------------------------------------ build checkpoints
    def get_state(self, space: str, key: str) -> str | None:
        rows = self._rows(f"SELECT value FROM build_state WHERE {_SCOPE} AND key = %s", (*self._key(space), key))
        return str(rows[0][0]) if rows else None

    def set_state(self, space: str, key: str, value: str | None) -> None:
        if value is None:
            self._exec(f"DELETE FROM build_state WHERE {_SCOPE} AND key = %s", (*self._key(space), key))
            return
        self._exec(
            "INSERT INTO build_state(tenant, space, key, value) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (tenant, space, key) DO UPDATE SET value = excluded.value",
            (*self._key(space), key, value),
        )

    def state_keys(self, space: str, prefix: str = "") -> dict[str, str]:
        rows = self._rows(
            f"SELECT key, value FROM build_state WHERE {_SCOPE} AND starts_with(key, %s)", (*self._key(space), prefix)
        )
        return dict(sorted((str(k), str(v)) for k, v in rows))

    # ------------------------------------------------------------------ embeddings cache
    def get_embeddings(self, space: str, model_id: str, text_hashes: Sequence[str]) -> dict[str, Vector]:
        out: dict[str, Vector] = {}
        rows = self._rows(
            f"SELECT text_hash, dim, vector FROM embeddings WHERE {_SCOPE} AND model_id = %s AND text_hash = ANY(%s)",
            (*self._key(space), model_id, list(dict.fromkeys(text_hashes))),
            binary=True,  # parsing 384 printed decimals per vector cost most of a cold load's time
        )
        for text_hash, dim, vec in rows:
            if vec.shape[0] != dim:
                raise StoreError(f"Corrupt embedding for {text_hash} ({model_id}); delete it and rebuild.")
            out[text_hash] = vec
        return out

    def put_embeddings(self, space: str, model_id: str, vectors: dict[str, Vector]) -> None:
        with self.transaction():
            self._many(
                "INSERT INTO embeddings(tenant, space, model_id, text_hash, dim, vector) "
                "VALUES (%s, %s, %s, %s, %s, %b) ON CONFLICT (tenant, space, model_id, text_hash) "
                "DO UPDATE SET dim = excluded.dim, vector = excluded.vector",
                [
                    (*self._key(space), model_id, h, int(v.shape[0]), np.asarray(v, np.float32))
                    for h, v in vectors.items()
                ],
            )

    # ------------------------------------------------------------------ LLM log, cache and batch protocol
    def log_llm_call(self, call: LLMCall) -> None:
        with self.transaction():
            self._add_space(call.space)  # calls made before any import (an evaluation judge) create their space
            self._exec(
                f"INSERT INTO llm_calls(tenant, {_CALL_COLS}) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    self._key(call.space)[0],
                    call.space,
                    call.stage,
                    call.model,
                    call.request_hash,
                    call.tokens_in,
                    call.tokens_out,
                    call.latency_ms,
                    call.attempts,
                    call.outcome,
                    call.created_at.isoformat(),
                    call.response,
                    call.error,
                ),
            )

    def cached_response(self, space: str, request_hash: str) -> str | None:
        rows = self._rows(
            f"SELECT response FROM llm_calls WHERE {_SCOPE} AND request_hash = %s AND outcome IN ('ok', 'batch') "
            "AND response IS NOT NULL ORDER BY id DESC LIMIT 1",
            (*self._key(space), request_hash),
        )
        return str(rows[0][0]) if rows else None

    def llm_calls(self, space: str | None = None) -> list[LLMCall]:
        sql = f"SELECT {_CALL_COLS} FROM llm_calls"
        params: tuple[Any, ...] = ()
        if space:
            sql, params = sql + f" WHERE {_SCOPE}", self._key(space)
        rows = self._rows(sql + " ORDER BY id", params)
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
                created_at=r[9],
                response=r[10],
                error=r[11],
            )
            for r in rows
        ]

    def put_pending(self, requests: Sequence[PendingRequest]) -> None:
        with self.transaction():
            for space in sorted({r.space for r in requests}):
                self._add_space(space)
            self._many(
                "INSERT INTO pending_requests(tenant, space, request_hash, stage, body) VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (tenant, space, request_hash) DO UPDATE SET stage = excluded.stage, body = excluded.body",
                [(*self._key(r.space), r.request_hash, r.stage, r.body) for r in requests],
            )

    def pending(self, space: str | None = None) -> list[PendingRequest]:
        sql = "SELECT space, request_hash, stage, body FROM pending_requests"
        params: tuple[Any, ...] = ()
        if space:
            sql, params = sql + f" WHERE {_SCOPE}", self._key(space)
        rows = self._rows(sql + " ORDER BY seq", params)
        return [PendingRequest(space=r[0], request_hash=r[1], stage=r[2], body=r[3]) for r in rows]

    def delete_pending(self, request_hashes: Sequence[str], *, space: str | None = None) -> None:
        hashes = list(request_hashes)
        if space is not None:
            self._exec(
                f"DELETE FROM pending_requests WHERE {_SCOPE} AND request_hash = ANY(%s)", (*self._key(space), hashes)
            )
        else:
            self._exec("DELETE FROM pending_requests WHERE request_hash = ANY(%s)", (hashes,))
