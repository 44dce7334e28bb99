"""The context handed to a reader, within a token budget: :func:`recall_context` and :func:`pack_context`.

A search returns ranked hits of three kinds: items (distilled facts), scenes (stretches of raw turns) and, when the
turn route is on, raw turns. The context is built from *units*, each with an exact token cost:

* an item is one fact line ``- text (date)``;
* a raw turn is one line ``Speaker: text`` inside its block (the block header is paid by the first turn of the block
  that enters): a scene's block, or on an extractive space a session's (:mod:`tmem.answer.blocks`);
* a scene hit is an excerpt of the scene: its best-matched turn and the turns beside it, those not in the context yet
  and that fit (docs/retrieval.md).

Units are taken in one priority order (:func:`unit_order`) and added while they fit; a unit that would overflow is
skipped, so smaller later units can still use the rest. Tokens are those of a real tokenizer, cl100k by default
(``Settings.tokenizer``, :mod:`tmem.util.tokens`); the text's count is kept exact line by line after every addition,
and the whole text is counted once more before it is returned, so ``tokens <= max_tokens`` holds whatever the budget
(0 gives an empty text). The text reads newest first (:class:`tmem.answer.blocks.Draft`): the facts, then the
blocks of turns (on an extractive space one timeline, fact lines among the blocks), then the persona notes when they
still fit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from tmem.answer.blocks import PERSONA_HEADER, Draft, FactDate, Order
from tmem.answer.context import AnswerContext, format_persona
from tmem.answer.updates import current_first
from tmem.index.anchor import is_question
from tmem.models import Item, Scene, Turn
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.layout import ContextLayout
from tmem.retrieve.recipe import Asked, asked
from tmem.retrieve.routes import is_ranked_list
from tmem.retrieve.types import ItemHit, Route, SearchResult, TurnHit
from tmem.scope import Scope
from tmem.util.tokens import TokenCounter, default_counter

UnitKind = Literal["item", "scene", "turn"]
RouteFilter = Callable[[str], bool]
DEFAULT_CONTEXT_TOKENS = 2000  # what `tmem ask` and Memory.context hand a reader unless told otherwise


class ContextHit(BaseModel):
    """One hit that put something into the context, with the routes that reached it."""

    model_config = ConfigDict(frozen=True)

    kind: UnitKind
    id: str
    score: float
    routes: list[Route]
    turn_ids: list[str] = Field(description="Turns whose raw text (scene, turn) or fact (item) this hit added.")
    tokens: int = Field(description="Tokens the hit added to the context (the context's counter).")
    trimmed: bool = Field(
        default=False, description="A scene hit that put fewer than all its turns in (an excerpt, or cut to fit)."
    )


class Context(BaseModel):
    """The text handed to a reader and what it is made of; ``tokens <= max_tokens`` always."""

    model_config = ConfigDict(frozen=True)

    space: str
    query: str
    preset: str
    text: str
    tokens: int = Field(description="Tokens of the text, counted by ``counter``.")
    counter: str = Field(default="cl100k", description="The tokenizer that counted it (Settings.tokenizer).")
    max_tokens: int | None = Field(description="The budget; None when the whole search result was taken.")
    evidence_tokens: int = Field(description="Tokens of the facts and turns (the persona excluded).")
    persona_tokens: int
    hits: list[ContextHit] = Field(description="What entered, in the order it was taken (priority order).")
    turn_ids: list[str] = Field(description="Turns whose raw text or distilled fact is in the context.")
    left_out: int = Field(description="Hits of the search that did not fit (or fitted only in part).")
    unbuilt_turns: int = Field(
        default=0,
        description="Turns added after the last build (staleness): the context can hold them as raw turns only, since "
        "no scene, item or trigger holds them yet.",
    )
    descriptive_only: bool = False
    lexical_anchor: float | None = Field(
        default=None, description="Share of the query's IDF mass its best BM25 turns contain (docs/retrieval.md)."
    )
    anchorless: bool = Field(
        default=False,
        description="The anchor was under the preset's lexical_floor: only its anchorless_routes ordered the context.",
    )

    def as_answer_context(self) -> AnswerContext:
        """The same context in the shape the answerer and its records use."""
        evidence, _, persona = self.text.partition(PERSONA_HEADER)
        return AnswerContext(
            evidence=evidence.rstrip() or "(no memories were retrieved)",
            persona=persona.strip("\n"),
            evidence_tokens=self.evidence_tokens,
            persona_tokens=self.persona_tokens,
            scene_ids=[h.id for h in self.hits if h.kind == "scene"],
            item_ids=[h.id for h in self.hits if h.kind == "item"],
            turn_ids=self.turn_ids,
        )


class Searcher(Protocol):
    def search(self, space: Scope, query: str, config: RetrievalConfig | Asked | None = None) -> SearchResult: ...


# ------------------------------------------------------------------------------------------------ units


@dataclass
class _Unit:
    kind: UnitKind
    id: str
    score: float
    routes: list[Route]
    fact: str | None = None  # item: its fact line
    fact_turns: list[str] = field(default_factory=list)  # item: its source turns
    turns: list[Turn] = field(default_factory=list)  # scene / turn: candidate turns, best first
    scene: Scene | None = None
    item: Item | None = None  # item: the item (tmem.answer.updates reads its slot and date)

    def rrf(self, k0: int, counts: RouteFilter | None = None) -> float:
        return math.fsum(
            sorted(
                1.0 / (k0 + r.rank)
                for r in self.routes
                if is_ranked_list(r.name) and (counts is None or counts(r.name))
            )
        )


def _fact_date(unit: _Unit) -> FactDate:
    """Where a fact line goes among the others (newest first): its item's date, then its place in the conversation;
    a line without a date goes after every dated one."""
    item = unit.item
    return (item.date or "", item.seq) if item is not None else ("", 0)


def _fact_line(hit: ItemHit) -> str:
    # Items normally carry their date in the text; add the ISO date only when the text lacks its year.
    date = hit.item.date
    suffix = f" ({date})" if date and date[:4] not in hit.item.text else ""
    return f"- {hit.item.text}{suffix}"


def _scene_units(result: SearchResult, neighbours: bool = True) -> list[_Unit]:
    """Each scene hit as an excerpt: its best-matched turn, with the turn before and after it when ``neighbours``
    (a question and its answer sit in adjacent turns). The best-matched turn is the scene's turn ranked highest by
    the turn route, else the first source turn of its best item, else its first turn."""
    matched: dict[str, int] = {}
    for th in result.turns:
        matched.setdefault(th.turn.id, len(matched))
    for ih in result.items:
        for tid in ih.item.turn_ids:
            matched.setdefault(tid, len(matched))
    out = []
    for sh in result.scenes:
        turns = sorted(sh.turns, key=lambda t: t.seq)
        if not turns:
            continue
        best = min(range(len(turns)), key=lambda n: (matched.get(turns[n].id, len(matched)), n))
        excerpt = [turns[best]]
        if neighbours:
            excerpt += [turns[n] for n in (best - 1, best + 1) if 0 <= n < len(turns)]
        out.append(_Unit("scene", sh.scene.id, sh.score, sh.routes, turns=excerpt, scene=sh.scene))
    return out


def _item_units(items: Sequence[ItemHit]) -> list[_Unit]:
    return [
        _Unit(
            "item",
            h.item.id,
            h.score,
            h.routes,
            fact=_fact_line(h),
            fact_turns=list(h.source_turn_ids),
            item=h.item,
        )
        for h in items
    ]


def _turn_units(turns: Sequence[TurnHit], scenes: dict[str, Scene]) -> list[_Unit]:
    return [
        _Unit("turn", h.turn.id, h.score, h.routes, turns=[h.turn], scene=scenes.get(h.scene_id or "")) for h in turns
    ]


def unit_order(units: Sequence[_Unit], k0: int, counts: RouteFilter | None = None) -> list[_Unit]:
    """One priority order over every hit: RRF over the *route* lists (each unit scores ``sum over its routes of
    1 / (k0 + rank in that route)``), so the best of each route comes before anyone's tail and a unit several routes
    put near their top comes first. Ties go to the cheaper kind (item, turn, scene), then to search order. With
    ``counts``, only the routes it accepts score (an anchorless query, :func:`route_filter`)."""
    pref = {"item": 0, "turn": 1, "scene": 2}
    ranked = sorted(enumerate(units), key=lambda nu: (-nu[1].rrf(k0, counts), pref[nu[1].kind], nu[0]))
    return [u for _, u in ranked]


# ------------------------------------------------------------------------------------------------ packing


def route_filter(result: SearchResult, layout: ContextLayout | None = None) -> RouteFilter | None:
    """For an anchorless query (lexical anchor under the layout's ``lexical_floor``; on a space never built, not a
    direct question: ``is_question``), the routes still ordering the context: its ``anchorless_routes``; else None.
    ``layout``: the result's own (``SearchResult.layout``) unless given."""
    layout = layout or result.layout
    floor, anchor = layout.lexical_floor, result.lexical_anchor
    if floor is None or anchor is None or anchor >= floor:
        return None
    return None if result.never_built and is_question(result.query) else layout.anchorless_routes.__contains__


