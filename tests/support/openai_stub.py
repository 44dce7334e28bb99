"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests: chat completions and embeddings, with injected faults.

It speaks HTTP on a random free loopback port (stdlib ``http.server``, one thread per connection), so the official
``openai`` SDK and ``tmem``'s backends are exercised end to end - sockets, status codes, headers, JSON bodies.

    from tests.support.openai_stub import OpenAIStub

    with OpenAIStub(reply=lambda req: '{"answer": "Paris"}', faults=["429:retry-after=0", "500", "malformed"]) as stub:
        settings = Settings(llm="openai", llm_model="stub-model", llm_base_url=stub.base_url, ...)
        ...
        assert len(stub.chat_requests) == 4

Endpoints
    ``POST /v1/chat/completions``: the reply function maps the request JSON to the message content (default:
    :func:`schema_reply`, a minimal instance of the request's JSON schema). The response carries ``usage`` with
    ``prompt_tokens`` / ``completion_tokens`` counted by :func:`tmem.util.text.count_tokens` (words and punctuation).
    ``POST /v1/embeddings``: deterministic unit vectors derived from a hash of each input text (``encoding_format``
    ``float`` or ``base64``, as the SDK requests by default; optional ``dimensions``).

Faults (``faults=[...]`` consumed one per chat request, in order; then ``fault_rate`` draws from ``fault_kinds`` with a
seeded RNG; embeddings have their own ``embedding_faults`` list):
    ``ok``                      a normal reply
    ``<status>``                e.g. ``500``, ``503``, ``429``, ``401``: an OpenAI-style error body with that status
    ``<status>:retry-after=S``  the same plus a ``Retry-After: S`` header (``retry-after-ms=MS`` likewise)
    ``malformed``               HTTP 200 whose content is the reply cut in half (invalid JSON no repair can fix)
    ``invalid``                 HTTP 200 whose content is well-formed JSON lacking the reply's first field (as a
                                model that forgets a required key: "items: Field required")
    ``fenced``                  HTTP 200 whose content wraps the reply in prose and a ```json fence (repairable)
    ``drop``                    the connection is closed without any response
    ``garbage``                 HTTP 200 with a body that is not JSON
    ``delay=S``                 sleep S seconds, then a normal reply (for client timeouts)

``json_schema_supported=False`` makes the server reject ``response_format.type == "json_schema"`` with HTTP 400 (as
servers without structured output do); ``temperature_supported=False`` rejects any temperature but the default 1
with HTTP 400 (as reasoning models do); ``delay`` adds latency to every request (for concurrency tests).

Every request is logged in ``requests`` (path, parsed body, headers, the fault applied and the status returned);
``max_in_flight`` is the highest number of requests served at the same time.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from tmem.util.text import count_tokens

ReplyFn = Callable[[dict[str, Any]], str]


@dataclass
class StubRequest:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    fault: str = "ok"
    status: int = 200


@dataclass
class _Fault:
    kind: str  # ok | status | malformed | fenced | drop | garbage | delay
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def parse_fault(spec: str) -> _Fault:
    """Parse one fault spec (see the module docstring); raises ValueError on an unknown spec."""
    head, *options = spec.strip().split(":")
    if head in ("ok", "malformed", "invalid", "fenced", "drop", "garbage"):
        return _Fault(kind=head)
    if head.startswith("delay="):
        return _Fault(kind="delay", seconds=float(head.removeprefix("delay=")))
    if head.isdigit():
        headers: dict[str, str] = {}
        for option in options:
            name, _, value = option.partition("=")
            if name not in ("retry-after", "retry-after-ms") or not value:
                raise ValueError(f"Unknown option {option!r} in fault {spec!r}")
            headers[name] = value
        return _Fault(kind="status", status=int(head), headers=headers)
    raise ValueError(f"Unknown fault {spec!r}: use ok, <status>[:retry-after=S], malformed, fenced, drop, ...")


class OpenAIStub:
    """An OpenAI-compatible server on 127.0.0.1; use as a context manager (or call start() and close())."""

    def __init__(
        self,
        reply: ReplyFn | None = None,
        *,
        faults: Sequence[str] = (),
        fault_rate: float = 0.0,
        fault_kinds: Sequence[str] = ("429:retry-after=0", "500", "malformed"),
        seed: int = 0,
        embedding_faults: Sequence[str] = (),
        json_schema_supported: bool = True,
        temperature_supported: bool = True,
        delay: float = 0.0,
        embedding_dim: int = 32,
    ) -> None:
        self.reply = reply or schema_reply
        self._faults: deque[_Fault] = deque(parse_fault(f) for f in faults)
        self._embedding_faults: deque[_Fault] = deque(parse_fault(f) for f in embedding_faults)
        self._fault_rate = fault_rate
        self._fault_kinds = [parse_fault(f) for f in fault_kinds]
        self._fault_names = list(fault_kinds)
        self._rng = random.Random(seed)
        self.json_schema_supported = json_schema_supported
        self.temperature_supported = temperature_supported
        self.delay = delay
        self.embedding_dim = embedding_dim
        self.requests: list[StubRequest] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------------------------------------ lifecycle

    def start(self) -> OpenAIStub:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="openai-stub", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> OpenAIStub:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("OpenAIStub is not running: use it as a context manager or call start().")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The URL to give the SDK as ``base_url`` (ends with /v1)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def env(self, home: str | Path, **extra: str) -> dict[str, str]:
        """The environment of a ``tmem`` command whose memory lives in ``home`` and whose LLM is this server (hash
        embeddings, fast backoff, a 10 s timeout); ``extra`` adds or replaces variables."""
        return {
            "TMEM_HOME": str(home),
            "TMEM_LLM": "openai",
            "TMEM_LLM_MODEL": "stub-model",
            "OPENAI_BASE_URL": self.base_url,
            "OPENAI_API_KEY": "sk-test",
            "TMEM_LLM_BACKOFF_BASE": "0.001",
            "TMEM_LLM_BACKOFF_MAX": "0.01",
            "TMEM_LLM_TIMEOUT": "10",
            "TMEM_EMBED_BACKEND": "hash",
            **extra,
        }

    # ------------------------------------------------------------------------------------------------ inspection

    @property
    def chat_requests(self) -> list[StubRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    @property
    def embedding_requests(self) -> list[StubRequest]:
        return [r for r in self.requests if r.path.endswith("/embeddings")]

    def add_faults(self, *faults: str) -> None:
        with self._lock:
            self._faults.extend(parse_fault(f) for f in faults)

    # ------------------------------------------------------------------------------------------------ internals

    def _next_fault(self, embeddings: bool) -> tuple[str, _Fault]:
        with self._lock:
            queue = self._embedding_faults if embeddings else self._faults
            if queue:
                fault = queue.popleft()
                return _fault_name(fault), fault
            if not embeddings and self._fault_rate > 0 and self._rng.random() < self._fault_rate:
                index = self._rng.randrange(len(self._fault_kinds))
                return self._fault_names[index], self._fault_kinds[index]
        return "ok", _Fault(kind="ok")

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _record(self, entry: StubRequest) -> None:
        with self._lock:
            self.requests.append(entry)


def _drop_first_field(content: str) -> str:
    try:
        data = json.loads(content)
    except ValueError:
        return content[: max(1, len(content) // 2)]
    if isinstance(data, dict) and data:
        data.pop(next(iter(data)))
    return json.dumps(data)


def _fault_name(fault: _Fault) -> str:
    if fault.kind == "status":
        return ":".join([str(fault.status), *(f"{k}={v}" for k, v in fault.headers.items())])
    if fault.kind == "delay":
        return f"delay={fault.seconds}"
    return fault.kind


# ---------------------------------------------------------------------------------------------------- HTTP handling


def _make_handler(stub: OpenAIStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Silence the per-request stderr log."""

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                self._send_json(400, _error_body("request body is not JSON", "invalid_request_error"))
                return
            headers = {k.lower(): v for k, v in self.headers.items()}
            entry = StubRequest(path=self.path, body=body, headers=headers)
            stub._record(entry)  # logged on arrival (in arrival order); fault and status are filled in below
            stub._enter()
            try:
                if stub.delay:
                    time.sleep(stub.delay)
                if self.path.rstrip("/").endswith("/chat/completions"):
                    self._chat(entry)
                elif self.path.rstrip("/").endswith("/embeddings"):
                    self._embeddings(entry)
                else:
                    entry.status = 404
                    self._send_json(404, _error_body(f"no route {self.path}", "invalid_request_error"))
            finally:
                stub._leave()

        # ---------------------------------------------------------------- endpoints

        def _chat(self, entry: StubRequest) -> None:
            body = entry.body
            fmt = body.get("response_format") or {}
            if not stub.json_schema_supported and fmt.get("type") == "json_schema":
                # Rejected before any fault is drawn: the schedule applies to requests the server would serve.
                entry.status = 400
                entry.fault = "unsupported-json-schema"
                message = "response_format type 'json_schema' is not supported by this server; use json_object"
                self._send_json(400, _error_body(message, "invalid_request_error", param="response_format"))
                return
            if not stub.temperature_supported and body.get("temperature") not in (None, 1, 1.0):
                entry.status = 400
                entry.fault = "unsupported-temperature"
                message = "Unsupported value: 'temperature' does not support 0.0 with this model. Only the default (1) value is supported."
                self._send_json(400, _error_body(message, "invalid_request_error", param="temperature"))
                return
            name, fault = stub._next_fault(embeddings=False)
            entry.fault = name
            if self._apply_transport_fault(entry, fault):
                return
            content = stub.reply(body)
            if fault.kind == "malformed":
                content = content[: max(1, len(content) // 2)]
            elif fault.kind == "invalid":
                content = _drop_first_field(content)
            elif fault.kind == "fenced":
                content = f"Here is the JSON you asked for:\n```json\n{content}\n```\nLet me know if you need more."
            prompt_tokens = sum(count_tokens(str(m.get("content") or "")) for m in body.get("messages", []))
            completion_tokens = count_tokens(content)
            self._send_json(
                200,
                {
                    "id": f"chatcmpl-stub-{len(stub.requests)}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "stub"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content, "refusal": None},
                            "finish_reason": "stop",
                            "logprobs": None,
                        }
                    ],
                    "usage": {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": completion_tokens,
                        "total_tokens": prompt_tokens + completion_tokens,
                    },
                },
            )

        def _embeddings(self, entry: StubRequest) -> None:
            name, fault = stub._next_fault(embeddings=True)
            entry.fault = name
            if self._apply_transport_fault(entry, fault):
                return
            inputs = entry.body.get("input")
            texts = [inputs] if isinstance(inputs, str) else inputs
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                entry.status = 400
                self._send_json(400, _error_body("input must be a string or a list of strings", "invalid_request"))
                return
            dim = int(entry.body.get("dimensions") or stub.embedding_dim)
            as_base64 = entry.body.get("encoding_format") == "base64"
            data = []
            for i, text in enumerate(texts):
                vector = stub_vector(text, dim)
                encoded: Any = base64.b64encode(vector.tobytes()).decode() if as_base64 else vector.tolist()
                data.append({"object": "embedding", "index": i, "embedding": encoded})
            tokens = sum(count_tokens(t) for t in texts)
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": data,
                    "model": entry.body.get("model", "stub-embed"),
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                },
            )

        # ---------------------------------------------------------------- faults and output

        def _apply_transport_fault(self, entry: StubRequest, fault: _Fault) -> bool:
            """Serve a status/drop/garbage fault (True), or wait out a delay and let the normal reply go (False)."""
            if fault.kind == "delay":
                time.sleep(fault.seconds)
                return False
            if fault.kind == "status":
                entry.status = fault.status
                kind = "rate_limit_error" if fault.status == 429 else "server_error"
                message = f"injected fault: HTTP {fault.status}"
                self._send_json(fault.status, _error_body(message, kind), fault.headers)
                return True
            if fault.kind == "drop":
                entry.status = 0
                self.close_connection = True
                return True
            if fault.kind == "garbage":
                payload = b"<html>502 Bad Gateway... not JSON"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return True
            return False

        def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                # The client gave up first (e.g. a timeout test): nothing is left to answer.
                self.close_connection = True

    return Handler


def _error_body(message: str, kind: str, *, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}


# ---------------------------------------------------------------------------------------------------- replies


def stub_vector(text: str, dim: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    """The stub's embedding of ``text``: a unit float32 vector seeded by the text's sha256."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return vector / np.float32(np.linalg.norm(vector))


def request_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a chat request asks for: from ``response_format`` (json_schema mode) or, in json_object mode,
    from the schema tmem appends to the system message."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        schema = fmt.get("json_schema", {}).get("schema")
        return schema if isinstance(schema, dict) else None
    for message in body.get("messages", []):
        content = str(message.get("content") or "")
        marker = content.rfind("JSON schema:\n")
        if message.get("role") == "system" and marker != -1:
            found = json.loads(content[marker + len("JSON schema:\n") :])
            return found if isinstance(found, dict) else None
    return None


def schema_reply(body: dict[str, Any]) -> str:
    """Default reply: the smallest JSON instance of the requested schema (``{}`` when no schema is given)."""
    schema = request_schema(body)
    if schema is None:
        return "{}"
    return json.dumps(minimal_instance(schema, schema))


def minimal_instance(schema: dict[str, Any], root: dict[str, Any]) -> Any:
    """A small value valid for ``schema`` (objects, arrays, strings, numbers, enums, anyOf, local $refs)."""
    if "$ref" in schema:
        name = str(schema["$ref"]).removeprefix("#/$defs/")
        return minimal_instance(root["$defs"][name], root)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return minimal_instance(schema[key][0], root)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    if kind == "object":
        props = schema.get("properties", {})
        return {name: minimal_instance(sub, root) for name, sub in props.items()}
    if kind == "array":
        count = int(schema.get("minItems", 0))
        return [minimal_instance(schema.get("items", {}), root) for _ in range(count)]
    if kind == "string":
        fmt = schema.get("format")
        if fmt == "date-time":
            return "2023-05-08T13:56:00"
        if fmt == "date":
            return "2023-05-08"
        return "x" * max(1, int(schema.get("minLength", 1)))
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return float(schema.get("minimum", 0.0))
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return None
