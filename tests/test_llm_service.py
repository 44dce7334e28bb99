"""StructuredLLM over the scripted backend: cache, validation, repair, retry, logging, batch mode, concurrency."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import datetime

import pytest
from pydantic import BaseModel, Field

from tmem.errors import BatchPending, ConfigError, LLMError, LLMOutputError
from tmem.llm.base import ChatReply, ChatRequest, Message, Usage
from tmem.llm.request import build_request, request_hash
from tmem.llm.scripted import ScriptedBackend, scripted_llm
from tmem.llm.service import StructuredLLM, make_llm, validate_reply
from tmem.models import LLMCall
from tmem.scope import Scope
from tmem.settings import Settings
from tmem.store.sqlite import SQLiteStore


class Fact(BaseModel):
    speaker: str
    text: str
    year: int = Field(ge=1900)


class Facts(BaseModel):
    facts: list[Fact]
    note: str | None = None


MESSAGES = [
    Message(role="system", content="Extract facts."),
    Message(role="user", content="Caroline: I moved in 2019."),
]
EPOCH = datetime(2000, 1, 1)  # bookkeeping time of hand-made log rows
GOOD = {"facts": [{"speaker": "Caroline", "text": "moved", "year": 2019}], "note": None}


@pytest.fixture
def store() -> Iterator[SQLiteStore]:
    s = SQLiteStore.open(":memory:")
    yield s
    s.close()


def settings(**kw: object) -> Settings:
    return Settings(llm="openai", llm_model="scripted", **kw)  # type: ignore[arg-type]


async def test_first_call_validates_and_logs_usage(store: SQLiteStore) -> None:
    llm = scripted_llm(store, replies=[GOOD])
    result = await llm.complete(MESSAGES, Facts, stage="items", space=Scope.local("s1"))
    assert result.output == Facts.model_validate(GOOD)
    assert not result.cached and result.attempts == 1
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    (call,) = store.llm_calls(Scope.local("s1"))
    assert call.outcome == "ok" and call.stage == "items" and call.model == "scripted"
    assert call.request_hash == result.request_hash
    assert (call.tokens_in, call.tokens_out) == (result.usage.input_tokens, result.usage.output_tokens)
    assert Facts.model_validate_json(call.response or "") == result.output


async def test_rerun_hits_cache_without_backend_call(store: SQLiteStore) -> None:
    llm = scripted_llm(store, replies=[GOOD])
    first = await llm.complete(MESSAGES, Facts, stage="items", space=Scope.local("s1"))
    again = await llm.complete(MESSAGES, Facts, stage="items", space=Scope.local("s1"))
    backend = llm.backend
    assert isinstance(backend, ScriptedBackend) and len(backend.requests) == 1
    assert again.cached and again.output == first.output and again.usage == Usage()
    outcomes = [(c.outcome, c.tokens_in, c.tokens_out) for c in store.llm_calls(Scope.local("s1"))]
    assert outcomes[1] == ("cached", 0, 0)
    assert store.llm_calls(Scope.local("s1"))[1].response is None  # the response is not stored twice
    # The cache is per space: the same request in another space is paid again.
    with pytest.raises(LLMError, match="no reply left"):
        await llm.complete(MESSAGES, Facts, stage="items", space=Scope.local("s2"))


async def test_hash_ignores_space_and_stage_but_not_content() -> None:
    a = build_request("m", MESSAGES, Facts, stage="x")
    b = build_request("m", MESSAGES, Facts, stage="y")
    assert request_hash(a) == request_hash(b)
    assert request_hash(a) != request_hash(build_request("m2", MESSAGES, Facts))
    assert request_hash(a) != request_hash(build_request("m", MESSAGES, Facts, temperature=0.5))
    assert request_hash(a) != request_hash(build_request("m", MESSAGES, Fact))
    assert request_hash(a) != request_hash(build_request("m", MESSAGES[:1], Facts))


async def test_local_repair_of_fences_prose_and_trailing_commas(store: SQLiteStore) -> None:
    messy = 'Sure! Here it is:\n```json\n{"facts": [{"speaker": "Caroline", "text": "moved", "year": 2019,},],}\n```'
    llm = scripted_llm(store, replies=[messy])
    result = await llm.complete(MESSAGES, Facts, stage="items", space=Scope.local("s1"))
    assert result.output.facts[0].year == 2019 and result.attempts == 1
    # The cache holds the validated JSON, not the messy text.
    assert json.loads(store.cached_response(Scope.local("s1"), result.request_hash) or "") == GOOD


async def test_invalid_output_is_retried_with_the_error_shown(store: SQLiteStore) -> None:
    bad = {"facts": [{"speaker": "Caroline", "text": "moved", "year": 19}]}
    llm = scripted_llm(store, replies=[bad, GOOD])
    result = await llm.complete(MESSAGES, Facts, stage="items", space=Scope.local("s1"))
    assert result.output == Facts.model_validate(GOOD) and result.attempts == 2
    backend = llm.backend
    assert isinstance(backend, ScriptedBackend)
    retry = backend.requests[1]
    assert retry.messages[: len(MESSAGES)] == MESSAGES
    assert retry.messages[-2] == Message(role="assistant", content=json.dumps(bad))
    assert "facts.0.year" in retry.messages[-1].content and "1900" in retry.messages[-1].content
    (call,) = store.llm_calls(Scope.local("s1"))
    first_in = sum(len(m.content) > 0 for m in MESSAGES)
    assert call.attempts == 2 and call.tokens_in > first_in
    # Tokens are summed over both attempts.
    assert call.tokens_out == result.usage.output_tokens > 0


async def test_bounded_failure_raises_output_error_and_logs_it(store: SQLiteStore) -> None:
    llm = scripted_llm(store, replies=["not json", "{}", '{"facts": 3}'], settings=settings(llm_output_retries=2))
    with pytest.raises(LLMOutputError, match=r"Stage items: model scripted .* 3 time\(s\); last error: .*facts"):
        await llm.complete(MESSAGES, Facts, stage="items", space=Scope.local("s1"))
    (call,) = store.llm_calls(Scope.local("s1"))
    assert call.outcome == "error" and call.attempts == 3 and call.response is None
    assert call.error is not None and "facts" in call.error
    assert store.cached_response(Scope.local("s1"), call.request_hash) is None


async def test_zero_output_retries_fails_on_first_invalid_reply(store: SQLiteStore) -> None:
    llm = scripted_llm(store, replies=["{}", GOOD], settings=settings(llm_output_retries=0))
    with pytest.raises(LLMOutputError):
        await llm.complete(MESSAGES, Facts, stage="items", space=Scope.local("s1"))
    backend = llm.backend
    assert isinstance(backend, ScriptedBackend) and backend.remaining == 1


async def test_batch_mode_queues_pending_then_uses_imported_result(store: SQLiteStore) -> None:
    llm = scripted_llm(store, replies=[], batch=True)
    with pytest.raises(BatchPending) as info:
        await llm.complete(MESSAGES, Facts, stage="topics", space=Scope.local("s1"))
    assert info.value.count == 1 and info.value.stage == "topics"
    (pending,) = store.pending(Scope.local("s1"))
    body = json.loads(pending.body)
    assert body["model"] == "scripted" and body["messages"][1]["content"] == MESSAGES[1].content
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "Facts"
    assert store.llm_calls(Scope.local("s1")) == []  # nothing paid, nothing logged
    # An imported batch result (stored raw, in a code fence) is validated through the repair path.
    store.log_llm_call(
        LLMCall(
            space="s1",
            stage="topics",
            model="scripted",
            request_hash=pending.request_hash,
            tokens_in=10,
            tokens_out=5,
            latency_ms=0.0,
            attempts=1,
            outcome="batch",
            created_at=EPOCH,
            response="```json\n" + json.dumps(GOOD) + "\n```",
        )
    )
    result = await llm.complete(MESSAGES, Facts, stage="topics", space=Scope.local("s1"))
    assert result.cached and result.output == Facts.model_validate(GOOD)


async def test_batch_mode_invalid_cached_result_queues_a_retry_request(store: SQLiteStore) -> None:
    llm = scripted_llm(store, batch=True)
    rhash = request_hash(build_request("scripted", MESSAGES, Facts, stage="topics"))
    store.log_llm_call(
        LLMCall(
            space="s1",
            stage="topics",
            model="scripted",
            request_hash=rhash,
            tokens_in=1,
            tokens_out=1,
            latency_ms=0.0,
            attempts=1,
            outcome="batch",
            created_at=EPOCH,
            response='{"facts": "none"}',
        )
    )
    with pytest.raises(BatchPending):
        await llm.complete(MESSAGES, Facts, stage="topics", space=Scope.local("s1"))
    (pending,) = store.pending(Scope.local("s1"))
    assert pending.request_hash != rhash
    body = json.loads(pending.body)
    assert body["messages"][-2] == {"role": "assistant", "content": '{"facts": "none"}'}
    assert "facts" in body["messages"][-1]["content"]


async def test_concurrency_limit_is_respected(store: SQLiteStore) -> None:
    class SlowBackend:
        def __init__(self) -> None:
            self.in_flight = 0
            self.peak = 0

        async def chat(self, request: ChatRequest) -> ChatReply:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            await asyncio.sleep(0.02)
            self.in_flight -= 1
            text = json.dumps({"facts": [], "note": request.messages[-1].content})
            return ChatReply(text=text, usage=Usage(input_tokens=1, output_tokens=1), model=request.model)

    backend = SlowBackend()
    llm = StructuredLLM(backend, store, model="slow", settings=settings(llm_concurrency=3))
    prompts = [[Message(role="user", content=f"q{i}")] for i in range(10)]
    results = await asyncio.gather(*(llm.complete(p, Facts, stage="s", space=Scope.local("s1")) for p in prompts))
    assert [r.output.note for r in results] == [f"q{i}" for i in range(10)]
    assert backend.peak == 3


async def test_identical_requests_in_flight_are_paid_once(store: SQLiteStore) -> None:
    """Two identical requests of one space running at once (e.g. a question asked twice) share one backend call."""

    class SlowBackend:
        def __init__(self) -> None:
            self.requests = 0

        async def chat(self, request: ChatRequest) -> ChatReply:
            self.requests += 1
            await asyncio.sleep(0.02)
            return ChatReply(text=json.dumps(GOOD), usage=Usage(input_tokens=5, output_tokens=3), model=request.model)

    backend = SlowBackend()
    llm = StructuredLLM(backend, store, model="slow", settings=settings(llm_concurrency=4))
    first, second = await asyncio.gather(
        *(llm.complete(MESSAGES, Facts, stage="s", space=Scope.local("s1")) for _ in range(2))
    )
    assert backend.requests == 1
    assert first.output == second.output == Facts.model_validate(GOOD)
    assert sorted(c.outcome for c in store.llm_calls(Scope.local("s1"))) == ["cached", "ok"]
    assert sum(c.tokens_in for c in store.llm_calls(Scope.local("s1"))) == 5  # the cost report counts the call once
    # another space keeps its own log and cache: it pays for its own call
    await llm.complete(MESSAGES, Facts, stage="s", space=Scope.local("s2"))
    assert backend.requests == 2


async def test_a_failed_shared_request_fails_every_waiter_once(store: SQLiteStore) -> None:
    class FailingBackend:
        def __init__(self) -> None:
            self.requests = 0

        async def chat(self, request: ChatRequest) -> ChatReply:
            self.requests += 1
            await asyncio.sleep(0.02)
            raise LLMError("HTTP 401: check OPENAI_API_KEY")

    backend = FailingBackend()
    llm = StructuredLLM(backend, store, model="failing", settings=settings(llm_concurrency=4))
    outcomes = await asyncio.gather(
        *(llm.complete(MESSAGES, Facts, stage="s", space=Scope.local("s1")) for _ in range(3)), return_exceptions=True
    )
    assert backend.requests == 1
    assert all(isinstance(o, LLMError) and "OPENAI_API_KEY" in str(o) for o in outcomes)
    assert [c.outcome for c in store.llm_calls(Scope.local("s1"))] == ["error"] * 3


async def test_the_llm_survives_several_event_loops(store: SQLiteStore) -> None:
    llm = scripted_llm(store, fn=lambda req: {"facts": [], "note": req.messages[-1].content})

    def run_in_new_loop(text: str) -> str | None:
        coro = llm.complete([Message(role="user", content=text)], Facts, stage="s", space=Scope.local("s1"))
        return asyncio.run(coro).output.note

    loop = asyncio.get_running_loop()
    assert await loop.run_in_executor(None, run_in_new_loop, "a") == "a"
    assert await loop.run_in_executor(None, run_in_new_loop, "b") == "b"


def test_scripted_backend_accepts_models_dicts_and_strings() -> None:
    backend = ScriptedBackend([Facts.model_validate(GOOD), GOOD, json.dumps(GOOD)])
    request = build_request("m", MESSAGES, Facts)
    texts = [asyncio.run(backend.chat(request)).text for _ in range(3)]
    assert all(Facts.model_validate_json(t) == Facts.model_validate(GOOD) for t in texts)
    assert len(backend.requests) == 3 and backend.remaining == 0


def test_validate_reply_reports_the_failing_field() -> None:
    output, error = validate_reply('{"facts": [{"speaker": "A", "text": "t"}]}', Facts)
    assert output is None and "facts.0.year: Field required" in error


def test_make_llm_modes_and_config_errors(store: SQLiteStore) -> None:
    assert make_llm(Settings(llm="none"), store) is None
    with pytest.raises(ConfigError, match="TMEM_LLM_MODEL"):
        make_llm(Settings(llm="openai"), store)
    with pytest.raises(ConfigError, match="OPENAI_BASE_URL"):
        make_llm(Settings(llm="openai", llm_model="m"), store)
    llm = make_llm(Settings(llm="openai", llm_model="m", llm_base_url="http://127.0.0.1:9/v1"), store)
    assert llm is not None and llm.model == "m"
    judge = make_llm(Settings(llm="openai", llm_model="m", llm_api_key="k"), store, model="judge")
    assert judge is not None and judge.model == "judge"
    asyncio.run(llm.aclose())
    asyncio.run(judge.aclose())


async def test_a_waiter_sends_the_request_itself_when_the_call_it_shared_is_cancelled(store: SQLiteStore) -> None:
    class SlowBackend:
        def __init__(self) -> None:
            self.requests = 0

        async def chat(self, request: ChatRequest) -> ChatReply:
            self.requests += 1
            await asyncio.sleep(0.05)
            return ChatReply(text=json.dumps(GOOD), usage=Usage(input_tokens=5, output_tokens=3), model=request.model)

    backend = SlowBackend()
    llm = StructuredLLM(backend, store, model="slow", settings=settings(llm_concurrency=4))
    owner = asyncio.create_task(llm.complete(MESSAGES, Facts, stage="s", space=Scope.local("s1")))
    await asyncio.sleep(0.01)
    waiter = asyncio.create_task(llm.complete(MESSAGES, Facts, stage="s", space=Scope.local("s1")))
    await asyncio.sleep(0.01)
    owner.cancel()
    result = await waiter
    assert result.output == Facts.model_validate(GOOD) and not result.cached
    assert backend.requests == 2 and owner.cancelled()
