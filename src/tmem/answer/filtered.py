"""Filtered recall (issue 19): searches and budgeted contexts of the hits a :class:`MemoryFilter` keeps.

Kept in ``tmem.answer`` (not beside the filter in ``tmem.retrieve``) because it packs contexts: ``answer`` stands on
``retrieve``, never the other way (tests/test_import_graph.py).
"""

from __future__ import annotations

from tmem.answer.budget import Context, Searcher, recall
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.filters import MemoryFilter, filter_result
from tmem.retrieve.recipe import MAX_CONTEXT_DEPTH, Asked, asked, context_depth
from tmem.retrieve.types import SearchResult
from tmem.scope import Scope
from tmem.store.base import Store
from tmem.util.tokens import TokenCounter

FULL = 0.9  # a filtered context at least this share of its budget is full enough: no deeper search


def _size(result: SearchResult) -> int:
    return len(result.scenes) + len(result.items) + len(result.turns)


class FilteredSearcher:
    """A searcher (tmem.answer.budget.Searcher) whose results are filtered, searching at least ``depth`` deep."""

    def __init__(self, retriever: Searcher, store: Store, where: MemoryFilter) -> None:
        self.retriever = retriever
        self.store = store
        self.where = where
        self.depth = 0
        self.found = -1  # hits of the last unfiltered search

    def search(self, space: Scope, query: str, config: RetrievalConfig | Asked | None = None) -> SearchResult:
        request = asked(config or RetrievalConfig.preset("auto")).deeper(self.depth)
        result = self.retriever.search(space, query, request)
        self.found = _size(result)
        return filter_result(result, self.store, space, self.where)


def filtered_search(
    retriever: Searcher, store: Store, space: Scope, query: str, config: RetrievalConfig | Asked, where: MemoryFilter
) -> SearchResult:
    """A search whose hits all match ``where``: lists as deep as a 2000-token context's, then filtered, so that a
    selective filter still finds matches beyond the plain search's top lists."""
    searcher = FilteredSearcher(retriever, store, where)
    searcher.depth = max(asked(config).depth, 100)
    return searcher.search(space, query, config)


def filtered_recall(
    retriever: Searcher,
    store: Store,
    space: Scope,
    query: str,
    max_tokens: int | None,
    config: Asked,
    where: MemoryFilter,
    counter: TokenCounter,
) -> tuple[SearchResult, Context]:
    """The budgeted context of the hits ``where`` keeps, and the filtered search it was packed from. The search is
    deepened (x4 per round, up to MAX_CONTEXT_DEPTH) until the packed context is ``FULL`` or a deeper search finds
    nothing more."""
    searcher = FilteredSearcher(retriever, store, where)
    depth = context_depth(max_tokens)
    previous = -1
    while True:
        searcher.depth = depth
        result, ctx = recall(searcher, space, query, max_tokens, config, counter=counter)
        full = max_tokens is None or ctx.tokens >= FULL * max_tokens
        if full or searcher.found == previous or depth >= MAX_CONTEXT_DEPTH:
            return result, ctx
        previous = searcher.found
        depth = min(depth * 4, MAX_CONTEXT_DEPTH)
