"""The layout of a budgeted context: what orders its hits and how its text is laid out (docs/retrieval.md).

The retrieval recipe (:class:`tmem.retrieve.config.RetrievalConfig`) says what a search finds; the layout says how a
budgeted context (``Memory.context``, ``Memory.ask``) packs what was found into text. Like the ``auto`` preset, a
layout is resolved per recipe (:func:`tmem.retrieve.recipe.resolve`): each field the caller did not set takes the
value of the recipe the space gets (``extractive`` on a space built without an LLM, ``associative`` on an LLM-built
one; the field's default under any other preset).

To add a layout field, declare it here once: its type annotated with :class:`Auto` (its value under each recipe
that differs from the default), its default and its description (which the HTTP service's schema and the docs show). The packer
(:func:`tmem.answer.budget.pack_for`) reads it from the resolved layout.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, TypeAlias

from pydantic import BeforeValidator, ConfigDict, Field, PlainSerializer, ValidationError

from tmem.errors import InputError
from tmem.retrieve.explicit import Overridable
from tmem.retrieve.routes import RouteName, parse_routes

# The recipes whose layout differs from the defaults: those the `auto` preset picks per space kind.
LayoutKind = Literal["extractive", "associative"]
LAYOUT_KINDS: tuple[LayoutKind, ...] = ("extractive", "associative")


def _routes(value: object) -> object:
    if isinstance(value, str):
        value = (value,)
    return parse_routes(value) if isinstance(value, Iterable) else value


def _route_list(routes: frozenset[RouteName]) -> list[str]:
    """A set of routes as JSON, in the route table's order: two equal sets dump the same list whatever order
    they were built in (a set's iteration order is not)."""
    order = list(RouteName)
    return [r.value for r in sorted(routes, key=order.index)]


# Route names, or prefixes ending in '.' that stand for every route they start (validated: an unknown one is refused).
Routes = Annotated[frozenset[RouteName], BeforeValidator(_routes), PlainSerializer(_route_list, when_used="json")]

# A query whose best BM25 turns hold under a quarter of its IDF mass has no lexical anchor (docs/retrieval.md).
ANCHOR_FLOOR = 0.25

# Dense similarity over the raw turns no build holds yet: it orders an anchorless context on every space, so a message
# added since the last build can recall by association like any other turn (docs/retrieval.md).
UNBUILT_DENSE = RouteName.TURN_UNBUILT_DENSE
# What still orders the context of an anchorless query on an LLM-built space: the trigger routes that rehearse
# situations (Scene, Horizon, Bridge) and dense similarity over raw turns (built or not) and scenes.
ASSOCIATIVE_ROUTES = frozenset(
    {
        RouteName.TURN_DENSE,
        UNBUILT_DENSE,
        RouteName.SCENE_DENSE,
        RouteName.SCENE_TRIGGER_SCENE,
        RouteName.SCENE_TRIGGER_HORIZON,
        RouteName.ITEM_TRIGGER_BRIDGE,
    }
)


@dataclass(frozen=True)
class Auto:
    """A layout field's values under the recipes that differ from its default: ``Annotated[int, Auto(extractive=0)]``
    (None: the default)."""

    extractive: Any = None
    associative: Any = None

    def value(self, kind: str) -> Any:
        return getattr(self, kind, None) if kind in LAYOUT_KINDS else None


class ContextLayout(Overridable):
    """How a budgeted context orders and lays out its hits. Fields not set explicitly are resolved per recipe."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    what: ClassVar[str] = "context layout"

    context_k0: Annotated[int, Auto(extractive=0, associative=3)] = Field(
        default=1,
        ge=0,
        le=1_000,
        description="RRF constant of the budgeted context's priority order over every route's list "
        "(docs/retrieval.md).",
    )
    excerpt_neighbours: Annotated[bool, Auto(associative=False)] = Field(
        default=True,
        description="A scene hit's excerpt in a budgeted context holds the turns beside its best-matched turn (False: "
        "the best-matched turn alone, so that more scenes fit; docs/retrieval.md).",
    )
    scene_titles: Annotated[bool, Auto(associative=False)] = Field(
        default=True,
        description="A budgeted context shows each scene under its title (False: the turns of a session under its "
        "date, as on an extractive space; docs/retrieval.md).",
    )
    lexical_floor: Annotated[float | None, Auto(extractive=ANCHOR_FLOOR, associative=ANCHOR_FLOOR)] = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="A query whose lexical anchor (share of its IDF mass that its best BM25 turns contain) is under "
        "this is anchorless: the budgeted context then orders hits by the `anchorless_routes` only (docs/retrieval.md). "
        "None = every route always counts.",
    )
    anchorless_routes: Annotated[
        Routes, Auto(extractive=frozenset({RouteName.TURN_DENSE, UNBUILT_DENSE}), associative=ASSOCIATIVE_ROUTES)
    ] = Field(
        default=frozenset(),
        description="Routes that still count for an anchorless query (given as names, or prefixes ending in '.').",
    )

    order: Literal["date", "rank"] = Field(
        default="date",
        description="Where the parts of a budgeted context (a fact line; a block of turns, ranked by the first hit "
        "that opened it) land: 'date' reads newest first (on an LLM-built space the facts under 'Facts:', then the "
        "blocks; on an extractive one a single timeline); 'rank' reads them in the order the context's priority ranked "
        "them, best first. Dates stay on every line and a changed fact's current value before its older ones "
        "(docs/context.md).",
    )
    lead: int = Field(
        default=0,
        ge=0,
        le=1_000,
        description="With order 'date': the number of best-ranked parts read first, in rank order, before the rest "
        "as one timeline newest first (0: none; docs/context.md).",
    )

    @property
    def name(self) -> str:
        """The layout's placement as one word: 'date', 'rank' or 'leadN' (:func:`placement`)."""
        return f"lead{self.lead}" if self.order == "date" and self.lead else self.order

    @classmethod
    def of_recipe(cls, kind: str) -> ContextLayout:
        """The layout a context gets under the recipe ``kind`` (``extractive``, ``associative``; any other: the
        defaults) when its caller sets no field."""
        return cls().defaults_from(cls.auto_values(kind))

    @classmethod
    def auto_values(cls, kind: str) -> dict[str, Any]:
        """The values of the fields under the recipe ``kind`` (only those that differ from the defaults)."""
        out: dict[str, Any] = {}
        for name, field in cls.model_fields.items():
            for auto in (m for m in field.metadata if isinstance(m, Auto)):
                if auto.value(kind) is not None:
                    out[name] = auto.value(kind)
        return out


# What a front end accepts as a layout: a ContextLayout, its fields as a mapping, or None (every field per recipe).
Layout: TypeAlias = "ContextLayout | Mapping[str, Any] | None"


def as_layout(layout: Layout) -> ContextLayout:
    """The context layout of a request: a layout as given, or one from its fields (InputError naming a bad one);
    None: every field resolved per recipe."""
    if layout is None or isinstance(layout, ContextLayout):
        return layout or ContextLayout()
    try:
        return ContextLayout.model_validate(dict(layout))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "layout"
        raise InputError(f"Invalid context layout field {where}: {first['msg']} (see docs/retrieval.md).") from None


# The fields that moved from RetrievalConfig to the layout (an old request naming one is told where it went).
LAYOUT_FIELDS = frozenset(ContextLayout.model_fields) - {"explicit"}


def placement(name: str) -> dict[str, Any]:
    """The layout fields a placement name sets: 'date', 'rank' or 'leadN' (N >= 1: the N best-ranked parts first,
    then the date order); ValueError naming the choices for any other."""
    if name == "date":
        return {"order": "date", "lead": 0}
    if name == "rank":
        return {"order": "rank", "lead": 0}
    if name.startswith("lead") and name[4:].isdigit() and int(name[4:]) > 0:
        return {"order": "date", "lead": int(name[4:])}
    raise ValueError(f"unknown context layout {name!r}: use date, rank or leadN (N >= 1)")


def read_layout(values: str | Iterable[str] | None) -> ContextLayout | None:
    """A command line's ``--layout`` values (repeatable), merged left to right: a placement name (date, rank, leadN),
    a JSON object of ContextLayout fields, or one ``FIELD=VALUE`` (VALUE read as JSON when it parses, ``none`` as None,
    a comma list as a list, else as text). None when none is given (every field per recipe). InputError saying what
    to write for anything else."""
    if values is None:
        return None
    given = [values] if isinstance(values, str) else list(values)
    if not given:
        return None
    fields: dict[str, Any] = {}
    for value in given:
        fields.update(_layout_fields(value))
    return as_layout(fields)


def _layout_fields(value: str) -> dict[str, Any]:
    if value.lstrip().startswith("{"):
        try:
            fields = json.loads(value)
        except json.JSONDecodeError as exc:
            raise InputError(f"--layout {value!r}: not a JSON object ({exc.msg}).") from None
        if not isinstance(fields, dict):
            raise InputError(f"--layout {value!r}: not a JSON object of layout fields.")
        return fields
    name, sep, raw = value.partition("=")
    if sep:
        if not name.strip():
            raise InputError(f"--layout {value!r}: write FIELD=VALUE, e.g. --layout excerpt_neighbours=true.")
        try:
            parsed: Any = None if raw == "none" else json.loads(raw)
        except ValueError:
            parsed = raw.split(",") if "," in raw else raw
        return {name.strip(): parsed}
    try:
        return placement(value)
    except ValueError as exc:
        raise InputError(
            f'--layout: {exc}, a JSON object of layout fields such as {{"order": "rank"}}, or FIELD=VALUE.'
        ) from None
