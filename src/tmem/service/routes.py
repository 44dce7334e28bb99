"""Recall and one-memory-at-a-time routes: search, ask, items (list, get, edit, delete, history) and forget.

Every success response is a pydantic model (the library's own return types), so /openapi.json types every body."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from typing import Annotated, Any

from fastapi import FastAPI, Query

from tmem.answer import Answer
from tmem.answer.budget import Context
from tmem.edit import ForgetReport, ItemHistory
from tmem.edit.listing import MAX_PAGE, ItemPage
from tmem.errors import InputError, NotFoundError, SpaceNotFound
from tmem.models import Item, ItemKind
from tmem.retrieve.types import SearchResult
from tmem.service.deps import ItemId, SpaceName, State, Tenant, require_space, retrieval_config
from tmem.service.problems import ServiceProblem
from tmem.service.schemas import LAYOUT_DOC, MAX_QUERY, MAX_TOKENS, AskIn, ForgetIn, ItemPatch, SearchIn, Text


@contextmanager
def _item_hint(space: str, item_id: str) -> Iterator[None]:
    """A missing item answers a 404 rendered from the error's fields with the HTTP endpoint listing the space's
    items as its hint."""
    try:
        yield
    except SpaceNotFound:
        raise
    except NotFoundError as exc:
        kind, name = exc.kind or "item", exc.name or item_id
        raise ServiceProblem(
            404, "not-found", f"Space {space!r} has no {kind} {name!r}; GET /v1/spaces/{space}/items lists its items."
        ) from exc


WHERE_DOC = (
    'A filter as JSON: {"metadata": {"key": value or [values]}, "speaker": name or [names], "since": date, '
    '"until": date}; only memory from matching turns enters, before packing (docs/agents.md).'
)
METADATA_DOC = 'Source turns\' metadata as JSON, e.g. {"project": "alpha"} or {"project": ["alpha", "beta"]}.'


EXAMPLES = {"metadata": '{"project": "alpha"}', "layout": '{"excerpt_neighbours": true}'}


def json_object(value: str | None, name: str) -> dict[str, Any] | None:
    """A query parameter holding a JSON object (None when absent); anything else is a 422 saying what to send."""
    if value is None:
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        example = EXAMPLES.get(name, '{"metadata": {"project": "alpha"}}')
        raise InputError(f"Query parameter {name} must be a JSON object, e.g. {name}={example}.")
    return parsed


def register(app: FastAPI) -> None:
    @app.post("/v1/spaces/{space}/search", response_model=SearchResult, tags=["recall"])
    async def search(space: SpaceName, body: SearchIn, tenant: Tenant, state: State) -> dict[str, Any]:
        """Typed scene, item and turn hits, personas, and whether the memory is stale (turns no build holds yet, which
        are searched as raw turns). With ``explain``, every hit keeps its routes: which lists reached it, its rank and
        score in each."""
        scope = await require_space(state, tenant, space)
        cfg = retrieval_config(body.config)
        result = await state.memory.search(scope, body.q, cfg, where=body.where)
        data: dict[str, Any] = result.model_dump(mode="json")
        if not body.explain:
            for hit in data["scenes"] + data["items"] + data["turns"]:
                hit["routes"] = []
        return data

    @app.get("/v1/spaces/{space}/context", response_model=Context, tags=["recall"])
    async def get_context(
        space: SpaceName,
        tenant: Tenant,
        state: State,
        q: Annotated[str, Query(min_length=1, max_length=MAX_QUERY, description="The query."), Text],
        max_tokens: Annotated[int, Query(ge=0, le=MAX_TOKENS, description="Token budget of the text.")] = 2000,
        preset: Annotated[str | None, Query(max_length=64, description="Retrieval preset (docs/retrieval.md).")] = None,
        where: Annotated[str | None, Query(max_length=MAX_QUERY, description=WHERE_DOC)] = None,
        layout: Annotated[str | None, Query(max_length=MAX_QUERY, description=LAYOUT_DOC)] = None,
    ) -> dict[str, Any]:
        """The text to hand a reader for ``q``: hits packed into at most ``max_tokens`` tokens, with their routes, the
        token count, and how many turns are not built yet; ``where`` filters before packing; ``layout`` lays the text
        out."""
        scope = await require_space(state, tenant, space)
        chosen, laid = json_object(where, "where"), json_object(layout, "layout")
        result = await state.memory.context(scope, q, max_tokens=max_tokens, config=preset, where=chosen, layout=laid)
        return result.model_dump(mode="json")

    @app.post("/v1/spaces/{space}/ask", response_model=Answer, tags=["recall"])
    async def ask(space: SpaceName, body: AskIn, tenant: Tenant, state: State) -> dict[str, Any]:
        """An answer from memory by the server's answer model (409 when the server runs without an LLM)."""
        scope = await require_space(state, tenant, space)
        cfg = retrieval_config(body.config)  # a bad request is a 422 on every server
        if state.settings.llm == "none" and not state.settings.answer_model:
            raise ServiceProblem(
                409,
                "llm-not-configured",
                "This server runs without an LLM (extractive mode), and answering needs one: start it with "
                "TMEM_LLM=openai, TMEM_LLM_MODEL and OPENAI_BASE_URL, or use /search instead.",
            )
        answer = await state.memory.ask(
            scope,
            body.question,
            body.at,
            variant=body.variant,
            config=cfg,
            max_tokens=body.max_tokens,
            layout=body.layout,
        )
        return answer.model_dump(mode="json")

    @app.get("/v1/spaces/{space}/items", response_model=ItemPage, tags=["items"])
    async def list_items(
        space: SpaceName,
        tenant: Tenant,
        state: State,
        kind: Annotated[ItemKind | None, Query(description="atomic or connected.")] = None,
        speaker: Annotated[str | None, Query(max_length=200, description="The item's speaker, exactly.")] = None,
        since: Annotated[date | None, Query(description="Items whose period ends on or after this day.")] = None,
        until: Annotated[date | None, Query(description="Items whose period starts on or before this day.")] = None,
        text: Annotated[
            str | None, Query(max_length=MAX_QUERY, description="Substring of the text (any case), or an item id.")
        ] = None,
        live: Annotated[bool, Query(description="Leave out items a newer item superseded.")] = False,
        metadata: Annotated[str | None, Query(max_length=MAX_QUERY, description=METADATA_DOC)] = None,
        offset: Annotated[int, Query(ge=0, le=10_000_000, description="How many matches to skip.")] = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="Page size.")] = 50,
    ) -> dict[str, Any]:
        """One page of the space's items in arrival order; every filter given must hold. ``total`` counts every
        match and ``next_offset`` is the next page's offset (null on the last page)."""
        scope = await require_space(state, tenant, space)
        page = await state.memory.list_items(
            scope,
            kind=kind,
            speaker=speaker,
            since=since,
            until=until,
            text=text,
            live=live,
            metadata=json_object(metadata, "metadata"),
            offset=offset,
            limit=limit,
        )
        return page.model_dump(mode="json")

    @app.get("/v1/spaces/{space}/items/{item_id}", response_model=Item, tags=["items"])
    async def get_item(space: SpaceName, item_id: ItemId, tenant: Tenant, state: State) -> Item:
        scope = await require_space(state, tenant, space)
        with _item_hint(space, item_id):
            return await state.memory.get_item(scope, item_id)

    @app.patch("/v1/spaces/{space}/items/{item_id}", response_model=Item, tags=["items"])
    async def update_item(space: SpaceName, item_id: ItemId, body: ItemPatch, tenant: Tenant, state: State) -> Item:
        """New text for one item: its triggers are regenerated; the old text stays in its history."""
        scope = await require_space(state, tenant, space)
        with _item_hint(space, item_id):
            return await state.memory.update_item(scope, item_id, body.text)

    @app.delete("/v1/spaces/{space}/items/{item_id}", response_model=ForgetReport, tags=["items"])
    async def delete_item(space: SpaceName, item_id: ItemId, tenant: Tenant, state: State) -> dict[str, Any]:
        """Delete one item for good (tombstoned: no rebuild brings it back; its text is erased)."""
        scope = await require_space(state, tenant, space)
        with _item_hint(space, item_id):
            report = await state.memory.delete_item(scope, item_id)
        return report.model_dump(mode="json")

    @app.get("/v1/spaces/{space}/items/{item_id}/history", response_model=ItemHistory, tags=["items"])
    async def item_history(space: SpaceName, item_id: ItemId, tenant: Tenant, state: State) -> ItemHistory:
        """The item's versions (extracted, then each edit, with times) and its supersession chain."""
        scope = await require_space(state, tenant, space)
        with _item_hint(space, item_id):
            return await state.memory.history(scope, item_id)

    @app.post("/v1/spaces/{space}/forget", response_model=ForgetReport, tags=["items"])
    async def forget(space: SpaceName, body: ForgetIn, tenant: Tenant, state: State) -> dict[str, Any]:
        """Forget turns and items: tombstoned, removed from every derived record, erased from the database files."""
        scope = await require_space(state, tenant, space)
        report = await state.memory.forget(scope, turn_ids=body.turn_ids, item_ids=body.item_ids)
        return report.model_dump(mode="json")
