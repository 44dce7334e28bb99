"""Configurations that remember which fields their caller set: explicit overrides as data.

A recipe resolved per space (the ``auto`` retrieval preset, the context layout) takes each field from the space kind's
values unless the caller set it, even to its default. Which fields were set is the field ``explicit`` of the model,
not pydantic's record of the fields given to the constructor (``model_fields_set``), which a dump-and-validate round
trip loses: every field dumped is "set" again. ``explicit`` is dumped like any other field, so
``Model.model_validate_json(cfg.model_dump_json()) == cfg``; input without it (a constructor call, a request's JSON)
records the keys it holds.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Self

from pydantic import BaseModel, Field, PlainSerializer, model_validator

# Fields that describe a configuration rather than override one of its values.
NOT_OVERRIDES = frozenset({"name", "explicit"})

Names = Annotated[frozenset[str], PlainSerializer(sorted, return_type=list[str], when_used="json")]


class Overridable(BaseModel):
    """A frozen configuration whose ``explicit`` field names the fields its caller set (see the module)."""

    explicit: Names = Field(
        default=frozenset(),
        description="Fields the caller set, kept through a JSON round trip (computed from the given keys when absent): "
        "a space's recipe never replaces them.",
    )
    what: ClassVar[str] = "configuration"  # how an error names the model

    @model_validator(mode="before")
    @classmethod
    def _record_explicit(cls, data: Any) -> Any:
        if isinstance(data, dict) and "explicit" not in data:
            aliases = {f.alias: name for name, f in cls.model_fields.items() if f.alias}
            data = {**data, "explicit": frozenset(aliases.get(k, k) for k in data) - NOT_OVERRIDES}
        return data

    @model_validator(mode="after")
    def _check_explicit(self) -> Self:
        unknown = sorted(self.explicit - (set(type(self).model_fields) - NOT_OVERRIDES))
        if unknown:
            raise ValueError(f"explicit names {', '.join(unknown)}, not fields of this {self.what}")
        return self

    def values(self) -> dict[str, Any]:
        """Every field's value by field name (Python objects, not JSON)."""
        return {name: getattr(self, name) for name in type(self).model_fields}

    def replace(self, **changes: Any) -> Self:
        """A validated copy with fields changed (field names or their aliases); the changed fields become explicit,
        so that a space's recipe never replaces them."""
        aliases = {f.alias: name for name, f in type(self).model_fields.items() if f.alias}
        named = {aliases.get(k, k): v for k, v in changes.items()}
        explicit = self.explicit | (frozenset(named) - NOT_OVERRIDES)
        return type(self).model_validate({**self.values(), **named, "explicit": explicit})

    def defaults_from(self, values: dict[str, Any], **changes: Any) -> Self:
        """A copy taking ``values`` for every field its caller did not set (``explicit`` unchanged), plus
        ``changes`` (not recorded as explicit): how a recipe is resolved for a space."""
        kept = {k: v for k, v in values.items() if k not in self.explicit}
        return type(self).model_validate({**self.values(), **kept, **changes, "explicit": self.explicit})
