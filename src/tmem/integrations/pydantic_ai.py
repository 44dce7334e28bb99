"""tmem in pydantic-ai (``pip install 'tmem[pydantic-ai]'``; docs/integrations.md).

The agent's dependencies carry the memory and the space: :class:`TmemDeps` (or any dependencies with a ``tmem``
attribute holding one). Made from them:

* :func:`memory_toolset`: a ``FunctionToolset`` with the typed tools ``recall``, ``remember``, ``forget`` and
  ``lookup``, and the toolset's instructions: tmem's context for the run's prompt;
* :func:`memory_instructions`: those instructions alone (``Agent(instructions=[..., memory_instructions])``);
* :func:`remember_messages` / :func:`aremember_messages`: add a run's user prompts and text replies to memory
  (``result.new_messages()``).

Every call goes through :class:`tmem.integrations.core.MemoryLink`; the async ones never block the run's loop.
"""

from __future__ import annotations

from tmem.util.extras import require_extra

require_extra("pydantic-ai", "tmem.integrations.pydantic_ai")

from collections.abc import Awaitable, Sequence  # noqa: E402  (after the extra's check, as every extra's module does)
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

from pydantic_ai import ModelRetry, RunContext, Tool  # noqa: E402
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart  # noqa: E402
from pydantic_ai.toolsets import FunctionToolset  # noqa: E402

from tmem.answer.budget import DEFAULT_CONTEXT_TOKENS  # noqa: E402
from tmem.errors import ConfigError, TmemError  # noqa: E402
from tmem.ingest.messages import MessagesReport  # noqa: E402
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


@dataclass
class TmemDeps:
    """The memory (any tmem front end), the space of this agent's user, and the budget of a recalled context."""

    memory: Backend
    space: str
    max_tokens: int = DEFAULT_CONTEXT_TOKENS

    def link(self) -> MemoryLink:
        return MemoryLink(self.memory, self.space, max_tokens=self.max_tokens)


def link_of(deps: object) -> MemoryLink:
    """The memory link of a run's dependencies: a TmemDeps, or dependencies with a ``tmem`` attribute holding one."""
    found = deps if isinstance(deps, TmemDeps) else getattr(deps, "tmem", None)
    if not isinstance(found, TmemDeps):
        raise ConfigError(
            f"tmem's pydantic-ai tools need the agent's deps to be a TmemDeps or to have a .tmem TmemDeps; got "
            f"{type(deps).__name__}."
        )
    return found.link()


def _prompt_text(prompt: object) -> str | None:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        texts = [p for p in prompt if isinstance(p, str)]
        return "\n".join(texts) or None
    return None


async def memory_instructions(ctx: RunContext[Any]) -> str | None:
    """tmem's context for the run's prompt (None, so no instruction, when memory holds nothing for it)."""
    query = _prompt_text(ctx.prompt)
    if not query or not query.strip():
        return None
    return context_block(await link_of(ctx.deps).arecall(query)) or None


async def _tool(call: Awaitable[str]) -> str:
    """A tool's answer; a tmem error (it says what to fix) goes back to the model as a retry prompt."""
    try:
        return await call
    except TmemError as exc:
        raise ModelRetry(tool_error(exc) or str(exc)) from exc


async def recall(ctx: RunContext[Any], query: str) -> str:
    return await _tool(link_of(ctx.deps).recall_tool(query))


async def remember(ctx: RunContext[Any], text: str) -> str:
    return await _tool(link_of(ctx.deps).remember_tool(text))


async def forget(ctx: RunContext[Any], turn_ids: list[str], item_ids: list[str]) -> str:
    return await _tool(link_of(ctx.deps).forget_tool(turn_ids, item_ids))


async def lookup(ctx: RunContext[Any], item_id: str) -> str:
    return await _tool(link_of(ctx.deps).lookup_tool(item_id))


def memory_toolset(*, instructions: bool = True) -> FunctionToolset[Any]:
    """The tools ``recall``, ``remember``, ``forget``, ``lookup``; with ``instructions`` (default) the toolset also
    hands the model tmem's context for the run's prompt."""
    tools = [
        Tool(recall, takes_ctx=True, description=RECALL_DOC),
        Tool(remember, takes_ctx=True, description=REMEMBER_DOC),
        Tool(forget, takes_ctx=True, description=FORGET_DOC),
        Tool(lookup, takes_ctx=True, description=LOOKUP_DOC),
    ]
    return FunctionToolset(tools, id="tmem", instructions=memory_instructions if instructions else None)


def said(messages: Sequence[ModelMessage]) -> list[dict[str, object]]:
    """The user prompts and the model's text replies among ``messages``, as tmem messages (dated by the model's
    timestamps)."""
    out: list[dict[str, object]] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            parts = [(p.timestamp, _prompt_text(p.content)) for p in message.parts if isinstance(p, UserPromptPart)]
            out += [{"speaker": "user", "text": t, "time": when} for when, t in parts if t and t.strip()]
        elif isinstance(message, ModelResponse):
            text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
            if text.strip():
                out.append({"speaker": "assistant", "text": text, "time": message.timestamp})
    return out


def remember_messages(deps: object, messages: Sequence[ModelMessage]) -> MessagesReport | None:
    """Add a run's conversation (``result.new_messages()``) to memory; None when it said nothing."""
    given = said(messages)
    return link_of(deps).remember(given) if given else None


async def aremember_messages(deps: object, messages: Sequence[ModelMessage]) -> MessagesReport | None:
    given = said(messages)
    return await link_of(deps).aremember(given) if given else None
