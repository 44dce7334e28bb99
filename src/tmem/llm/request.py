"""Building a chat request: its cache hash and its exact OpenAI chat-completions body.

The body is shared by the live client (:mod:`tmem.llm.openai_backend`) and the batch protocol (:mod:`tmem.llm.batch`)
so that a request exported for the Batch API is byte-for-byte what the live client would have sent.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel

from tmem.llm.base import ChatRequest, Message
from tmem.llm.schema import strict_json_schema

JsonMode = Literal["json_schema", "json_object"]

# Appended to the system message in JSON mode (``response_format={"type": "json_object"}``): the server then only
# guarantees *some* JSON object, so the schema travels in the prompt. OpenAI also requires the word "JSON" in the
# messages for this mode.
_JSON_MODE_INSTRUCTION = (
    "Reply with one JSON object only, no prose and no code fences. It must validate against this JSON schema:\n{schema}"
)


def build_request(
    model: str,
    messages: list[Message],
    output_model: type[BaseModel],
    *,
    temperature: float = 0.0,
    stage: str = "",
) -> ChatRequest:
    strict = strict_json_schema(output_model)
    return ChatRequest(
        model=model,
        messages=list(messages),
        schema_name=strict.name,
        json_schema=strict.schema,
        temperature=temperature,
        stage=stage,
        strict=strict.strict,
    )


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def request_hash(request: ChatRequest) -> str:
    """sha256 of the canonical JSON of (model, messages, schema name + schema, temperature).

    Space and stage are deliberately left out: the same question asked of the same model is the same request.
    """
    payload = {
        "model": request.model,
        "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        "schema_name": request.schema_name,
        "json_schema": request.json_schema,
        "temperature": request.temperature,
    }
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def chat_body(request: ChatRequest, mode: JsonMode) -> dict[str, Any]:
    """The chat-completions request body (``model``, ``messages``, ``temperature``, ``response_format``)."""
    messages = [{"role": m.role, "content": m.content} for m in request.messages]
    response_format: dict[str, Any]
    if mode == "json_schema":
        response_format = {
            "type": "json_schema",
            "json_schema": {"name": request.schema_name, "schema": request.json_schema, "strict": request.strict},
        }
    else:
        response_format = {"type": "json_object"}
        instruction = _JSON_MODE_INSTRUCTION.format(schema=canonical_json(request.json_schema))
        if messages and messages[0]["role"] == "system":
            messages[0] = {"role": "system", "content": messages[0]["content"] + "\n\n" + instruction}
        else:
            messages.insert(0, {"role": "system", "content": instruction})
    return {
        "model": request.model,
        "messages": messages,
        "temperature": request.temperature,
        "response_format": response_format,
    }
