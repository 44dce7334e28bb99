"""Build checkpoints, the embedding cache, and the LLM log with its batch queue, once for both backends (each
method is documented in :class:`tmem.store.base.Store`)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from sqlalchemy import delete, select

from tmem.errors import StoreError
from tmem.models import LLMCall, PendingRequest
from tmem.scope import Scope
from tmem.store import mappers
from tmem.store.base import Vector
from tmem.store.ops_memory import MemoryOps
from tmem.store.rules import tenant_of
from tmem.store.schema import build_state, embeddings, llm_calls, pending_requests, spaces


class CacheOps(MemoryOps):
    # ------------------------------------------------------------------ build checkpoints
    def get_state(self, scope: Scope, key: str) -> str | None:
        rows = self._fetch(select(build_state.c.value).where(self._in(build_state, scope), build_state.c.key == key))
        return str(rows[0]["value"]) if rows else None

    def set_state(self, scope: Scope, key: str, value: str | None) -> None:
        with self.transaction():
            if value is None:
                self._run(delete(build_state).where(self._in(build_state, scope), build_state.c.key == key))
            else:
                self._upsert(
                    build_state, ("tenant", "space", "key"), self._scoped(scope, [{"key": key, "value": value}])
                )

    def state_keys(self, scope: Scope, prefix: str = "") -> dict[str, str]:
        query = select(build_state.c.key, build_state.c.value).where(
            self._in(build_state, scope), build_state.c.key.startswith(prefix, autoescape=True)
        )
        return dict(sorted((str(r["key"]), str(r["value"])) for r in self._fetch(query)))

    # ------------------------------------------------------------------ embeddings cache
    def get_embeddings(self, scope: Scope, model_id: str, text_hashes: Sequence[str]) -> dict[str, Vector]:
        out: dict[str, Vector] = {}
        cols = select(embeddings.c.text_hash, embeddings.c.dim, embeddings.c.vector)
        for chunk in self._chunks(text_hashes):
            query = cols.where(self._in(embeddings, scope), embeddings.c.model_id == model_id,
                               embeddings.c.text_hash.in_(chunk))  # fmt: skip
            for r in self._fetch(query, binary=True):  # binary: vectors arrive as raw float4s, not printed decimals
                vec = self._vector_value(r["vector"])
                if vec.shape[0] != r["dim"]:
                    raise StoreError(f"Corrupt embedding for {r['text_hash']} ({model_id}); delete it and rebuild.")
                out[r["text_hash"]] = vec
        return out

    def put_embeddings(self, scope: Scope, model_id: str, vectors: dict[str, Vector]) -> None:
        rows = [
            {"model_id": model_id, "text_hash": h, "dim": int(v.shape[0]), "vector": self._vector_param(v)}
            for h, v in vectors.items()
        ]
        with self.transaction():
            self._upsert(embeddings, ("tenant", "space", "model_id", "text_hash"), self._scoped(scope, rows))

    def delete_embeddings(self, scope: Scope, text_hashes: Sequence[str]) -> None:
        with self.transaction():
            for chunk in self._chunks(text_hashes):
                self._delete_in(embeddings, scope, embeddings.c.text_hash, chunk)

    # ------------------------------------------------------------------ LLM log, cache and batch protocol
    def _ensure_spaces(self, names: Sequence[str]) -> None:
        """Calls made before any import (an evaluation judge) create their space."""
        self._insert_new(spaces, [{"tenant": tenant_of(n), "name": n} for n in sorted(set(names))])

    def log_llm_call(self, call: LLMCall) -> None:
        with self.transaction():
            self._ensure_spaces([call.space])
            row = {"tenant": tenant_of(call.space), **mappers.llm_call_row(call)}
            self._run_many(llm_calls.insert().values(**self._identity(llm_calls, "id")), [row])

    def cached_response(self, scope: Scope, request_hash: str) -> str | None:
        query = (
            select(llm_calls.c.response)
            .where(self._in(llm_calls, scope), llm_calls.c.request_hash == request_hash)
            .where(llm_calls.c.outcome.in_(["ok", "batch"]), llm_calls.c.response.is_not(None))
            .order_by(llm_calls.c.id.desc())
            .limit(1)
        )
        rows = self._fetch(query)
        return str(rows[0]["response"]) if rows else None

    def llm_calls(self, scope: Scope | None = None) -> list[LLMCall]:
        query = select(llm_calls).order_by(llm_calls.c.id)
        if scope is not None:
            query = query.where(self._in(llm_calls, scope))
        return [mappers.llm_call(r) for r in self._fetch(query)]

    def delete_llm_responses(
        self, scope: Scope, *, containing: Sequence[str], stage_prefixes: Sequence[str] = ()
    ) -> int:
        needles: set[str] = set()
        for text in containing:
            if text.strip():
                needles |= {text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}
        deleted = 0
        with self.transaction():
            for needle in sorted(needles):
                deleted += self._run(delete(llm_calls).where(
                    self._in(llm_calls, scope), llm_calls.c.response.is_not(None),
                    llm_calls.c.response.contains(needle, autoescape=True),
                ))  # fmt: skip
            for prefix in stage_prefixes:
                deleted += self._run(delete(llm_calls).where(
                    self._in(llm_calls, scope), llm_calls.c.stage.startswith(prefix, autoescape=True)
                ))  # fmt: skip
        return deleted

    def put_pending(self, requests: Sequence[PendingRequest]) -> None:
        with self.transaction():
            self._ensure_spaces([r.space for r in requests])
            rows = [{"tenant": tenant_of(r.space), **mappers.pending_row(r)} for r in requests]
            if not rows:
                return
            stmt = self._insert(pending_requests).values(**self._identity(pending_requests, "seq"))
            update = {c: stmt.excluded[c] for c in ("stage", "body")}
            keys = [pending_requests.c.tenant, pending_requests.c.space, pending_requests.c.request_hash]
            self._run_many(stmt.on_conflict_do_update(index_elements=keys, set_=update), rows)

    def pending(self, scope: Scope | None = None) -> list[PendingRequest]:
        query = select(pending_requests).order_by(pending_requests.c.seq)
        if scope is not None:
            query = query.where(self._in(pending_requests, scope))
        return [mappers.pending(r) for r in self._fetch(query)]

    def delete_pending(self, request_hashes: Sequence[str], *, scope: Scope | None = None) -> None:
        with self.transaction():
            for chunk in self._chunks(request_hashes):
                query = delete(pending_requests).where(pending_requests.c.request_hash.in_(chunk))
                self._run(query.where(self._in(pending_requests, scope)) if scope is not None else query)
