"""One script runs against an embedded :class:`Memory`, a :class:`Client` and an :class:`AsyncClient` of a live server
(uvicorn on 127.0.0.1, a free port): the same calls give the same results and raise the same exception classes. The
four front ends' methods are pinned to the same names and signatures (sync or async aside)."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable, Coroutine
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.live_server import LiveServer
from tests.test_service import NO_AUTO_BUILD, dev_messages, make_keys
from tmem.client import AsyncClient, Client
from tmem.errors import ConfigError, InputError, NotFoundError, StoreError, TmemError
from tmem.memory import OPERATIONS, AsyncMemory, Memory
from tmem.retrieve.config import RetrievalConfig
from tmem.service import create_app
from tmem.settings import Settings

# Bookkeeping times differ between any two runs; a live session's content hash hashes the store key, which carries
# the tenant on a server ("acme/c") and not in an embedded memory ("c").
UNCOMPARED = {"seconds", "at", "content_hash", "erasure"}  # erasure: the ledger entry's number in its own store


def _plain(value: Any) -> Any:
    """JSON of a result, without the fields that differ between any two runs."""
    data = json.loads(value.model_dump_json()) if hasattr(value, "model_dump_json") else value
    if isinstance(value, list):
        data = [_plain(v) for v in value]

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k not in UNCOMPARED}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    return strip(data)


def _raises(call: Callable[[], Any]) -> str:
    try:
        call()
    except TmemError as exc:
        for cls in (NotFoundError, InputError, ConfigError, StoreError):
            if isinstance(exc, cls):
                return cls.__name__
        return type(exc).__name__
    return "no error"


def script(mem: Any) -> dict[str, Any]:
    """Every operation the service offers, as an agent would call them, through ``mem``'s Memory-shaped methods."""
    out: dict[str, Any] = {}
    first, second = dev_messages(2)
    out["add"] = mem.add_messages("c", first)
    out["add again"] = mem.add_messages("c", first[:3])
    out["build"] = mem.build("c")
    out["add second"] = mem.add_messages("c", second)
    out["build second"] = mem.build("c")
    out["spaces"] = mem.spaces()
    query = "What did Caroline research?"
    out["search"] = mem.search("c", query)
    out["search preset"] = mem.search("c", query, "descriptive")
    out["search config"] = mem.search("c", query, RetrievalConfig.preset("extractive").replace(kS=2, kI=3))
    out["context"] = mem.context("c", query, max_tokens=300)
    out["context preset"] = mem.context("c", query, 500, "descriptive")
    out["context layout"] = mem.context("c", query, 500, layout={"excerpt_neighbours": False, "context_k0": 7})
    out["search auto config"] = mem.search("c", query, RetrievalConfig(name="auto", gate=0.85, kS=2))
    page = mem.list_items("c", limit=3, offset=1)
    out["items page"] = page
    item = page.items[0]
    out["items filtered"] = mem.list_items("c", speaker=item.speaker, text=item.text.split()[1], limit=500)
    out["items until"] = mem.list_items("c", until=item.date, live=True, limit=500)
    out["get item"] = mem.get_item("c", item.id)
    out["update item"] = mem.update_item("c", item.id, "Caroline joined a pottery class in May 2023.")
    out["history"] = mem.history("c", item.id)
    out["delete item"] = mem.delete_item("c", page.items[1].id)
    out["forget"] = mem.forget("c", turn_ids=[first[4]["id"]], item_ids=[page.items[1].id])
    out["export"] = mem.export("c")
    out["errors"] = {
        "missing item": _raises(lambda: mem.get_item("c", "no-such-item")),
        "missing space": _raises(lambda: mem.search("nowhere", query)),
        "bad preset": _raises(lambda: mem.search("c", query, "no-such-preset")),
        "bad layout": _raises(lambda: mem.context("c", query, 300, layout={"context_k0": -1})),
        "forget nothing": _raises(lambda: mem.forget("c")),
        "bad filter": _raises(lambda: mem.list_items("c", since="2024-02-01", until="2024-01-01")),
        "ask without an LLM": _raises(lambda: mem.ask("c", query)),
        "ask at a time": _raises(lambda: mem.ask("c", query, datetime(2023, 6, 1))),
    }
    out["delete space"] = mem.delete_space("c")
    out["spaces after"] = mem.spaces()
    return {name: _plain(value) for name, value in out.items()}


