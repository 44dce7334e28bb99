"""The LLM boundary: one small async interface.

``LLM.complete(messages, output_model, stage=..., space=...)`` returns a validated pydantic instance plus usage.
Implementations (see :mod:`tmem.llm.service`) hash the request, answer from the space's call log when cached, call a
:class:`ChatBackend` otherwise, validate, repair and retry, and log every call.

A :class:`ChatBackend` is the raw transport: the OpenAI-compatible client in production, the scripted backend in
tests. It returns text; it never validates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict

from tmem.scope import Scope

T = TypeVar("T", bound=BaseModel)


class Message(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


class Usage(BaseModel):
    model_config = ConfigDict(frozen=True)

    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class LLMResult(Generic[T]):
    output: T
    usage: Usage
    model: str
    request_hash: str
    cached: bool
    attempts: int


class LLM(Protocol):
    """What every stage that needs a model depends on."""

    @property
    def model(self) -> str: ...

    async def complete(
        self,
        messages: list[Message],
        output_model: type[T],
        *,
        stage: str,
        space: Scope,
        temperature: float = 0.0,
    ) -> LLMResult[T]: ...


@dataclass(frozen=True)
class ChatRequest:
    """What a backend is asked: messages plus the JSON schema the reply must follow."""

    model: str
    messages: list[Message]
    schema_name: str
    json_schema: dict[str, Any]
    temperature: float = 0.0
    stage: str = ""
    strict: bool = True  # False when the schema has free-form maps that strict json_schema cannot express


@dataclass(frozen=True)
class ChatReply:
    text: str
    usage: Usage
    model: str


class ChatBackend(Protocol):
    async def chat(self, request: ChatRequest) -> ChatReply: ...


@runtime_checkable
class ClosableBackend(Protocol):
    """A backend holding connections; :meth:`tmem.llm.service.StructuredLLM.aclose` closes it."""

    async def aclose(self) -> None: ...
