"""tmem in the OpenAI Agents SDK (``pip install 'tmem[openai-agents]'``; docs/integrations.md).

* :class:`TmemSession`: the SDK's session protocol. The history the SDK replays (every item, tool calls included)
  is kept by the SDK session it wraps (by default the SDK's ``SQLiteSession`` in memory); every user and assistant
  message added to it also becomes a turn of the tmem space (stored with the assistant's reply), so long-term memory
  grows from the same conversation.
* :func:`memory_tools`: function tools ``recall``, ``remember``, ``forget`` and ``lookup``.
* :func:`memory_instructions`: dynamic instructions that put tmem's context for the run's latest user message after
  the agent's own instructions.

Every call is async and goes through :class:`tmem.integrations.core.MemoryLink`: an AsyncMemory or AsyncClient is
awaited, a Memory or Client runs in a worker thread, so the run's loop never waits on tmem.
"""

from __future__ import annotations

from tmem.util.extras import require_extra

require_extra("openai-agents", "tmem.integrations.openai_agents")

import uuid  # noqa: E402  (after the extra's check, as every extra's module does)
from collections.abc import Awaitable, Callable, Mapping, Sequence  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from typing import Any  # noqa: E402

from agents import Agent, FunctionTool, RunContextWrapper, SQLiteSession, function_tool  # noqa: E402
from agents.items import TResponseInputItem  # noqa: E402
from agents.memory import Session, SessionSettings  # noqa: E402
from agents.tool import default_tool_error_function  # noqa: E402

from tmem.answer.budget import DEFAULT_CONTEXT_TOKENS  # noqa: E402
from tmem.integrations.core import (  # noqa: E402
    FORGET_DOC,
    LOOKUP_DOC,
    RECALL_DOC,
    REMEMBER_DOC,
    Backend,
    MemoryLink,
    context_block,
    tool_error,
)

SESSION_KEY = "agents_session"  # the metadata naming the SDK session a turn came from
Instructions = Callable[[RunContextWrapper[Any], Agent[Any]], Awaitable[str]]


def message_text(item: Mapping[str, Any]) -> tuple[str, str] | None:
    """(role, text) of a user or assistant message item, else None (tool calls, their outputs, reasoning...)."""
    role = item.get("role")
    if role not in ("user", "assistant") or item.get("type", "message") != "message":
        return None
    content = item.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "\n".join(str(p["text"]) for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    else:
        return None
    return (str(role), text) if text.strip() else None


class TmemSession(Session):
    """The SDK session ``session_id`` whose messages also become turns of space ``space`` of ``memory``.

    ``history``: the SDK session that keeps the exact items (default: ``SQLiteSession(session_id)`` in memory; pass
    a file-backed one to keep the history across processes). ``pop_item`` forgets the popped message's turn too (a
    retracted message leaves memory); ``clear_session`` clears the history only: what memory learnt stays (forget
    it with the ``forget`` tool or :meth:`tmem.Memory.forget`)."""

    def __init__(
        self,
        memory: Backend,
        space: str,
        session_id: str | None = None,
        *,
        history: Session | None = None,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.link = MemoryLink(memory, space)
        self.session_id = session_id or f"tmem-{uuid.uuid4().hex[:12]}"
        self.history = history or SQLiteSession(self.session_id)
        self.session_settings = session_settings
        self.pending: list[dict[str, object]] = []  # messages added since the assistant's last reply

    def _turn(self, item: TResponseInputItem) -> dict[str, object] | None:
        said = message_text(item)
        if said is None:
            return None
        role, text = said
        when = datetime.now(UTC).replace(tzinfo=None).isoformat()  # when it arrived (tmem dates turns by it)
        meta = {SESSION_KEY: self.session_id}
        return {"id": f"agents-{uuid.uuid4().hex}", "speaker": role, "text": text, "time": when, "metadata": meta}

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        return await self.history.get_items(limit)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Add to the history; the messages reach memory with the assistant's reply, so the instructions of a run
        recall what memory held before it (not the run's own input, which the model reads anyway)."""
        await self.history.add_items(items)
        self.pending += [t for t in map(self._turn, items) if t is not None]
        if any(t["speaker"] == "assistant" for t in self.pending):
            await self.flush()

    async def flush(self) -> None:
        """Store the messages added since the last reply (a run that ended without one leaves them pending)."""
        if self.pending:
            turns, self.pending = self.pending, []
            await self.link.aremember(turns)

    async def pop_item(self) -> TResponseInputItem | None:
        item = await self.history.pop_item()
        said = message_text(item) if item is not None else None
        if said is None:
            return item
        role, text = said
        waiting = [n for n, t in enumerate(self.pending) if (t["speaker"], t["text"]) == (role, text)]
        if waiting:
            del self.pending[waiting[-1]]
            return item
        speaker = self.link.speaker(role)
        mine = [
            t
            for t in await self.link.aturns()
            if t.metadata.get(SESSION_KEY) == self.session_id and (t.speaker, t.text) == (speaker, text)
        ]
        if mine:
            await self.link.aforget([mine[-1].id])
        return item

    async def clear_session(self) -> None:
        await self.history.clear_session()


def memory_tools(memory: Backend, space: str, *, max_tokens: int = DEFAULT_CONTEXT_TOKENS) -> list[FunctionTool]:
    """The function tools ``recall``, ``remember``, ``forget`` and ``lookup`` over space ``space`` of ``memory``."""
    link = MemoryLink(memory, space, max_tokens=max_tokens)

    async def recall(query: str) -> str:
        return await link.recall_tool(query)

    async def remember(text: str) -> str:
        return await link.remember_tool(text)

    async def forget(turn_ids: list[str], item_ids: list[str]) -> str:
        return await link.forget_tool(turn_ids, item_ids)

    async def lookup(item_id: str) -> str:
        return await link.lookup_tool(item_id)

    def failed(context: RunContextWrapper[Any], error: Exception) -> str:
        """tmem's errors say what to fix (an unknown id, an empty query): the model reads them; others stay hidden,
        as the SDK's default does."""
        return tool_error(error) or default_tool_error_function(context, error)

    return [
        function_tool(recall, description_override=RECALL_DOC, failure_error_function=failed),
        function_tool(remember, description_override=REMEMBER_DOC, failure_error_function=failed),
        function_tool(forget, description_override=FORGET_DOC, failure_error_function=failed),
        function_tool(lookup, description_override=LOOKUP_DOC, failure_error_function=failed),
    ]


def latest_user_text(items: Sequence[Any]) -> str | None:
    """The text of the latest user message among ``items``."""
    for item in reversed(items):
        said = message_text(item) if isinstance(item, Mapping) else None
        if said is not None and said[0] == "user":
            return said[1]
    return None


def memory_instructions(
    memory: Backend, space: str, instructions: str = "", *, max_tokens: int = DEFAULT_CONTEXT_TOKENS
) -> Instructions:
    """Dynamic instructions for ``Agent(instructions=...)``: ``instructions``, then tmem's context for the run's
    latest user message (nothing more when memory holds nothing for it)."""
    link = MemoryLink(memory, space, max_tokens=max_tokens)

    async def dynamic(context: RunContextWrapper[Any], agent: Agent[Any]) -> str:
        query = latest_user_text(context.turn_input)
        block = context_block(await link.arecall(query)) if query else ""
        return "\n\n".join(part for part in (instructions, block) if part)

    return dynamic
