"""The production chat backend: any OpenAI-compatible endpoint through the official ``openai`` SDK.

- Structured output: ``response_format = json_schema`` (strict, built by :mod:`tmem.llm.schema`). When the server
  rejects it (a 400/422 whose message mentions ``response_format`` or ``json_schema``) the backend switches to
  ``{"type": "json_object"}`` with the schema in the system prompt, for this and every later request; the setting
  ``llm_json_mode = "json_object"`` starts there.
- A model that rejects the ``temperature`` parameter (reasoning models accept only their default) gets requests
  without it from then on. The request hash still includes the requested temperature.
- Transient failures are retried here with exponential backoff and full jitter, at most ``settings.llm_max_retries``
  times (the SDK's own retries are off so that exactly one policy applies), then :class:`LLMTransientError`.
- Every other failure is an :class:`LLMError` carrying the server's message and what to check.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import openai
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletion

from tmem.errors import LLMError, LLMTransientError
from tmem.llm.base import ChatReply, ChatRequest, Usage
from tmem.llm.request import JsonMode, chat_body
from tmem.settings import Settings

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]

# A Retry-After longer than this is not waited for: it signals a quota, and the error surfaces so the user decides.
_MAX_RETRY_AFTER_S = 600.0


class OpenAIBackend:
    """:class:`tmem.llm.base.ChatBackend` over ``openai.AsyncOpenAI``."""

    def __init__(
        self,
        settings: Settings,
        *,
        client: AsyncOpenAI | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self._settings = settings
        self._client = client or AsyncOpenAI(
            base_url=settings.llm_base_url,
            # Local servers (vLLM, Ollama, llama.cpp) need no key, but the SDK insists on one.
            api_key=settings.llm_api_key or "not-needed",
            timeout=settings.llm_timeout,
            max_retries=0,  # we retry ourselves, with one documented policy
        )
        self._mode: JsonMode = settings.llm_json_mode
        self._send_temperature = True
        self._sleep = sleep
        self._rng = rng or random.Random()

    @property
    def json_mode(self) -> JsonMode:
        """The structured-output mode in use (may have fallen back to json_object)."""
        return self._mode

    @property
    def base_url(self) -> str:
        return str(self._client.base_url)

    async def aclose(self) -> None:
        await self._client.close()

    async def chat(self, request: ChatRequest) -> ChatReply:
        retries = 0
        while True:
            body = chat_body(request, self._mode)
            if not self._send_temperature:
                del body["temperature"]
            try:
                completion = await self._client.chat.completions.create(**body)
            except openai.APIStatusError as exc:
                if self._mode == "json_schema" and _rejects_json_schema(exc):
                    log.warning(
                        "%s rejected response_format json_schema (%s); falling back to json_object",
                        self.base_url,
                        _server_message(exc),
                    )
                    self._mode = "json_object"
                    continue
                if self._send_temperature and _rejects_temperature(exc):
                    # Reasoning models accept only their default temperature; the request is otherwise the same.
                    log.warning("%s rejected the temperature parameter; sending requests without it", self.base_url)
                    self._send_temperature = False
                    continue
                if not _is_transient_status(exc.status_code):
                    raise LLMError(_explain(exc, request.model, self.base_url)) from exc
                retries = await self._backoff(retries, exc, _retry_after(exc))
            except (openai.APIConnectionError, openai.APIResponseValidationError, json.JSONDecodeError) as exc:
                # APIConnectionError covers timeouts (APITimeoutError) and dropped or refused connections: the
                # request may never have reached the model, and a new connection usually succeeds.
                # APIResponseValidationError / JSONDecodeError (the SDK lets the latter through when a 200 body is
                # not JSON): the HTTP body was cut off or replaced on the way (a proxy or gateway page, a dropped
                # stream) - not a statement by the model; sending again is safe because requests are idempotent.
                retries = await self._backoff(retries, exc, None)
            else:
                return _reply(completion, request.model)

    async def _backoff(self, retries: int, exc: Exception, retry_after: float | None) -> int:
        if retries >= self._settings.llm_max_retries:
            raise LLMTransientError(
                f"{_describe(exc)} from {self.base_url} persisted after {retries} retr"
                f"{'y' if retries == 1 else 'ies'}: the server is overloaded or unreachable. Retry later (cached "
                "calls are not paid again), lower TMEM_LLM_CONCURRENCY, or raise TMEM_LLM_MAX_RETRIES."
            ) from exc
        if retry_after is not None and retry_after > _MAX_RETRY_AFTER_S:
            raise LLMTransientError(
                f"{_describe(exc)} from {self.base_url}: the server asks to wait {retry_after:.0f}s before the next "
                "request (a quota, not a burst limit). Rerun later; cached calls are not paid again."
            ) from exc
        if retry_after is not None:
            delay = retry_after
        else:
            # Exponential backoff with full jitter: spreads concurrent clients apart instead of retrying in step.
            ceiling = min(self._settings.llm_backoff_max, self._settings.llm_backoff_base * (2**retries))
            delay = self._rng.uniform(0.0, ceiling)
        log.info("transient LLM error (%s); retry %d in %.2fs", _describe(exc), retries + 1, delay)
        await self._sleep(delay)
        return retries + 1


def _is_transient_status(status: int) -> bool:
    # 408 Request Timeout: the server gave up waiting, nothing was processed.
    # 409 Conflict: OpenAI uses it for transient lock contention on its side.
    # 429 Too Many Requests: a rate limit that resets with time (Retry-After says when).
    # 5xx: the server failed or is overloaded (502/503/504 from gateways in front of local servers too).
    return status in (408, 409, 429) or status >= 500


def _rejects_json_schema(exc: openai.APIStatusError) -> bool:
    if exc.status_code not in (400, 422):
        return False
    text = f"{exc.message} {exc.body}".lower()
    return "response_format" in text or "json_schema" in text


def _rejects_temperature(exc: openai.APIStatusError) -> bool:
    if exc.status_code not in (400, 422):
        return False
    text = f"{exc.message} {exc.body}".lower()
    return "temperature" in text and ("unsupported" in text or "not support" in text or "only the default" in text)


def _retry_after(exc: openai.APIStatusError) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, else ``retry-after`` (seconds or an HTTP date)."""
    headers = exc.response.headers
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            log.debug("ignoring unparsable retry-after-ms header %r", raw_ms)
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        log.debug("ignoring unparsable retry-after header %r", raw)
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    return exc.message


