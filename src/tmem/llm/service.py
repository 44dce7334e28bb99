"""The structured LLM service: cache, validation, repair, retry, logging, concurrency and the batch protocol.

:class:`StructuredLLM` implements :class:`tmem.llm.base.LLM` over any :class:`ChatBackend`. For each
``complete(messages, output_model, stage=, space=)``:

1. The request is hashed (:func:`tmem.llm.request.request_hash`; space and stage are not part of it).
2. The space's call log is asked for a response with that hash (``store.cached_response``). A hit costs nothing.
   Every store call (lookup, pending request, log row) runs through :func:`tmem.util.aio.blocking`, off the loop.
3. On a miss the backend is called (at most ``settings.llm_concurrency`` at once) - or, in batch mode, the request is
   stored as a :class:`PendingRequest` and :class:`BatchPending` is raised for the build to collect. A request already
   being sent for the same space waits for that reply instead of being sent again (logged as ``cached``).
4. The reply is validated with pydantic. An invalid reply is first repaired locally (code fences, prose around the
   object, trailing commas); if that does not validate, the model is sent its own reply plus the validation error and
   asked again, at most ``settings.llm_output_retries`` times; then :class:`LLMOutputError` is raised. A retry request
   is looked up in the cache by its own hash first, so an invalid batch result can be corrected through the batch
   protocol too.
5. One :class:`LLMCall` row is logged per ``complete``: outcome ``ok`` (a backend was called; the row holds the validated
   JSON and becomes the cache entry), ``cached`` (answered from the log, 0 tokens, no response stored again), or
   ``error`` (with the message).
   Tokens are summed over every backend attempt of the call.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import ValidationError

from tmem.errors import BatchPending, ConfigError, LLMError, LLMOutputError
from tmem.llm.base import LLM, ChatBackend, ChatRequest, ClosableBackend, LLMResult, Message, T, Usage
from tmem.llm.repair import repair_json
from tmem.llm.request import JsonMode, build_request, canonical_json, chat_body, request_hash
from tmem.models import LLMCall, PendingRequest
from tmem.scope import Scope
from tmem.settings import Settings
from tmem.store.base import Store
from tmem.util.aio import blocking
from tmem.util.fence import fence

_RETRY_PROMPT = (
    "Your previous reply is not valid for the required JSON schema:\n{error}\n"
    "Reply again with only the corrected JSON object, following the schema exactly."
)
_MAX_ERROR_CHARS = 2000


@dataclass
class _Tally:
    tokens_in: int = 0
    tokens_out: int = 0
    replies: int = 0
    backend_calls: int = 0


class StructuredLLM:
    """The production :class:`tmem.llm.base.LLM`: see the module docstring for the exact contract."""

    def __init__(
        self,
        backend: ChatBackend,
        store: Store,
        *,
        model: str,
        settings: Settings,
        batch: bool = False,
    ) -> None:
        self._backend = backend
        self._store = store
        self._model = model
        self._settings = settings
        self.batch = batch
        self._semaphore: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None
        self._in_flight: dict[tuple[Scope, str], asyncio.Future[str]] = {}  # (space, request hash) -> pending reply

    @property
    def model(self) -> str:
        return self._model

    @property
    def backend(self) -> ChatBackend:
        return self._backend

    async def aclose(self) -> None:
        """Close the backend's connections (a no-op for backends without any)."""
        if isinstance(self._backend, ClosableBackend):
            await self._backend.aclose()

    async def complete(
        self,
        messages: list[Message],
        output_model: type[T],
        *,
        stage: str,
        space: Scope,
        temperature: float = 0.0,
    ) -> LLMResult[T]:
        started = time.perf_counter()
        request = build_request(self._model, messages, output_model, temperature=temperature, stage=stage)
        rhash = request_hash(request)
        tally = _Tally()
        try:
            output = await self._validated(request, rhash, output_model, space, tally)
        except BatchPending:
            raise
        except LLMError as exc:
            await blocking(self._log, space, stage, rhash, tally, started, outcome="error", error=str(exc))
            raise
        if tally.backend_calls:
            await blocking(
                self._log, space, stage, rhash, tally, started, outcome="ok", response=output.model_dump_json()
            )
        else:
            # A hit is logged for the cost report only; the response is already in the log.
            await blocking(self._log, space, stage, rhash, tally, started, outcome="cached")
        return LLMResult(
            output=output,
            usage=Usage(input_tokens=tally.tokens_in, output_tokens=tally.tokens_out),
            model=self._model,
            request_hash=rhash,
            cached=tally.backend_calls == 0,
            attempts=tally.replies,
        )

    # ------------------------------------------------------------------------------------------------ internals

    async def _validated(
        self, request: ChatRequest, rhash: str, output_model: type[T], space: Scope, tally: _Tally
    ) -> T:
        max_retries = self._settings.llm_output_retries
        text = await self._reply(request, rhash, space, tally)
        for retry in range(max_retries + 1):
            tally.replies += 1
            output, error = validate_reply(text, output_model)
            if output is not None:
                return output
            if retry == max_retries:
                raise LLMOutputError(
                    f"Stage {request.stage or '?'}: model {self._model} returned output that failed "
                    f"{output_model.__name__} validation {tally.replies} time(s); last error: {error}. Try a more "
                    "capable model, raise TMEM_LLM_OUTPUT_RETRIES, or set TMEM_LLM_JSON_MODE=json_object if the "
                    "server ignores json_schema."
                )
            # Malformed structured output is worth another try: sampling differs and the error tells the model
            # exactly what to fix.
            request = _with_feedback(request, text, error)
            text = await self._reply(request, request_hash(request), space, tally)
        raise AssertionError("unreachable")  # the loop returns or raises

    async def _reply(self, request: ChatRequest, rhash: str, space: Scope, tally: _Tally) -> str:
        cached = await blocking(self._store.cached_response, space, rhash)
        if cached is not None:
            return cached
        if self.batch:
            body = chat_body(request, self._json_mode)
            pending = PendingRequest(
                space=space.key, stage=request.stage, request_hash=rhash, body=canonical_json(body)
            )
            await blocking(self._store.put_pending, [pending])
            raise BatchPending(
                f"Stage {request.stage or '?'}: 1 request is not cached and was queued for the batch protocol; "
                "export it with `tmem llm batch-export FILE`, run it, import with `tmem llm batch-import`.",
                count=1,
                stage=request.stage,
            )
        key = (space, rhash)
        shared = self._in_flight.get(key)
        if shared is not None and shared.get_loop() is asyncio.get_running_loop():
            # The same request of this space is with the backend right now (e.g. a question asked twice in one run):
            # share its reply instead of paying for it twice. This call then counts as a cache hit.
            try:
                return await asyncio.shield(shared)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if not shared.cancelled() or (task is not None and task.cancelling()):
                    raise  # this call itself was cancelled
                # the call we waited for was cancelled, not us: send the request ourselves
        return await self._send(request, key, tally)

    async def _send(self, request: ChatRequest, key: tuple[Scope, str], tally: _Tally) -> str:
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            async with self._limit():
                reply = await self._backend.chat(request)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters may be none, and asyncio would log it as never retrieved
            raise
        finally:
            if self._in_flight.get(key) is future:
                del self._in_flight[key]
        future.set_result(reply.text)
        tally.backend_calls += 1
        tally.tokens_in += reply.usage.input_tokens
        tally.tokens_out += reply.usage.output_tokens
        return reply.text

    @property
    def _json_mode(self) -> JsonMode:
        return self._settings.llm_json_mode

    def _limit(self) -> asyncio.Semaphore:
        # One semaphore per event loop: a StructuredLLM may outlive an ``asyncio.run`` (e.g. CLI commands).
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._semaphore[0] is not loop:
            self._semaphore = (loop, asyncio.Semaphore(self._settings.llm_concurrency))
        return self._semaphore[1]

    def _log(
        self,
        space: Scope,
        stage: str,
        rhash: str,
        tally: _Tally,
        started: float,
        *,
        outcome: Literal["ok", "error", "cached"],
        response: str | None = None,
        error: str | None = None,
    ) -> None:
        self._store.log_llm_call(
            LLMCall(
                space=space.key,
                stage=stage,
                model=self._model,
                request_hash=rhash,
                tokens_in=tally.tokens_in,
                tokens_out=tally.tokens_out,
                latency_ms=(time.perf_counter() - started) * 1000.0,
                attempts=tally.replies,
                outcome=outcome,
                # Bookkeeping time of the call (never a memory date).
                created_at=datetime.now(UTC).replace(tzinfo=None),
                response=response,
                error=error,
            )
        )


