"""Where the evidence stands in a context: the relative position at which gold evidence first appears.

A reader given the evidence uses it less often when it stands far down the text (issue 29). For a context that holds
a gold turn, the position is the share of the text's tokens that come before the first line carrying the evidence:
the gold turn's own line, or a fact line whose source turns include it. 0.0 is the first line; a value under 1/3
lies in the first third. Positions are counted by the context's tokenizer.

Flat baselines are one dated turn per line; their position is computed from the same per-turn counts they were
packed with, in the order they were ranked (rank order) and in conversation order (time order), the two ways a flat
context can be laid out.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence

from tmem.answer.budget import Context
from tmem.answer.context import format_turn
from tmem.models import Turn
from tmem.retrieve.types import SearchResult
from tmem.util.tokens import TokenCounter

FIRST_THIRD = 1 / 3


def _line_start(text: str, line: str) -> int | None:
    """Offset of the first line of ``text`` that starts with ``line``; None when no line does."""
    if text.startswith(line):
        return 0
    at = text.find("\n" + line)
    return None if at < 0 else at + 1


def evidence_lines(ctx: Context, result: SearchResult, gold: Iterable[str]) -> list[str]:
    """The line starts that carry ``gold`` in ``ctx``: each gold turn's line (raw text), and each fact line whose
    item's source turns include a gold turn."""
    wanted = set(gold) & set(ctx.turn_ids)
    turns: dict[str, Turn] = {t.id: t for sh in result.scenes for t in sh.turns}
    turns.update((th.turn.id, th.turn) for th in result.turns)
    lines = [format_turn(turns[t], dated=False) for t in sorted(wanted) if t in turns]
    items = {ih.item.id: ih.item for ih in result.items}
    for hit in ctx.hits:
        if hit.kind == "item" and wanted.intersection(hit.turn_ids) and hit.id in items:
            lines.append(f"- {items[hit.id].text}")
    return lines


def context_position(ctx: Context, result: SearchResult, gold: Iterable[str], counter: TokenCounter) -> float | None:
    """The relative position (tokens before / all tokens) of the first evidence line of ``gold`` in ``ctx``'s
    text; None when the context holds no gold turn or the text is empty."""
    starts = [s for line in evidence_lines(ctx, result, gold) if (s := _line_start(ctx.text, line)) is not None]
    if not starts or not ctx.tokens:
        return None
    return counter.count(ctx.text[: min(starts)]) / ctx.tokens


def flat_position(turn_ids: Sequence[str], gold: Iterable[str], tokens: Mapping[str, int]) -> float | None:
    """The relative position of the first gold turn in a flat context whose lines are ``turn_ids`` in that order,
    each costing ``tokens[id]``; None when no gold turn is in it."""
    wanted = set(gold)
    total = sum(tokens[t] for t in turn_ids)
    before = 0
    for t in turn_ids:
        if t in wanted:
            return before / total if total else None
        before += tokens[t]
    return None


def flat_positions(
    turn_ids: Sequence[str], gold: Iterable[str], tokens: Mapping[str, int], seq: Callable[[str], int]
) -> tuple[float | None, float | None]:
    """A flat context's position of ``gold`` in rank order (``turn_ids`` as packed) and in time order (by ``seq``)."""
    gold = list(gold)
    return flat_position(turn_ids, gold, tokens), flat_position(sorted(turn_ids, key=seq), gold, tokens)


def summary(positions: Iterable[float | None]) -> tuple[float | None, float | None, int]:
    """Median position and share in the first third over the positions that exist, and how many there are."""
    found = [p for p in positions if p is not None]
    if not found:
        return None, None, 0
    return statistics.median(found), sum(p < FIRST_THIRD for p in found) / len(found), len(found)