def _describe(exc: Exception) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code} ({_server_message(exc)})"
    if isinstance(exc, openai.APITimeoutError):
        return "request timeout"
    if isinstance(exc, openai.APIConnectionError):
        return f"connection error ({exc.message})"
    return f"{type(exc).__name__} ({exc})"


def _explain(exc: openai.APIStatusError, model: str, base_url: str) -> str:
    message = _server_message(exc)
    status = exc.status_code
    if status == 401:
        hint = "check OPENAI_API_KEY (or TMEM_LLM_API_KEY)"
    elif status == 403:
        hint = f"check that the API key may use model {model!r}"
    elif status == 404:
        hint = f"check the model name (TMEM_LLM_MODEL={model!r}) and that the base URL {base_url} ends with /v1"
    elif status in (400, 422):
        hint = (
            f"check that model {model!r} accepts this request (context length, parameters); for servers without "
            "structured output set TMEM_LLM_JSON_MODE=json_object"
        )
    else:
        hint = f"check the server at {base_url}"
    return f"The LLM server refused the request: HTTP {status}: {message}. {hint[0].upper()}{hint[1:]}."


def _reply(completion: ChatCompletion, model: str) -> ChatReply:
    text = ""
    if completion.choices:
        message = completion.choices[0].message
        # A refusal or an empty message is returned as text so that validation fails and the model is asked again.
        text = message.content or message.refusal or ""
    usage = completion.usage
    return ChatReply(
        text=text,
        usage=Usage(
            input_tokens=usage.prompt_tokens if usage else 0,
            output_tokens=usage.completion_tokens if usage else 0,
        ),
        model=completion.model or model,
    )
