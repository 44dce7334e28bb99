"""The typed HTTP contract: every success body has a named model in /openapi.json, operation ids are readable, items
can be listed with filters and pages, and a client generated from the schema alone can call search."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as fuzz_settings
from schemathesis import GenerationMode
from schemathesis.checks import content_type_conformance, not_a_server_error, response_schema_conformance

from tests.support.live_server import LiveServer
from tests.test_service import NO_AUTO_BUILD, auth, dev_messages, make_keys, wait_job
from tmem.service import create_app
from tmem.settings import Settings

OPERATIONS = {
    "list_spaces",
    "add_messages",
    "build_space",
    "list_jobs",
    "get_job",
    "export_space",
    "delete_space",
    "search",
    "get_context",
    "ask",
    "list_items",
    "get_item",
    "update_item",
    "delete_item",
    "item_history",
    "forget",
    "list_erasures",
    "get_erasure",
}


def untyped(spec: dict[str, Any]) -> list[str]:
    """Where a success response body (or anything it contains) is not typed: a free-form object (no properties, any
    additional properties), an array of anything, or a schema with no type at all."""
    components: dict[str, Any] = spec.get("components", {}).get("schemas", {})
    found: list[str] = []
    seen: set[str] = set()

    def walk(schema: dict[str, Any], where: str) -> None:
        if "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[-1]
            if name not in seen:
                seen.add(name)
                walk(components[name], name)
            return
        props: dict[str, Any] = schema.get("properties", {})
        for prop, sub in props.items():
            walk(sub, f"{where}.{prop}")
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            walk(extra, f"{where}[*]")
        for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            for n, sub in enumerate(schema.get(key, [])):
                walk(sub, f"{where}<{n}>")
        if isinstance(schema.get("items"), dict):
            walk(schema["items"], f"{where}[]")
        if not any(k in schema for k in ("type", "anyOf", "oneOf", "allOf", "enum", "const")):
            found.append(f"{where}: no type")
        elif schema.get("type") == "object" and not props and extra in (None, True, {}):
            found.append(f"{where}: free-form object")
        elif schema.get("type") == "array" and not schema.get("items") and not schema.get("prefixItems"):
            found.append(f"{where}: array of anything")

    for path, operations in spec["paths"].items():
        for method, op in operations.items():
            for status, response in op["responses"].items():
                if not status.startswith("2"):
                    continue
                content = response.get("content")
                if not content:
                    found.append(f"{method.upper()} {path} {status}: no body schema")
                for media in (content or {}).values():
                    walk(media.get("schema", {}), f"{method.upper()} {path} {status}")
    return found


def test_the_checker_finds_untyped_bodies() -> None:
    """The check below must be able to fail: an untyped body (the old `dict[str, Any]` route) is reported."""
    spec = {
        "paths": {
            "/x": {"get": {"responses": {"200": {"content": {"application/json": {"schema": {"$ref": "#/c"}}}}}}}
        },
        "components": {
            "schemas": {
                "c": {
                    "type": "object",
                    "properties": {
                        "a": {"type": "object", "additionalProperties": True},
                        "b": {},
                        "n": {"type": "integer"},
                    },
                }
            }
        },
    }
    assert untyped(spec) == ["c.a: free-form object", "c.b: no type"]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "mem", llm="none", embed_backend="hash", **NO_AUTO_BUILD)  # type: ignore[arg-type]


def test_every_success_response_is_typed_with_a_readable_operation_id(settings: Settings) -> None:
    spec = create_app(settings).openapi()
    assert untyped(spec) == []
    ids = [op["operationId"] for ops in spec["paths"].values() for op in ops.values()]
    assert sorted(ids) == sorted(OPERATIONS)
    assert "/docs" not in spec["paths"] and "/redoc" not in spec["paths"]


@pytest.fixture
def built(settings: Settings) -> Iterator[tuple[str, str]]:
    """A live server with one built space ``c`` of tenant acme: (url, key)."""
    key = make_keys(settings, "acme")["acme"]
    with LiveServer(create_app(settings)) as server, httpx.Client(base_url=server.url, headers=auth(key)) as client:
        assert client.post("/v1/spaces/c/messages", json={"messages": dev_messages(2)[0]}).status_code == 200
        assert wait_job(client, client.post("/v1/spaces/c/build").json()["job"])["state"] == "succeeded"
        yield server.url, key


def test_list_items_filters_and_pages(built: tuple[str, str]) -> None:
    url, key = built
    with httpx.Client(base_url=url, headers=auth(key), timeout=60) as client:
        everything = client.get("/v1/spaces/c/export").json()["items"]
        assert len(everything) > 3
        pages: list[dict[str, Any]] = []
        offset: int | None = 0
        while offset is not None:
            page = client.get("/v1/spaces/c/items", params={"limit": 2, "offset": offset}).json()
            assert page["space"] == "c" and page["total"] == len(everything) and len(page["items"]) <= 2
            pages += page["items"]
            offset = page["next_offset"]
        assert sorted(i["id"] for i in pages) == sorted(i["id"] for i in everything)
        assert [i["seq"] for i in pages] == sorted(i["seq"] for i in pages)

        speaker = everything[0]["speaker"]
        by_speaker = client.get("/v1/spaces/c/items", params={"speaker": speaker, "limit": 500}).json()
        assert by_speaker["total"] == sum(i["speaker"] == speaker for i in everything) > 0
        assert {i["speaker"] for i in by_speaker["items"]} == {speaker}

        word = everything[0]["text"].split()[-1].strip(".,").upper()
        by_text = client.get("/v1/spaces/c/items", params={"text": word, "limit": 500}).json()
        assert by_text["total"] == sum(word.casefold() in i["text"].casefold() for i in everything) > 0

        dated = sorted({i["date"] for i in everything if i["date"]})
        assert dated, "the dev conversation's items carry dates"
        first = client.get("/v1/spaces/c/items", params={"until": dated[0], "limit": 500}).json()
        assert 0 < first["total"] < len(everything) or len(dated) == 1
        assert all(i["date"] is not None and i["date"] <= dated[0] for i in first["items"])
        kinds = client.get("/v1/spaces/c/items", params={"kind": "connected", "limit": 500}).json()
        assert kinds["total"] == sum(i["kind"] == "connected" for i in everything)

        bad = client.get("/v1/spaces/c/items", params={"since": "2024-01-02", "until": "2024-01-01"})
        assert bad.status_code == 422 and "swap" in bad.json()["detail"]
        assert client.get("/v1/spaces/c/items", params={"limit": 0}).status_code == 422


def test_problem_details_name_http_endpoints_not_cli_commands(built: tuple[str, str]) -> None:
    url, key = built
    with httpx.Client(base_url=url, headers=auth(key), timeout=60) as client:
        for response in (
            client.get("/v1/spaces/c/items/nope"),
            client.get("/v1/spaces/c/items/nope/history"),
            client.patch("/v1/spaces/c/items/nope", json={"text": "x"}),
            client.delete("/v1/spaces/c/items/nope"),
        ):
            detail = response.json()["detail"]
            assert response.status_code == 404
            assert "GET /v1/spaces/c/items" in detail and "tmem " not in detail and "`" not in detail
        docs = client.get("/docs")
        assert docs.status_code == 404 and "/openapi.json" in docs.json()["detail"]


def test_a_client_generated_from_the_schema_calls_search(built: tuple[str, str], tmp_path: Path) -> None:
    """openapi-python-client (dev extra) generates a package from /openapi.json alone, offline; it calls search and
    list_items and gets typed models back."""
    url, key = built
    spec = tmp_path / "openapi.json"
    spec.write_text(httpx.get(f"{url}/openapi.json").text)
    generated = subprocess.run(
        [
            sys.executable,
            "-m",
            "openapi_python_client",
            "generate",
            "--path",
            str(spec),
            "--output-path",
            str(tmp_path / "gen"),
            "--meta",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert generated.returncode == 0, generated.stdout + generated.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        package = tmp_path / "gen"
        package.rename(tmp_path / "tmem_generated")
        client_mod = importlib.import_module("tmem_generated.client")
        search_mod = importlib.import_module("tmem_generated.api.recall.search")
        models = importlib.import_module("tmem_generated.models")
        with client_mod.AuthenticatedClient(base_url=url, token=key) as client:
            result = search_mod.sync(space="c", client=client, body=models.SearchIn(q="What did Caroline research?"))
        assert isinstance(result, models.SearchResult), result
        assert result.scenes and all(isinstance(hit, models.SceneHit) for hit in result.scenes)
        assert result.query == "What did Caroline research?"
        with client_mod.AuthenticatedClient(base_url=url, token=key) as client:  # a 4xx is parsed too (issue 34)
            missing = search_mod.sync_detailed(space="nope", client=client, body=models.SearchIn(q="anything"))
        assert missing.status_code == 404 and isinstance(missing.parsed, models.Problem), missing.content
        assert missing.parsed.status == 404 and "nope" in str(missing.parsed.detail)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == "tmem_generated" or m.startswith("tmem_generated.")]:
            del sys.modules[name]


CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]


def _conformance(operation: Any, mode: GenerationMode, url: str, key: str, seen: dict[str, int]) -> Callable[[], None]:
    @given(case=operation.as_strategy(mode))
    @fuzz_settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(case: Any) -> None:
        if "space" in (case.path_parameters or {}) and mode is GenerationMode.POSITIVE:
            case.path_parameters["space"] = "c"  # reach the built space, so success bodies are checked too
        seen[operation.label] = seen.get(operation.label, 0) + 1
        case.call_and_validate(base_url=url, headers=auth(key), checks=CHECKS)

    return run


def test_fuzzed_responses_conform_to_the_schema(built: tuple[str, str]) -> None:
    """Schemathesis over every operation, positive and negative cases: each response, success or problem, matches
    the schema's declared model and content type (not just 'no 5xx'), on a server with one built space."""
    url, key = built
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    seen: dict[str, int] = {}
    for result in schema.get_all_operations():
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            _conformance(result.ok(), mode, url, key, seen)()
    assert len(seen) == len(OPERATIONS)
