"""Schemathesis against the OpenAPI schema the live server serves at /openapi.json: bounded (a few positive and a few
negative examples per operation), and never a 5xx."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from tests.support.live_server import LiveServer
from tests.test_service import make_keys
from tmem.service import create_app
from tmem.settings import Settings

EXAMPLES = 5  # per operation and mode: the whole run stays well under a minute


def _fuzz(
    operation: Any, mode: GenerationMode, url: str, headers: dict[str, str], seen: dict[str, int]
) -> Callable[[], None]:
    @given(case=operation.as_strategy(mode))
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(case: Any) -> None:
        seen[operation.label] = seen.get(operation.label, 0) + 1
        case.call_and_validate(base_url=url, headers=headers, checks=[not_a_server_error])

    return run


def test_openapi_schema_fuzzed_without_server_errors(tmp_path: Path) -> None:
    cfg = Settings(home=tmp_path / "mem", llm="none", embed_backend="hash")
    key = make_keys(cfg, "acme")["acme"]
    headers = {"Authorization": f"Bearer {key}"}
    seen: dict[str, int] = {}
    with LiveServer(create_app(cfg)) as server:
        schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) >= 8
        for operation in operations:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                _fuzz(operation, mode, server.url, headers, seen)()
    assert set(seen) == {op.label for op in operations} and min(seen.values()) >= 2
