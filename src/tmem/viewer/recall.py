"""The "why recalled" page: the search form's values, the cascade's result and the context a reader would get."""

from __future__ import annotations

import json
from dataclasses import dataclass

from tmem.answer.budget import DEFAULT_CONTEXT_TOKENS, Context
from tmem.errors import InputError
from tmem.memory import Memory
from tmem.retrieve.config import PRESETS, SWITCHES, RetrievalConfig
from tmem.retrieve.layout import ContextLayout, as_layout
from tmem.retrieve.types import SearchResult
from tmem.scope import Scope

SWITCH_LABELS = {
    "SL": "SL: scene layer (no scene hits as evidence)",
    "IC": "IC: item channel (no item hits)",
    "ET+BT": "ET+BT: Entity and Bridge triggers (no item-trigger route)",
    "PS": "PS: persona (none beside the evidence)",
    "TF": "TF: topic filter (every scene admitted)",
    "ST": "ST: Scene triggers (no scene-trigger route)",
    "HT": "HT: Horizon triggers (no horizon route)",
}
DEFAULT_BUDGET = DEFAULT_CONTEXT_TOKENS
MAX_QUERY = 2000
MAX_BUDGET = 1_000_000
ORDERS = ("rank", "date")  # ContextLayout.order


@dataclass(frozen=True)
class SearchForm:
    """The search form's values as submitted (a GET form, so that a search is a link)."""

    query: str = ""
    preset: str = "auto"
    without: tuple[str, ...] = ()
    max_tokens: int = DEFAULT_BUDGET  # the name every other front end gives the token budget
    layout_text: str = ""  # the layout field as typed: a JSON object of ContextLayout fields ("": the recipe's)
    layout: ContextLayout | None = None  # None: every field per recipe

    @classmethod
    def parse(
        cls,
        query: str,
        preset: str,
        without: list[str],
        max_tokens: str,
        default_preset: str,
        layout: str = "",
        *,
        order: str = "",
    ) -> SearchForm:
        """Validate the raw form fields; InputError saying which field to fix. ``layout`` is a JSON object of
        ContextLayout fields, ``order`` the layout's order (``rank``, ``date``; empty: the layout's or the recipe's,
        docs/context.md)."""
        query = query.strip()
        if len(query) > MAX_QUERY:
            raise InputError(f"The query is {len(query)} characters long; shorten it to {MAX_QUERY} or fewer.")
        preset = preset or default_preset
        if preset not in PRESETS:
            raise InputError(f"Unknown preset {preset!r}; choose one of {', '.join(PRESETS)}.")
        bad = [w for w in without if w not in SWITCHES]
        if bad:
            raise InputError(f"Unknown switch {', '.join(bad)}; use {', '.join(SWITCHES)}.")
        try:
            tokens = int(max_tokens) if max_tokens.strip() else DEFAULT_BUDGET
        except ValueError:
            raise InputError(f"The token budget (max_tokens) must be a whole number, got {max_tokens!r}.") from None
        if not 0 <= tokens <= MAX_BUDGET:
            raise InputError(f"The token budget (max_tokens) must be between 0 and {MAX_BUDGET:,}, got {tokens:,}.")
        ordered = tuple(s for s in SWITCHES if s in without)
        if order and order not in ORDERS:
            raise InputError(f"Unknown context order {order!r}; choose {' or '.join(ORDERS)} (or leave it empty).")
        laid = _layout(layout.strip())
        if order:
            fields = {name: getattr(laid, name) for name in laid.explicit} if laid is not None else {}
            laid = as_layout({**fields, "order": order})
        return cls(
            query=query, preset=preset, without=ordered, max_tokens=tokens, layout_text=layout.strip(), layout=laid
        )

    @property
    def order(self) -> str:
        """The order the form asked for ('' when the recipe's)."""
        return self.layout.order if self.layout is not None and "order" in self.layout.explicit else ""

    def config(self) -> RetrievalConfig:
        cfg = RetrievalConfig.preset(self.preset)
        return cfg.without(*self.without) if self.without else cfg


def example_query(speakers: list[str]) -> str:
    """The search box's placeholder, from the space's own data (its speakers), never another space's question."""
    if not speakers:
        return "e.g. What was decided last time?"
    return f"e.g. What did {speakers[0]} talk about last time?"


def _layout(text: str) -> ContextLayout | None:
    """The layout field: empty, or a JSON object of ContextLayout fields (InputError saying what to write)."""
    if not text:
        return None
    if len(text) > MAX_QUERY:
        raise InputError(f"The layout is {len(text)} characters long; shorten it to {MAX_QUERY} or fewer.")
    try:
        fields = json.loads(text)
    except ValueError:
        fields = None
    if not isinstance(fields, dict):
        raise InputError('The layout must be a JSON object of layout fields, e.g. {"excerpt_neighbours": true}.')
    return as_layout(fields)


@dataclass
class Recall:
    """One search of the form: the cascade's result and the context a reader gets within the budget."""

    form: SearchForm
    result: SearchResult
    context: Context


def recall(memory: Memory, key: Scope, form: SearchForm) -> Recall:
    """Run the search of ``form`` in the space stored under ``key``: the budgeted context (``Memory.recall``) and the
    search it was packed from (the route tables show what the context was packed from), with the form's
    configuration and layout."""
    result, context = memory.recall(
        key, form.query, max_tokens=form.max_tokens, config=form.config(), layout=form.layout
    )
    return Recall(form=form, result=result, context=context)
