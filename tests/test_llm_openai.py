"""The OpenAI backend + StructuredLLM against a real local OpenAI-compatible HTTP server (tests/support/openai_stub)."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator, Iterator

import openai
import pytest
from pydantic import BaseModel, Field

from tests.support.openai_stub import OpenAIStub, minimal_instance, request_schema
from tmem.errors import LLMError, LLMOutputError, LLMTransientError
from tmem.llm.base import Message
from tmem.llm.openai_backend import OpenAIBackend
from tmem.llm.service import StructuredLLM
from tmem.scope import Scope
from tmem.settings import Settings
from tmem.store.sqlite import SQLiteStore


class Person(BaseModel):
    name: str = Field(description="Full name as said in the conversation.")
    age: int | None = None


class Event(BaseModel):
    title: str
    people: list[Person]
    host: Person = Field(description="Who organised it.")


MESSAGES = [
    Message(role="system", content="Extract the event."),
    Message(role="user", content="Melanie hosted a picnic with Caroline on 8 May 2023."),
]
EVENT = Event(title="Picnic", people=[Person(name="Caroline")], host=Person(name="Melanie", age=None))


def event_reply(body: dict[str, object]) -> str:
    return EVENT.model_dump_json()


class SleepRecorder:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def store() -> Iterator[SQLiteStore]:
    s = SQLiteStore.open(":memory:")
    yield s
    s.close()


def make_settings(stub: OpenAIStub, **kw: object) -> Settings:
    base: dict[str, object] = {
        "llm": "openai",
        "llm_model": "stub-model",
        "llm_base_url": stub.base_url,
        "llm_api_key": "sk-test",
        "llm_backoff_base": 0.001,
        "llm_backoff_max": 0.01,
        "llm_timeout": 5.0,
    }
    base.update(kw)
    return Settings(**base)  # type: ignore[arg-type]


class Harness:
    def __init__(self, stub: OpenAIStub, store: SQLiteStore, **settings: object) -> None:
        self.stub = stub
        self.settings = make_settings(stub, **settings)
        self.sleep = SleepRecorder()
        self.backend = OpenAIBackend(self.settings, sleep=self.sleep, rng=random.Random(7))
        self.llm = StructuredLLM(self.backend, store, model="stub-model", settings=self.settings)

    async def ask(self, messages: list[Message] = MESSAGES) -> Event:
        result = await self.llm.complete(messages, Event, stage="items", space=Scope.local("conv"))
        return result.output


@pytest.fixture
async def harness(store: SQLiteStore) -> AsyncIterator[Harness]:
    with OpenAIStub(reply=event_reply) as stub:
        h = Harness(stub, store)
        yield h
        await h.llm.aclose()


async def test_request_shape_uses_strict_json_schema(harness: Harness) -> None:
    assert await harness.ask() == EVENT
    (req,) = harness.stub.chat_requests
    assert req.headers["authorization"] == "Bearer sk-test"
    body = req.body
    assert body["model"] == "stub-model" and body["temperature"] == 0.0
    assert body["messages"] == [{"role": m.role, "content": m.content} for m in MESSAGES]
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "Event" and fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["additionalProperties"] is False and schema["required"] == ["title", "people", "host"]
    # The described nested model is inlined (strict mode forbids $ref siblings) and made strict too.
    host = schema["properties"]["host"]
    assert host["description"] == "Who organised it." and host["additionalProperties"] is False
    assert host["required"] == ["name", "age"]
    assert schema["properties"]["people"]["items"] == {"$ref": "#/$defs/Person"}
    assert schema["$defs"]["Person"]["required"] == ["name", "age"]


async def test_usage_from_the_response_is_logged(harness: Harness, store: SQLiteStore) -> None:
    await harness.ask()
    (call,) = store.llm_calls(Scope.local("conv"))
    assert len(harness.stub.chat_requests) == 1
    assert call.outcome == "ok" and call.attempts == 1 and call.latency_ms > 0
    from tmem.util.text import count_tokens

    expected_in = sum(count_tokens(m.content) for m in MESSAGES)
    assert (call.tokens_in, call.tokens_out) == (expected_in, count_tokens(EVENT.model_dump_json()))
    assert call.tokens_in > 0 and call.tokens_out > 0


async def test_rerun_hits_the_cache_with_zero_new_requests(harness: Harness, store: SQLiteStore) -> None:
    first = await harness.ask()
    assert len(harness.stub.requests) == 1
    second = await harness.ask()
    assert second == first and len(harness.stub.requests) == 1
    assert [c.outcome for c in store.llm_calls(Scope.local("conv"))] == ["ok", "cached"]


async def test_429_with_retry_after_is_honoured(harness: Harness) -> None:
    harness.stub.add_faults("429:retry-after=0.25", "429:retry-after-ms=40", "ok")
    assert await harness.ask() == EVENT
    assert [r.status for r in harness.stub.chat_requests] == [429, 429, 200]
    assert harness.sleep.delays == [0.25, 0.04]


async def test_a_retry_after_beyond_ten_minutes_surfaces_at_once(harness: Harness) -> None:
    harness.stub.add_faults("429:retry-after=3600")
    with pytest.raises(LLMTransientError, match="asks to wait 3600s"):
        await harness.ask()
    assert len(harness.stub.requests) == 1 and harness.sleep.delays == []


async def test_5xx_drop_timeout_and_garbage_are_retried_with_jittered_backoff(store: SQLiteStore) -> None:
    with OpenAIStub(reply=event_reply, faults=["500", "503", "drop", "garbage", "delay=1.0"]) as stub:
        h = Harness(stub, store, llm_timeout=0.3, llm_max_retries=5, llm_backoff_base=0.01, llm_backoff_max=1.0)
        try:
            assert await h.ask() == EVENT
        finally:
            await h.llm.aclose()
    assert [r.fault for r in stub.chat_requests] == ["500", "503", "drop", "garbage", "delay=1.0", "ok"]
    # Full jitter: each delay lies in [0, min(max, base * 2**n)].
    assert len(h.sleep.delays) == 5
    for n, delay in enumerate(h.sleep.delays):
        assert 0.0 <= delay <= min(1.0, 0.01 * 2**n)


async def test_transient_errors_are_bounded(store: SQLiteStore) -> None:
    with OpenAIStub(reply=event_reply, faults=["500", "502", "503", "ok"]) as stub:
        h = Harness(stub, store, llm_max_retries=2)
        try:
            with pytest.raises(LLMTransientError, match=r"HTTP 503 .* after 2 retries.*TMEM_LLM_MAX_RETRIES"):
                await h.ask()
        finally:
            await h.llm.aclose()
    assert len(stub.chat_requests) == 3
    (call,) = store.llm_calls(Scope.local("conv"))
    assert call.outcome == "error" and call.error is not None and "503" in call.error


async def test_non_transient_4xx_is_not_retried_and_says_what_to_check(harness: Harness) -> None:
    harness.stub.add_faults("401")
    with pytest.raises(LLMError, match=r"HTTP 401.*OPENAI_API_KEY") as info:
        await harness.ask()
    assert not isinstance(info.value, LLMTransientError)
    assert len(harness.stub.requests) == 1 and harness.sleep.delays == []
    harness.stub.add_faults("404")
    with pytest.raises(LLMError, match=r"stub-model.*ends with /v1"):
        await harness.ask()


async def test_malformed_output_is_retried_and_fenced_output_repaired(harness: Harness) -> None:
    harness.stub.add_faults("malformed", "ok")
    assert await harness.ask() == EVENT
    retry = harness.stub.chat_requests[1].body["messages"]
    assert retry[-2]["role"] == "assistant" and retry[-1]["role"] == "user"
    assert "(root): Invalid JSON" in retry[-1]["content"]
    harness.stub.add_faults("fenced")
    other = [MESSAGES[0], Message(role="user", content="Another conversation.")]
    assert await harness.ask(other) == EVENT
    assert len(harness.stub.chat_requests) == 3  # the fenced reply was repaired locally: no extra request


async def test_output_retries_are_bounded(store: SQLiteStore) -> None:
    with OpenAIStub(reply=lambda body: '{"title": "x"}') as stub:
        h = Harness(stub, store, llm_output_retries=1)
        try:
            with pytest.raises(LLMOutputError, match=r"Stage items: model stub-model.*people: Field required"):
                await h.ask()
        finally:
            await h.llm.aclose()
    assert len(stub.chat_requests) == 2


async def test_falls_back_to_json_object_when_json_schema_is_rejected(store: SQLiteStore) -> None:
    with OpenAIStub(reply=event_reply, json_schema_supported=False) as stub:
        h = Harness(stub, store)
        try:
            assert await h.ask() == EVENT
            assert h.backend.json_mode == "json_object"
            await h.ask([MESSAGES[0], Message(role="user", content="Second request.")])
        finally:
            await h.llm.aclose()
    kinds = [(r.status, r.body["response_format"]["type"]) for r in stub.chat_requests]
    assert kinds == [(400, "json_schema"), (200, "json_object"), (200, "json_object")]
    system = stub.chat_requests[1].body["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Extract the event.")
    # The schema travels in the prompt in JSON mode, so the server (and a model) can follow it.
    schema = request_schema(stub.chat_requests[1].body)
    assert schema is not None and Event.model_validate(minimal_instance(schema, schema))


async def test_temperature_is_dropped_for_models_that_reject_it(store: SQLiteStore) -> None:
    with OpenAIStub(reply=event_reply, temperature_supported=False) as stub:
        h = Harness(stub, store)
        try:
            assert await h.ask() == EVENT
            await h.ask([MESSAGES[0], Message(role="user", content="Second request.")])
        finally:
            await h.llm.aclose()
    sent = [(r.status, "temperature" in r.body) for r in stub.chat_requests]
    assert sent == [(400, True), (200, False), (200, False)]


async def test_json_object_mode_from_settings(store: SQLiteStore) -> None:
    with OpenAIStub(reply=event_reply) as stub:
        h = Harness(stub, store, llm_json_mode="json_object")
        try:
            await h.ask()
        finally:
            await h.llm.aclose()
    (req,) = stub.chat_requests
    assert req.body["response_format"] == {"type": "json_object"}
    assert "JSON" in req.body["messages"][0]["content"]


async def test_concurrency_limit_against_the_server(store: SQLiteStore) -> None:
    with OpenAIStub(reply=event_reply, delay=0.05) as stub:
        h = Harness(stub, store, llm_concurrency=2)
        try:
            prompts = [[Message(role="user", content=f"conversation {i}")] for i in range(6)]
            await asyncio.gather(*(h.ask(p) for p in prompts))
        finally:
            await h.llm.aclose()
    assert len(stub.chat_requests) == 6 and stub.max_in_flight == 2


async def test_seeded_fault_rate_pipeline_completes(store: SQLiteStore) -> None:
    with OpenAIStub(reply=event_reply, fault_rate=0.4, seed=3) as stub:
        h = Harness(stub, store, llm_max_retries=8, llm_output_retries=4)
        try:
            prompts = [[Message(role="user", content=f"conversation {i}")] for i in range(8)]
            results = await asyncio.gather(*(h.ask(p) for p in prompts))
        finally:
            await h.llm.aclose()
    assert results == [EVENT] * 8
    faults = {r.fault for r in stub.chat_requests}
    assert faults - {"ok"}, "the seeded schedule injected no fault; pick another seed"
    assert len(store.llm_calls(Scope.local("conv"))) == 8


def test_stub_embeddings_are_deterministic_unit_vectors() -> None:
    async def embed(stub: OpenAIStub) -> list[list[float]]:
        client = openai.AsyncOpenAI(base_url=stub.base_url, api_key="k", max_retries=0)
        try:
            resp = await client.embeddings.create(model="stub-embed", input=["a cat", "a dog", "a cat"])
        finally:
            await client.close()
        return [d.embedding for d in resp.data]

    with OpenAIStub(embedding_dim=8) as stub:
        vectors = asyncio.run(embed(stub))
    assert len(vectors) == 3 and all(len(v) == 8 for v in vectors)
    assert vectors[0] == vectors[2] and vectors[0] != vectors[1]
    assert abs(sum(x * x for x in vectors[0]) - 1.0) < 1e-5
    assert json.loads(json.dumps(stub.embedding_requests[0].body))["model"] == "stub-embed"


def test_retry_after_header_forms() -> None:
    import httpx2

    from tmem.llm.openai_backend import _retry_after

    def error(headers: dict[str, str]) -> openai.RateLimitError:
        request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
        return openai.RateLimitError(
            "slow down", response=httpx2.Response(429, headers=headers, request=request), body=None
        )

    assert _retry_after(error({"retry-after-ms": "250", "retry-after": "9"})) == 0.25
    assert _retry_after(error({"retry-after": "2"})) == 2.0
    assert _retry_after(error({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0  # a date in the past
    assert _retry_after(error({"retry-after": "soon"})) is None
    assert _retry_after(error({})) is None
