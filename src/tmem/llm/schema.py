"""JSON schemas for structured output, made compatible with OpenAI's strict ``json_schema`` mode.

Strict mode accepts a subset of JSON Schema: every object must say ``additionalProperties: false`` and list *all* its
properties as ``required`` (optional values are expressed as ``anyOf [..., null]``, which pydantic already emits for
``X | None``), ``$ref`` may not carry sibling keywords, and ``default`` is not supported. :func:`strict_json_schema`
rewrites pydantic's schema accordingly; it never changes what the pydantic model itself accepts, so validation on our
side stays the authority.

A model with a free-form mapping (``dict[str, X]``) cannot be expressed strictly; :func:`strict_json_schema` then
reports ``strict=False`` and the request is sent with ``strict: false`` (the server treats the schema as guidance).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

# Keywords dropped everywhere: ``title`` only repeats names (and costs prompt tokens); ``default`` is rejected by strict
# mode and meaningless once every property is required.
_DROPPED = ("title", "default")


@dataclass(frozen=True)
class StrictSchema:
    name: str
    schema: dict[str, Any]
    strict: bool


def schema_name(model: type[BaseModel]) -> str:
    """The name sent as ``json_schema.name`` (OpenAI allows ``[a-zA-Z0-9_-]{1,64}``)."""
    cleaned = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in model.__name__)
    return cleaned[:64] or "Output"


def strict_json_schema(model: type[BaseModel]) -> StrictSchema:
    """Pydantic's JSON schema of ``model`` rewritten for strict structured output."""
    raw = model.model_json_schema()
    root = copy.deepcopy(raw)
    defs: dict[str, Any] = root.get("$defs", {})
    state = _State(defs=defs)
    out = state.visit(root)
    if state.defs_used and defs:
        out["$defs"] = {name: state.visit(copy.deepcopy(defs[name])) for name in sorted(defs)}
    else:
        out.pop("$defs", None)
    return StrictSchema(name=schema_name(model), schema=out, strict=state.strict)


@dataclass
class _State:
    defs: dict[str, Any]
    strict: bool = True
    defs_used: bool = False

    def _resolve(self, ref: str) -> dict[str, Any]:
        prefix = "#/$defs/"
        if not ref.startswith(prefix) or ref[len(prefix) :] not in self.defs:
            raise ValueError(f"Unsupported $ref {ref!r} in an output schema; only local #/$defs/ references work.")
        return copy.deepcopy(self.defs[ref[len(prefix) :]])

    def visit(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self.visit(entry) for entry in node]
        if not isinstance(node, dict):
            return node
        node = {key: value for key, value in node.items() if key not in _DROPPED and key != "$defs"}
        if "$ref" in node:
            if len(node) == 1:
                self.defs_used = True
                return node
            # A $ref with siblings (e.g. a field description) is inlined: strict mode rejects the combination.
            resolved = self._resolve(node.pop("$ref"))
            resolved.update(node)
            return self.visit(resolved)
        if "allOf" in node and len(node["allOf"]) == 1:
            (only,) = node.pop("allOf")
            merged = dict(only)
            merged.update(node)
            return self.visit(merged)
        for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            if key in node:
                node[key] = self.visit(node[key])
        if "items" in node:
            node["items"] = self.visit(node["items"])
        if "properties" in node:
            props = node["properties"]
            node["properties"] = {name: self.visit(sub) for name, sub in props.items()}
            node["required"] = list(props)
            node["additionalProperties"] = False
        elif node.get("type") == "object":
            extra = node.get("additionalProperties")
            if isinstance(extra, dict):
                # dict[str, X]: a free-form map has no strict form; keep the schema as guidance only.
                node["additionalProperties"] = self.visit(extra)
                self.strict = False
            elif extra is None:
                node["additionalProperties"] = False
        return node