def validate_reply(text: str, output_model: type[T]) -> tuple[T | None, str]:
    """(instance, "") when ``text`` - as is, or after local repair - validates; else (None, a readable error)."""
    try:
        return output_model.model_validate_json(text), ""
    except ValidationError as exc:
        error = describe_validation_error(exc)
    repaired = repair_json(text)
    if repaired is not None and repaired != text:
        try:
            return output_model.model_validate_json(repaired), ""
        except ValidationError as exc:
            error = describe_validation_error(exc)
    return None, error


def describe_validation_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        parts.append(f"{loc}: {err['msg']}")
    text = f"{exc.error_count()} error(s): " + "; ".join(parts)
    return text if len(text) <= _MAX_ERROR_CHARS else text[:_MAX_ERROR_CHARS] + " ..."


def _with_feedback(request: ChatRequest, reply: str, error: str) -> ChatRequest:
    return ChatRequest(
        model=request.model,
        messages=[
            *request.messages,
            Message(role="assistant", content=reply),
            # The error may quote the reply, hence conversation text: fenced like all data (tmem.util.fence).
            Message(role="user", content=_RETRY_PROMPT.format(error=fence("validation_error", error))),
        ],
        schema_name=request.schema_name,
        json_schema=request.json_schema,
        temperature=request.temperature,
        stage=request.stage,
        strict=request.strict,
    )


