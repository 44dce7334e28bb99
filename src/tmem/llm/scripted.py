"""A scripted chat backend: the LLM test double that ships with the library.

Replies come from a queue (consumed in order) or from a function of the request; every request is recorded in
``.requests``. A scripted reply is test scaffolding, never a statement about model quality.

    llm = scripted_llm(store, replies=[{"title": "Moving day", "summary": "..."}])
    result = await llm.complete(messages, SceneOut, stage="segment", space=Scope.local("conv-26"))
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

from tmem.errors import LLMError
from tmem.llm.base import ChatReply, ChatRequest, Usage
from tmem.llm.service import StructuredLLM
from tmem.settings import Settings
from tmem.store.base import Store
from tmem.util.text import count_tokens

Reply = str | dict[str, Any] | BaseModel
ReplyFn = Callable[[ChatRequest], Reply]


class ScriptedBackend:
    """A :class:`tmem.llm.base.ChatBackend` answering from ``replies`` (in order) and then from ``fn``.

    Usage is reported with :func:`tmem.util.text.count_tokens` over the messages and the reply, so cost reports built
    on scripted runs show plausible, deterministic token counts.
    """

    def __init__(self, replies: Sequence[Reply] | None = None, fn: ReplyFn | None = None) -> None:
        self._queue: deque[Reply] = deque(replies or ())
        self._fn = fn
        self.requests: list[ChatRequest] = []

    @property
    def remaining(self) -> int:
        """Queued replies not consumed yet."""
        return len(self._queue)

    def add(self, *replies: Reply) -> None:
        self._queue.extend(replies)

    async def chat(self, request: ChatRequest) -> ChatReply:
        self.requests.append(request)
        if self._queue:
            reply = self._queue.popleft()
        elif self._fn is not None:
            reply = self._fn(request)
        else:
            raise LLMError(
                f"ScriptedBackend has no reply left for request {len(self.requests)} (stage "
                f"{request.stage or '?'}, schema {request.schema_name}): queue more replies or pass fn=."
            )
        text = _as_text(reply)
        tokens_in = sum(count_tokens(m.content) for m in request.messages)
        return ChatReply(
            text=text,
            usage=Usage(input_tokens=tokens_in, output_tokens=count_tokens(text)),
            model=request.model,
        )


def _as_text(reply: Reply) -> str:
    if isinstance(reply, str):
        return reply
    if isinstance(reply, BaseModel):
        return reply.model_dump_json()
    return json.dumps(reply, ensure_ascii=False)


def scripted_llm(
    store: Store,
    replies: Sequence[Reply] | None = None,
    fn: ReplyFn | None = None,
    *,
    model: str = "scripted",
    settings: Settings | None = None,
    batch: bool = False,
) -> StructuredLLM:
    """A :class:`StructuredLLM` over a :class:`ScriptedBackend` (reach it as ``llm.backend``)."""
    return StructuredLLM(
        ScriptedBackend(replies, fn),
        store,
        model=model,
        settings=settings or Settings(llm="openai", llm_model=model),
        batch=batch,
    )
