"""The service's OpenAPI document, made to say what the responses really hold.

Error responses are RFC 9457 problem details sent as ``application/problem+json``: the document types them under
that media type (:func:`problem_responses`), so that a generated client parses every 4xx and 5xx it declares.

tmem's dates are naive: a conversation's own wall clock, with no zone (docs/design-decisions.md), and the responses
write them as ISO 8601 without an offset (``2023-05-08T13:56:00``). JSON Schema's ``date-time`` format is RFC 3339,
which requires an offset, so a validating client (schemathesis' response check found it) rejects every such body. In
the schemas that responses use, ``date-time`` is declared as ``date-time-local`` instead (the OpenAPI format
registry's name for a date-time without offset); request bodies keep ``date-time``, as they accept either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

LOCAL = "date-time-local"
NOTE = "ISO 8601 date and time without a zone offset (the conversation's own clock)."


def _refs(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            found.add(ref.rsplit("/", 1)[-1])
        for value in node.values():
            _refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _refs(value, found)


def _closure(spec: dict[str, Any], roots: set[str]) -> set[str]:
    """The component schemas named in ``roots`` and every one they reach."""
    components: dict[str, Any] = spec.get("components", {}).get("schemas", {})
    seen: set[str] = set()
    while roots:
        name = roots.pop()
        if name in seen or name not in components:
            continue
        seen.add(name)
        _refs(components[name], roots)
    return seen


def _uses(spec: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(component schemas reachable from success responses, those reachable from requests)."""
    responses: set[str] = set()
    requests: set[str] = set()
    for operations in spec.get("paths", {}).values():
        for op in operations.values():
            for status, response in op.get("responses", {}).items():
                if str(status).startswith("2"):
                    _refs(response, responses)
            _refs(op.get("requestBody", {}), requests)
            _refs(op.get("parameters", []), requests)
    return _closure(spec, responses), _closure(spec, requests)


def _localise(node: Any) -> None:
    if isinstance(node, dict):
        if node.get("format") == "date-time":
            node["format"] = LOCAL
            node.setdefault("description", NOTE)
        for value in node.values():
            _localise(value)
    elif isinstance(node, list):
        for value in node:
            _localise(value)


def local_datetimes(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with the response schemas' ``date-time`` formats declared as ``date-time-local`` (in place)."""
    components: dict[str, Any] = spec.get("components", {}).get("schemas", {})
    responses, requests = _uses(spec)
    for name in responses - requests:
        _localise(components[name])
    return spec


PROBLEM_JSON = "application/problem+json"


def problem_responses(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with every error response typed under the media type the service sends (in place): FastAPI puts a
    route's error model under ``application/json`` and leaves ``application/problem+json`` without a schema, so a
    client generated from the document could not parse any 4xx body. Each error response is declared as what it is:
    ``application/problem+json`` with the ``Problem`` schema."""
    for operations in spec.get("paths", {}).values():
        for op in operations.values():
            for status, response in op.get("responses", {}).items():
                content = response.get("content", {})
                if str(status)[:1] in "45" and PROBLEM_JSON in content and "application/json" in content:
                    content[PROBLEM_JSON] = content.pop("application/json")
    return spec


def install(app: FastAPI) -> None:
    """Serve the corrected document at /openapi.json (built once, as FastAPI does)."""
    build: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = problem_responses(local_datetimes(build()))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