def pack_context(
    result: SearchResult,
    max_tokens: int | None,
    *,
    include_persona: bool = True,
    k0: int = 60,
    counts: RouteFilter | None = None,
    counter: TokenCounter | None = None,
    neighbours: bool = True,
    titles: bool = True,
    order: Order = "date",
    lead: int = 0,
) -> Context:
    """The context of ``result`` within ``max_tokens`` tokens of ``counter`` (default: cl100k; None budget: every
    hit, no limit); ``counts`` limits the routes that order it (:func:`route_filter`). A scene's excerpt holds the
    turns beside its best-matched turn unless ``neighbours`` is False; blocks are scenes under their titles unless
    ``titles`` is False (or the space is extractive): then the turns of one session under its date. ``order`` and
    ``lead`` say where the parts land (:class:`tmem.answer.blocks.Draft`, ``ContextLayout.order``); what enters does
    not depend on them beyond the few tokens their separators cost.

    The whole text is counted before it is returned; were it ever over the budget (the line-by-line count is exact
    for both tokenizers, so this is a guard, not a path taken), it is packed again within a budget smaller by the
    excess until it fits."""
    if max_tokens is not None and max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    counter = counter or default_counter()
    limit = max_tokens if max_tokens is not None else 1 << 62
    while True:
        ctx = _pack(
            result, limit, max_tokens, include_persona, _Packing(k0, counts, counter, neighbours, titles, order, lead)
        )
        if max_tokens is None or ctx.tokens <= max_tokens:
            return ctx
        limit -= ctx.tokens - max_tokens


