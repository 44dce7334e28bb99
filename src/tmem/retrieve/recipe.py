"""One resolver: what a request asks for (:class:`Asked`) becomes the effective recipe of its space (:class:`Recipe`).

A request names a retrieval config (a preset such as ``auto``, with the fields its caller set), a context layout and,
for a budgeted context, how many units the context may hold. :func:`resolve` turns that into what the cascade runs
and how the context is packed, once per search, where the space's kind is known (``Retriever.search``, the one call
site): the ``auto`` preset becomes ``extractive`` on a space built without an LLM and ``associative`` otherwise, each
field the caller did not set taking that recipe's value; the layout takes the values of the recipe the space got;
the lists are deepened to fill the context. The resolved layout travels with the search result
(``SearchResult.layout``), so the packer reads it and never resolves again.

Which fields a caller set is data (``explicit``, :mod:`tmem.retrieve.explicit`), so a config sent as JSON resolves as
the same config in Python does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tmem.retrieve.config import PRESET_OVERRIDES, RetrievalConfig
from tmem.retrieve.layout import ContextLayout

AUTO = "auto"
MAX_CONTEXT_DEPTH = 100_000  # the deepest a budgeted context searches (a larger budget searches as deep as this)
UNIT_TOKENS = 20  # a fact line is ~20 tokens, a turn ~25: a budget of N tokens holds about N // 20 units


def context_depth(max_tokens: int | None) -> int:
    """How many units a context of ``max_tokens`` tokens may hold (0 for no budget: a plain search's lists)."""
    if max_tokens is None:
        return 0
    return min(max(1, max_tokens // UNIT_TOKENS), MAX_CONTEXT_DEPTH)


@dataclass(frozen=True)
class Asked:
    """What one search asks for, before it is resolved for its space."""

    config: RetrievalConfig
    layout: ContextLayout = field(default_factory=ContextLayout)
    depth: int = 0  # units the budgeted context may hold (context_depth); 0: a plain search

    def deeper(self, depth: int) -> Asked:
        """The same request searching at least ``depth`` units deep."""
        return self if depth <= self.depth else Asked(self.config, self.layout, min(depth, MAX_CONTEXT_DEPTH))


def asked(config: RetrievalConfig | Asked, layout: ContextLayout | None = None, max_tokens: int | None = None) -> Asked:
    """The request of a config, a layout and a token budget (one already asked: searching at least as deep as the
    budget needs)."""
    if isinstance(config, Asked):
        return config.deeper(context_depth(max_tokens))
    return Asked(config, layout or ContextLayout(), context_depth(max_tokens))


@dataclass(frozen=True)
class Recipe:
    """The effective recipe of one search: the config the cascade runs (no ``auto`` left, lists deepened to fill
    ``depth`` units) and the layout its context is packed with (every field resolved)."""

    config: RetrievalConfig
    layout: ContextLayout
    depth: int


def kind_of(config: RetrievalConfig, descriptive_only: bool) -> str:
    """The recipe a space gets: ``auto`` resolves to ``extractive`` or ``associative`` by the space's kind; any
    other preset is itself (``auto:associative`` and ``associative`` are one kind)."""
    name = config.name
    if name == AUTO:
        return "extractive" if descriptive_only else "associative"
    return name.removeprefix(f"{AUTO}:")


def resolve(request: Asked, *, descriptive_only: bool, never_built: bool = False) -> Recipe:
    """The effective recipe of ``request`` on a space of the given kind (see the module). On a space never built
    (every hit a raw turn ranked over whole lists) the context fuses those ranks with the search's ``k0``, as flat
    hybrid retrieval does, unless the caller set ``context_k0`` (docs/retrieval.md)."""
    config, kind = request.config, kind_of(request.config, descriptive_only)
    if config.name == AUTO:
        config = config.defaults_from(PRESET_OVERRIDES[kind], name=f"{AUTO}:{kind}")
    layout = request.layout.defaults_from(ContextLayout.auto_values(kind))
    if never_built and "context_k0" not in layout.explicit:
        layout = layout.defaults_from({}, context_k0=config.k0)
    return Recipe(_deepened(config, layout, request.depth), layout, request.depth)


def _deepened(config: RetrievalConfig, layout: ContextLayout, depth: int) -> RetrievalConfig:
    """The recipe with lists deep enough for a budgeted context of ``depth`` units: as many items and raw turns, and
    as many scenes as fit when each enters as one turn (an eighth as many when its excerpt holds its neighbours
    too). A plain search (depth 0) is returned unchanged."""
    if depth == 0:
        return config
    scenes = depth // 8 if layout.excerpt_neighbours else depth
    return config.defaults_from(
        {},
        k_scenes=max(config.k_scenes, scenes),
        k_items=max(config.k_items, depth),
        turn_top=max(config.turn_top, depth),
        unbuilt_top=max(config.unbuilt_top, depth) if config.unbuilt_top else 0,
    )
