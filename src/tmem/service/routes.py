"""Recall and one-memory-at-a-time routes: search, ask, items (get, edit, delete, history) and forget."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI, Query

from tmem.errors import NotFoundError
from tmem.service.deps import ItemId, SpaceName, State, Tenant, require_space, retrieval_config, shown
from tmem.service.problems import ServiceProblem
from tmem.service.schemas import MAX_QUERY, MAX_TOKENS, AskIn, ForgetIn, ItemPatch, SearchIn, Text


def register(app: FastAPI) -> None:
    @app.post("/v1/spaces/{space}/search", tags=["recall"])
    async def search(space: SpaceName, body: SearchIn, tenant: Tenant, state: State) -> dict[str, Any]:
        """Typed scene and item hits, personas, and whether the memory is stale (turns not built yet). With
        ``explain``, every hit keeps its routes: which lists reached it, its rank and score in each."""
        key = await require_space(state, tenant, space)
        cfg = retrieval_config(body.config, state.settings)
        try:
            result = await state.memory.search(key, body.q, cfg)
        except NotFoundError as exc:  # the space exists (checked above): what is missing is its memory
            raise ServiceProblem(409, "not-built", f"{exc} Over HTTP: POST /v1/spaces/{space}/build.") from exc
        data: dict[str, Any] = shown(result.model_dump(mode="json"), key, space)
        if not body.explain:
            for hit in data["scenes"] + data["items"]:
                hit["routes"] = []
        return data

    @app.get("/v1/spaces/{space}/context", tags=["recall"])
    async def context(
        space: SpaceName,
        tenant: Tenant,
        state: State,
        q: Annotated[str, Query(min_length=1, max_length=MAX_QUERY, description="The query."), Text],
        max_tokens: Annotated[int, Query(ge=0, le=MAX_TOKENS, description="Token budget of the text.")] = 2000,
        preset: Annotated[str | None, Query(max_length=64, description="Retrieval preset (docs/retrieval.md).")] = None,
    ) -> dict[str, Any]:
        """The text to hand a reader for ``q``: hits packed into at most ``max_tokens`` tokens, with their routes, the
        token count, and how many turns are not built yet."""
        key = await require_space(state, tenant, space)
        try:
            result = await state.memory.context(key, q, max_tokens=max_tokens, config=preset)
        except NotFoundError as exc:
            raise ServiceProblem(409, "not-built", f"{exc} Over HTTP: POST /v1/spaces/{space}/build.") from exc
        return dict(shown(result.model_dump(mode="json"), key, space))

    @app.post("/v1/spaces/{space}/ask", tags=["recall"])
    async def ask(space: SpaceName, body: AskIn, tenant: Tenant, state: State) -> dict[str, Any]:
        """An answer from memory by the server's answer model (409 when the server runs without an LLM)."""
        key = await require_space(state, tenant, space)
        cfg = retrieval_config(body.config, state.settings)  # a bad request is a 422 on every server
        if state.settings.llm == "none" and not state.settings.answer_model:
            raise ServiceProblem(
                409,
                "llm-not-configured",
                "This server runs without an LLM (extractive mode), and answering needs one: start it with "
                "TMEM_LLM=openai, TMEM_LLM_MODEL and OPENAI_BASE_URL, or use /search instead.",
            )
        try:
            answer = await state.memory.ask(key, body.question, body.at, variant=body.variant, config=cfg)
        except NotFoundError as exc:
            raise ServiceProblem(409, "not-built", f"{exc} Over HTTP: POST /v1/spaces/{space}/build.") from exc
        return dict(shown(answer.model_dump(mode="json"), key, space))

    @app.get("/v1/spaces/{space}/items/{item_id}", tags=["items"])
    async def get_item(space: SpaceName, item_id: ItemId, tenant: Tenant, state: State) -> dict[str, Any]:
        key = await require_space(state, tenant, space)
        item = await state.memory.get_item(key, item_id)
        return dict(item.model_dump(mode="json"))

    @app.patch("/v1/spaces/{space}/items/{item_id}", tags=["items"])
    async def update_item(
        space: SpaceName, item_id: ItemId, body: ItemPatch, tenant: Tenant, state: State
    ) -> dict[str, Any]:
        """New text for one item: its triggers are regenerated; the old text stays in its history."""
        key = await require_space(state, tenant, space)
        item = await state.memory.update_item(key, item_id, body.text)
        return dict(item.model_dump(mode="json"))

    @app.delete("/v1/spaces/{space}/items/{item_id}", tags=["items"])
    async def delete_item(space: SpaceName, item_id: ItemId, tenant: Tenant, state: State) -> dict[str, Any]:
        """Delete one item for good (tombstoned: no rebuild brings it back; its text is erased)."""
        key = await require_space(state, tenant, space)
        report = await state.memory.delete_item(key, item_id)
        return dict(shown(report.model_dump(mode="json"), key, space))

    @app.get("/v1/spaces/{space}/items/{item_id}/history", tags=["items"])
    async def item_history(space: SpaceName, item_id: ItemId, tenant: Tenant, state: State) -> dict[str, Any]:
        """The item's versions (extracted, then each edit, with times) and its supersession chain."""
        key = await require_space(state, tenant, space)
        history = await state.memory.history(key, item_id)
        return dict(history.model_dump(mode="json"))

    @app.post("/v1/spaces/{space}/forget", tags=["items"])
    async def forget(space: SpaceName, body: ForgetIn, tenant: Tenant, state: State) -> dict[str, Any]:
        """Forget turns and items: tombstoned, removed from every derived record, erased from the database files."""
        key = await require_space(state, tenant, space)
        report = await state.memory.forget(key, turn_ids=body.turn_ids, item_ids=body.item_ids)
        return dict(shown(report.model_dump(mode="json"), key, space))