def make_llm(
    settings: Settings, store: Store, *, model: str | None = None, batch: bool = False
) -> StructuredLLM | None:
    """The configured LLM, or None in the extractive mode (``settings.llm == "none"``).

    ``model`` overrides ``settings.llm_model`` (e.g. the answer or judge model). Raises ConfigError saying what to set
    when no model or no endpoint is configured.
    """
    if settings.llm == "none":
        return None
    name = model or settings.require_llm()
    if not settings.llm_base_url and not settings.llm_api_key:
        raise ConfigError(
            "No LLM endpoint configured: set OPENAI_BASE_URL (or TMEM_LLM_BASE_URL) for a local or compatible "
            "server, or OPENAI_API_KEY for api.openai.com; or run with --llm none."
        )
    from tmem.llm.openai_backend import OpenAIBackend

    return StructuredLLM(OpenAIBackend(settings), store, model=name, settings=settings, batch=batch)


def make_answer_llm(settings: Settings, store: Store, construction: LLM | None) -> tuple[LLM, bool]:
    """The answer model: ``Settings.answer_model`` (default the construction model), and True when it was created here
    (the caller closes it). The construction LLM ``construction`` answers when it is that model, or when the settings
    name no LLM (extractive mode) and one was passed in."""
    if settings.llm == "none" and construction is not None:
        return construction, False
    if settings.llm == "none" or not settings.llm_model:
        raise ConfigError(
            "Answering needs an LLM to write the answer: set TMEM_LLM=openai, TMEM_LLM_MODEL (e.g. "
            "gpt-4.1-mini) and OPENAI_BASE_URL (plus OPENAI_API_KEY if the server needs one). Without an LLM, "
            "`tmem search SPACE QUERY --explain` (Memory.search) shows what memory recalls."
        )
    model = settings.answer_model or settings.llm_model
    if construction is not None and construction.model == model:
        return construction, False
    created = make_llm(settings, store, model=model)
    if created is None:  # unreachable: settings.llm != "none" was checked above
        raise ConfigError("Answering needs an LLM: set TMEM_LLM=openai and TMEM_LLM_MODEL.")
    return created, True