class _Blocking:
    """An AsyncClient's coroutines run to completion one by one (so that the one script drives it too)."""

    def __init__(self, client: AsyncClient, loop: asyncio.AbstractEventLoop) -> None:
        self._client, self._loop = client, loop

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method: Callable[..., Coroutine[Any, Any, Any]] = getattr(self._client, name)
        return lambda *args, **kwargs: self._loop.run_until_complete(method(*args, **kwargs))


def _settings(home: Path) -> Settings:
    return Settings(home=home, llm="none", embed_backend="hash", **NO_AUTO_BUILD)  # type: ignore[arg-type]


def test_memory_client_and_async_client_give_the_same_results(tmp_path: Path) -> None:
    with Memory.open(settings=_settings(tmp_path / "embedded")) as memory:
        embedded = script(memory)
    served = _settings(tmp_path / "served")
    keys = make_keys(served, "acme", "beta")
    with LiveServer(create_app(served)) as server:
        with Client(server.url, keys["acme"]) as client:
            remote = script(client)
        loop = asyncio.new_event_loop()
        try:
            aclient = AsyncClient(server.url, keys["beta"])
            try:
                remote_async = script(_Blocking(aclient, loop))
            finally:
                loop.run_until_complete(aclient.aclose())
        finally:
            loop.close()
    assert embedded["errors"]["missing item"] == "NotFoundError"  # the script meets real errors, not none
    assert embedded["items page"]["items"] and embedded["search"]["scenes"]
    for name in embedded:
        assert remote[name] == embedded[name], name
        assert remote_async[name] == embedded[name], name


def test_client_errors_are_tmem_errors_that_say_what_to_do(tmp_path: Path) -> None:
    served = _settings(tmp_path / "served")
    key = make_keys(served, "acme")["acme"]
    with LiveServer(create_app(served)) as server:
        with Client(server.url, "tmem_wrong_key") as wrong, pytest.raises(ConfigError, match="unknown or revoked"):
            wrong.spaces()
        with Client(server.url, key) as client:
            with pytest.raises(InputError, match="received_at"):
                client.add_messages("c", dev_messages(1)[0], received_at=datetime(2024, 1, 1))
            with pytest.raises(InputError, match=r"messages\.0\.text"):
                client.add_messages("c", [{"speaker": "a", "text": ""}])
        port = server.port
    with Client(f"http://127.0.0.1:{port}", key, timeout=5) as gone, pytest.raises(StoreError) as info:
        gone.spaces()
    assert f"127.0.0.1:{port}" in str(info.value) and "tmem serve" in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_a_generated_request_is_encoded_as_one_path_segment(tmp_path: Path) -> None:
    """Item ids with '?', '#', ':' or spaces reach the item route intact (and answer its 404, not another route)."""
    served = _settings(tmp_path / "served")
    key = make_keys(served, "acme")["acme"]
    with LiveServer(create_app(served)) as server, Client(server.url, key) as client:
        client.add_messages("c", dev_messages(1)[0][:2])
        for odd in ("a b", "x?y=1", "h#1", "D3:7"):
            with pytest.raises(NotFoundError, match="GET /v1/spaces/c/items"):
                client.get_item("c", odd)
        assert httpx.get(f"{server.url}/openapi.json").status_code == 200