@dataclass(frozen=True)
class _Packing:
    k0: int
    counts: RouteFilter | None
    counter: TokenCounter
    neighbours: bool
    titles: bool
    order: Order
    lead: int


def _pack(result: SearchResult, limit: int, max_tokens: int | None, include_persona: bool, how: _Packing) -> Context:
    counter, counts = how.counter, how.counts
    scenes = {sh.scene.id: sh.scene for sh in result.scenes}
    scenes.update({s.id: s for ih in result.items for s in ih.source_scenes})
    units = [*_item_units(result.items), *_turn_units(result.turns, scenes), *_scene_units(result, how.neighbours)]
    order = unit_order(units, how.k0, counts)  # LLM-built: a changed fact's newest statement first (retrieval.md)
    order = order if result.descriptive_only else current_first(order)
    titled = how.titles and not result.descriptive_only  # an extractive space: its fact lines are quoted turns
    draft = Draft(counter, titled=titled, timeline=result.descriptive_only, order=how.order, lead=how.lead)
    used = 0
    in_context: set[str] = set()  # turn ids whose raw text is in
    quoted: set[str] = set()  # turn ids whose whole text a fact line in the context quotes (an extractive item)
    texts = {t.id: t.text.strip() for sh in result.scenes for t in sh.turns}
    texts.update((th.turn.id, th.turn.text.strip()) for th in result.turns)
    covered: dict[str, None] = {}  # turn ids covered (raw text or fact), in order of entry
    hits: list[ContextHit] = []
    left_out = 0
    for unit in order:
        if unit.fact is not None:  # an item, or a turn that states a changed fact (tmem.answer.updates)
            if unit.kind == "turn" and unit.id in covered:
                continue  # its fact (an item of the turn) is already there
            if unit.fact_turns and all(t in in_context for t in unit.fact_turns):
                continue  # its source turns are already there word for word
            draft.add_fact(unit.fact, _fact_date(unit))
            tokens = draft.tokens
            if tokens > limit:
                draft.pop_fact()
                left_out += 1
                continue
            added_turns = list(unit.fact_turns)
            quoted.update(t for t in added_turns if texts.get(t) and texts[t] in unit.fact)
            if unit.kind == "turn":
                in_context.update(added_turns)  # its text is there word for word: no block repeats it
        else:
            added_turns = []
            # a turn already there word for word (its raw text, or a fact quoting it) never enters twice
            fresh = [t for t in unit.turns if t.id not in in_context and t.id not in quoted]
            if unit.kind == "turn" and (not fresh or unit.id in covered):
                continue  # already there through its scene, or a fact that stands for it
            tokens = used
            for turn in fresh:
                draft.add_turn(turn, unit.scene)
                now = draft.tokens
                if now > limit:
                    draft.remove_turn(turn, unit.scene)
                    continue
                tokens = now
                in_context.add(turn.id)
                added_turns.append(turn.id)
            if fresh and len(added_turns) < len(fresh):
                left_out += 1
            if not added_turns:
                continue
        hits.append(
            ContextHit(
                kind=unit.kind,
                id=unit.id,
                score=unit.score,
                routes=unit.routes,
                turn_ids=added_turns,
                tokens=tokens - used,
                trimmed=unit.kind == "scene" and unit.scene is not None and len(added_turns) < len(unit.scene.turn_ids),
            )
        )
        used = tokens
        for tid in added_turns:
            covered.setdefault(tid, None)
    evidence_tokens = counter.count(draft.evidence())
    if include_persona and result.personas:
        draft.persona = "\n".join(format_persona(p) for p in result.personas)
        if counter.count(draft.text()) > limit:
            draft.persona = ""
    text = draft.text()
    tokens = counter.count(text)
    return Context(
        space=result.space,
        query=result.query,
        preset=result.preset,
        text=text,
        tokens=tokens,
        counter=counter.name,
        max_tokens=max_tokens,
        evidence_tokens=evidence_tokens,
        persona_tokens=tokens - evidence_tokens,
        hits=hits,
        turn_ids=list(covered),
        left_out=left_out,
        unbuilt_turns=result.unbuilt_turns,
        descriptive_only=result.descriptive_only,
        lexical_anchor=result.lexical_anchor,
        anchorless=counts is not None,
    )


