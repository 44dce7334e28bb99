"""A local fake of the OpenAI Files and Batch endpoints, over real HTTP, for the official ``openai`` client.

    with BatchStub(reply=stub_reply, plans=["expire:3", "complete"]) as stub:
        client = openai.OpenAI(base_url=stub.base_url, api_key="sk-test", max_retries=0)

Endpoints: ``POST /v1/files`` (multipart: ``purpose``, ``file``), ``GET /v1/files/{id}/content``, ``POST
/v1/batches``, ``GET /v1/batches/{id}``, ``GET /v1/batches`` (list, newest first), ``POST /v1/batches/{id}/cancel``.

A batch moves one step per ``GET /v1/batches/{id}``: ``validating`` -> ``in_progress`` -> its plan's end. Each batch
takes the next plan of ``plans`` (then ``complete``):

    ``complete``        every line answered (``reply(body)`` is the message content) in the output file
    ``expire:K``        the first K lines answered, the rest in the error file with code ``batch_expired``; ``expired``
    ``fail:I,J``        lines I and J (0-based) in the error file with ``status_code`` 500; the rest answered
    ``cancel``          the batch turns ``cancelling`` then ``cancelled`` with its first half answered (as if someone
                        cancelled it on the dashboard)
    ``failed``          rejected at validation (``errors.data``), nothing run
    ``drop-create``     the batch is created but the connection of ``POST /v1/batches`` is closed without an answer

``executed`` counts, per ``custom_id``, how often a line was run (paid): a request run twice shows 2. ``created`` lists
the batch ids in creation order; ``uploads`` the uploaded file ids.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from tests.support.openai_stub import schema_reply
from tmem.util.text import count_tokens

ReplyFn = Callable[[dict[str, Any]], str]


class BatchStub:
    def __init__(self, reply: ReplyFn | None = None, *, plans: Sequence[str] = ()) -> None:
        self.reply = reply or schema_reply
        self._plans = deque(plans)
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self._steps: dict[str, list[str]] = {}
        self._plan: dict[str, str] = {}
        self.executed: Counter[str] = Counter()
        self.created: list[str] = []
        self.uploads: list[str] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> BatchStub:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    # ------------------------------------------------------------------ behaviour
    def upload(self, content: bytes) -> dict[str, Any]:
        with self._lock:
            file_id = f"file-{next(self._ids)}"
            self.files[file_id] = content
            self.uploads.append(file_id)
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(content),
            "created_at": int(time.time()),
            "filename": "input.jsonl",
            "purpose": "batch",
            "status": "processed",
        }

    def create(self, body: dict[str, Any]) -> tuple[dict[str, Any], str]:
        with self._lock:
            if body.get("input_file_id") not in self.files:
                raise KeyError(body.get("input_file_id"))
            batch_id = f"batch_{next(self._ids)}"
            plan = self._plans.popleft() if self._plans else "complete"
            lines = [ln for ln in self.files[body["input_file_id"]].decode().splitlines() if ln.strip()]
            self.batches[batch_id] = {
                "id": batch_id,
                "object": "batch",
                "endpoint": body["endpoint"],
                "input_file_id": body["input_file_id"],
                "completion_window": body["completion_window"],
                "status": "validating",
                "created_at": int(time.time()),
                "output_file_id": None,
                "error_file_id": None,
                "errors": None,
                "metadata": body.get("metadata"),
                "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            }
            self._plan[batch_id] = plan
            end = "cancelled" if plan == "cancel" else "failed" if plan == "failed" else "done"
            self._steps[batch_id] = ["in_progress", "cancelling", end] if plan == "cancel" else ["in_progress", end]
            self.created.append(batch_id)
            return dict(self.batches[batch_id]), plan

    def advance(self, batch_id: str) -> dict[str, Any]:
        with self._lock:
            batch = self.batches[batch_id]
            steps = self._steps[batch_id]
            if steps and batch["status"] not in ("completed", "expired", "cancelled", "failed"):
                step = steps.pop(0)
                if step in ("done", "cancelled"):
                    self._run(batch, step)
                elif step == "failed":
                    batch["status"] = "failed"
                    batch["errors"] = {
                        "object": "list",
                        "data": [{"code": "invalid_request", "message": "model not found", "line": 1}],
                    }
                else:
                    batch["status"] = step
            return dict(batch)

    def cancel(self, batch_id: str) -> dict[str, Any]:
        with self._lock:
            batch = self.batches[batch_id]
            if batch["status"] in ("validating", "in_progress"):
                self._steps[batch_id] = ["cancelling", "cancelled"]
                self._plan[batch_id] = "cancel"
                batch["status"] = "cancelling"
            return dict(batch)

    def _run(self, batch: dict[str, Any], step: str) -> None:
        lines = [json.loads(ln) for ln in self.files[batch["input_file_id"]].decode().splitlines() if ln.strip()]
        plan = self._plan[batch["id"]]
        answered: set[int] = set(range(len(lines)))
        status = "completed"
        if plan.startswith("expire:"):
            answered = set(range(int(plan.split(":")[1])))
            status = "expired"
        elif plan.startswith("fail:"):
            answered -= {int(i) for i in plan.split(":")[1].split(",")}
        elif step == "cancelled":
            answered = set(range(len(lines) // 2))
            status = "cancelled"
        out, err = [], []
        for i, line in enumerate(lines):
            cid = line["custom_id"]
            if i in answered:
                self.executed[cid] += 1
                out.append(_result(cid, line["body"], self.reply(line["body"])))
            elif status == "expired" or status == "cancelled":
                code = "batch_expired" if status == "expired" else "batch_cancelled"
                err.append({"id": f"req_{i}", "custom_id": cid, "response": None,
                            "error": {"code": code, "message": f"Request not run: {code}."}})  # fmt: skip
            else:
                self.executed[cid] += 1  # a failed request was run (and would be billed by some providers)
                body = {"error": {"message": "The server had an error.", "type": "server_error"}}
                err.append({"id": f"req_{i}", "custom_id": cid, "response": {"status_code": 500, "body": body},
                            "error": None})  # fmt: skip
        batch["status"] = status
        batch["request_counts"] = {"total": len(lines), "completed": len(out), "failed": len(err)}
        if out:
            batch["output_file_id"] = self.upload(_jsonl(out))["id"]
        if err:
            batch["error_file_id"] = self.upload(_jsonl(err))["id"]


def _result(custom_id: str, body: dict[str, Any], content: str) -> dict[str, Any]:
    prompt = sum(count_tokens(str(m.get("content", ""))) for m in body.get("messages", []))
    completion = {
        "id": f"chatcmpl-{custom_id[:8]}",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "stub"),
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": count_tokens(content), "total_tokens": 0},
    }
    return {"id": f"req_{custom_id[:8]}", "custom_id": custom_id, "response": {"status_code": 200, "body": completion},
            "error": None}  # fmt: skip


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _handler(stub: BatchStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _missing(self) -> None:
            self._json(404, {"error": {"message": f"No route {self.path}", "type": "invalid_request_error"}})

        def do_POST(self) -> None:
            raw = self._body()
            if self.path == "/v1/files":
                message = BytesParser(policy=HTTP).parsebytes(
                    f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode() + raw
                )
                parts = {p.get_param("name", header="content-disposition"): p for p in message.iter_parts()}
                content = parts["file"].get_payload(decode=True)
                self._json(200, stub.upload(content if isinstance(content, bytes) else b""))
            elif self.path == "/v1/batches":
                try:
                    batch, plan = stub.create(json.loads(raw))
                except KeyError:
                    self._json(400, {"error": {"message": "No such input file", "type": "invalid_request_error"}})
                    return
                if plan == "drop-create":
                    self.close_connection = True
                    self.connection.close()  # created, but the client never hears of it
                    return
                self._json(200, batch)
            elif m := re.fullmatch(r"/v1/batches/([^/]+)/cancel", self.path):
                if m.group(1) not in stub.batches:
                    self._missing()
                    return
                self._json(200, stub.cancel(m.group(1)))
            else:
                self._missing()

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            if m := re.fullmatch(r"/v1/files/([^/]+)/content", path):
                data = stub.files.get(m.group(1))
                if data is None:
                    self._missing()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            elif m := re.fullmatch(r"/v1/batches/([^/]+)", path):
                if m.group(1) not in stub.batches:
                    self._missing()
                    return
                self._json(200, stub.advance(m.group(1)))
            elif path == "/v1/batches":
                data = [dict(stub.batches[b]) for b in reversed(stub.created)]
                self._json(200, {"object": "list", "data": data, "has_more": False,
                                 "first_id": data[0]["id"] if data else None,
                                 "last_id": data[-1]["id"] if data else None})  # fmt: skip
            else:
                self._missing()

    return Handler