def test_ask_gives_the_same_answer_embedded_and_served(tmp_path: Path) -> None:
    """With an answer model (the OpenAI-compatible stub), Client.ask returns what Memory.ask returns: the answer, its
    question time, its context and its search."""
    from tests.support.openai_stub import OpenAIStub

    def answer(request: Any) -> str:
        return '{"answer": "pottery, in May 2023"}'

    results: list[dict[str, Any]] = []
    with OpenAIStub(reply=answer) as stub:
        for where in ("embedded", "served"):
            cfg = Settings(
                home=tmp_path / where,
                llm="openai",
                llm_model="stub-model",
                llm_base_url=stub.base_url,
                llm_api_key="test",
                embed_backend="hash",
                **NO_AUTO_BUILD,  # type: ignore[arg-type]
            )
            space = "acme/c" if where == "served" else "c"
            with Memory.open(settings=cfg.model_copy(update={"llm": "none"})) as builder:  # built without the LLM
                builder.add_messages(space, dev_messages(1)[0])
                builder.build(space)
            if where == "embedded":
                with Memory.open(settings=cfg) as mem:
                    got = mem.ask("c", "What did Caroline take up?", datetime(2023, 6, 1), max_tokens=400)
            else:
                key = make_keys(cfg, "acme")["acme"]
                with LiveServer(create_app(cfg)) as server, Client(server.url, key) as client:
                    got = client.ask("c", "What did Caroline take up?", datetime(2023, 6, 1), max_tokens=400)
            results.append(_plain(got))
    embedded, served = results
    assert embedded["answer"] == "pottery, in May 2023" and embedded["context"]["turn_ids"]
    assert served == embedded


def test_what_the_client_sends_is_what_the_server_accepts() -> None:
    """A config's reranker is the operator's (the server refuses a request naming one): it is not sent; dates in a
    message dict are sent as ISO text, as datetimes are."""
    from datetime import date

    from tmem.client import plans

    config = RetrievalConfig.preset("paper").replace(reranker="/some/model", kS=7)
    sent = plans._config(config)
    assert isinstance(sent, dict) and "reranker" not in sent and sent["kS"] == 7 and sent["explicit"] == ["k_scenes"]
    assert RetrievalConfig.model_validate(sent) == config.replace(reranker=None).model_copy(
        update={"explicit": frozenset({"k_scenes"})}
    )
    message = plans._message({"speaker": "a", "text": "hi", "time": date(2024, 1, 2)})
    assert message["time"] == "2024-01-02"
    json.dumps(message)


LIFECYCLE = {"close", "aclose", "over"}  # how a facade is made and closed, not an operation
SERVED = {  # the operations the HTTP service offers (the rest are local: files, the erasure ledger, costs)
    "spaces", "add_messages", "delete_space", "build", "search", "context", "ask", "list_items", "get_item",
    "update_item", "delete_item", "forget", "history", "export",
}  # fmt: skip


def _methods(cls: type) -> dict[str, Any]:
    return {
        name: member
        for name, member in inspect.getmembers(cls, callable)
        if not name.startswith("_") and name not in LIFECYCLE
    }


def test_memory_and_async_memory_have_the_same_methods_and_signatures() -> None:
    sync, coros = _methods(Memory), _methods(AsyncMemory)
    assert set(sync) == set(coros) == {*OPERATIONS, "open"}
    assert "aask" not in sync and "abuild" not in sync  # one way to call each operation per facade
    for name in OPERATIONS:
        assert inspect.signature(sync[name]) == inspect.signature(coros[name]), name
        assert not inspect.iscoroutinefunction(sync[name]) and inspect.iscoroutinefunction(coros[name]), name
    assert inspect.signature(Memory.open).parameters == inspect.signature(AsyncMemory.open).parameters


def test_clients_have_memorys_methods_and_signatures_for_what_the_service_offers() -> None:
    sync, coros, memory = _methods(Client), _methods(AsyncClient), _methods(Memory)
    assert set(sync) == set(coros) == SERVED and set(OPERATIONS) >= SERVED
    for name in SERVED:
        assert inspect.signature(sync[name]) == inspect.signature(memory[name]), name
        assert inspect.signature(coros[name]) == inspect.signature(memory[name]), name
        assert not inspect.iscoroutinefunction(sync[name]) and inspect.iscoroutinefunction(coros[name]), name