def recall(
    searcher: Searcher,
    space: Scope,
    query: str,
    max_tokens: int | None,
    config: RetrievalConfig | Asked | None = None,
    *,
    layout: ContextLayout | None = None,
    include_persona: bool = True,
    counter: TokenCounter | None = None,
) -> tuple[SearchResult, Context]:
    """Search ``space`` for ``query`` (lists deepened for the budget: :func:`tmem.retrieve.recipe.context_depth`)
    and pack the hits into ``max_tokens`` tokens of ``counter`` (default cl100k) as ``layout`` says (resolved for
    the space by the search)."""
    request = asked(config or RetrievalConfig.preset("auto"), layout, max_tokens)
    result = searcher.search(space, query, request)
    return result, pack_for(result, max_tokens, include_persona=include_persona, counter=counter)


def pack_for(
    result: SearchResult,
    max_tokens: int | None,
    *,
    include_persona: bool = True,
    counter: TokenCounter | None = None,
) -> Context:
    """Pack ``result`` as its resolved layout says (``SearchResult.layout``: its k0, the routes ordering an
    anchorless query, excerpts, block titles): what every budgeted reader gets, ``ask`` included."""
    layout = result.layout
    return pack_context(
        result,
        max_tokens,
        include_persona=include_persona,
        k0=layout.context_k0,
        counts=route_filter(result, layout),
        counter=counter,
        neighbours=layout.excerpt_neighbours,
        titles=layout.scene_titles,
        order=layout.order,
        lead=layout.lead,
    )


def recall_context(
    searcher: Searcher,
    space: Scope,
    query: str,
    max_tokens: int | None,
    config: RetrievalConfig | Asked | None = None,
    *,
    layout: ContextLayout | None = None,
    include_persona: bool = True,
    counter: TokenCounter | None = None,
) -> Context:
    """Search ``space`` for ``query`` and pack the hits into at most ``max_tokens`` tokens of ``counter``."""
    return recall(
        searcher, space, query, max_tokens, config, layout=layout, include_persona=include_persona, counter=counter
    )[1]
