"""Blocks of raw turns in a budgeted context, and the context's text (:class:`Draft`), counted as they grow.

A context reads newest first: its fact lines by date (the latest first, then the one said latest) under "Facts:",
then its blocks (the one that starts latest first), each block's turns in conversation order. On an extractive space
a fact line is a quoted turn, so the context is one timeline: fact lines stand among the blocks by date, with no
"Facts:" part (:attr:`Draft.timeline`). Packing decides which units enter (:mod:`tmem.answer.budget`); the layout
only decides where each lands, so a changed fact's current statement is read before an older one whenever both are
in, unless both are turns of one block (docs/retrieval.md, "The current value first").

A block is a header line and its turns in conversation order, one line each, with two kinds of marker line between
consecutive turns: ``…`` where turns are left out between them, and ``-- date --`` where the day changes. A titled
block is one scene (``Scene (date): title``); an untitled block is every turn of one session under its date
(``[8 May 2023]``): an extractive space's keyphrase titles are not worth their tokens, and the ``associative`` recipe
lays LLM-built spaces out this way too (``ContextLayout.scene_titles``).

A block is counted line by line, each line with the newline that ends it: the count of ``render() + "\n"`` is the
sum of its lines' counts for either tokenizer (:mod:`tmem.util.tokens`: no cl100k piece runs across a line end). A
block keeps that count by adding what a new turn changes next to it (its line, the markers beside it, the header when
it becomes the first turn), so packing a context costs a logarithmic search per turn, not a recount of its block.
How the count of the block's text changes when it ends the context or is followed by a blank line depends only on
its last line (:attr:`TurnBlock.ends`).

Where turns are left out is decided from scenes only, never from ``Turn.seq``: forgetting a turn rewrites its scene
but leaves a hole in the numbering, and a marker must not show that a forgotten turn was there. Two turns of one
known scene are adjacent when their places in it are; any other pair (two scenes, or a turn whose scene the search
did not return) is marked, since something may lie between them.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Literal

from tmem.answer.context import format_date, format_turn
from tmem.models import Scene, Turn
from tmem.util.tokens import TokenCounter, default_counter

GAP = "…"  # one word-count token ("..." is three) and one cl100k token
PERSONA_HEADER = "\n\nPersona notes (standing traits of the speakers):\n"
FactDate = tuple[str, int]  # an item's ISO date ("" when none) and its seq: fact lines are rendered latest first
Order = Literal["date", "rank"]  # ContextLayout.order


def line_ends(counter: TokenCounter, tail: str) -> tuple[int, int]:
    """For a text whose last line is ``tail``, counted with the newline that ends it: what its count gains when a
    blank line follows it instead, and when nothing does (the text ends there)."""
    ended = counter.count(tail + "\n")
    return counter.count(tail + "\n\n") - ended, counter.count(tail) - ended


def _day_line(turn: Turn) -> str:
    return f"-- {format_date(turn.time)} --"


@dataclass
class TurnBlock:
    """One block of a context: ``titled`` blocks are one scene (``scene`` None: turns of no known scene), untitled
    blocks one session."""

    titled: bool
    scene: Scene | None = None
    counter: TokenCounter = field(default_factory=default_counter)
    turns: list[Turn] = field(default_factory=list)  # by seq
    seqs: list[int] = field(default_factory=list)
    homes: dict[str, Scene | None] = field(default_factory=dict)  # turn id -> its scene, when known
    line_tokens: dict[str, int] = field(default_factory=dict)
    tokens: int = 0  # count of render() + "\n"
    ends: tuple[int, int] = (0, 0)  # what render() + "\n" gains as render() + "\n\n", and as render() alone

    @property
    def first_seq(self) -> int:
        return self.seqs[0]

    def line(self, text: str) -> int:
        """Tokens of one line of the block with the newline that ends it."""
        return self.counter.count(text + "\n")

    def _set_ends(self) -> None:
        self.ends = line_ends(self.counter, format_turn(self.turns[-1], dated=False)) if self.turns else (0, 0)

    def _header(self, first: Turn) -> str:
        if not self.titled:
            return f"[{format_date(first.time)}]"
        title = self.scene.title if self.scene is not None else "Conversation"
        return f"Scene ({format_date(first.time)}): {title}"

    def _gap(self, a: Turn, b: Turn) -> bool:
        if self.titled:
            if self.scene is None:
                return False  # turns of no known scene: nothing to place them by
            order = self.scene.turn_ids
        else:
            home, other = self.homes.get(a.id), self.homes.get(b.id)
            if home is None or other is None or home.id != other.id:
                return True
            order = home.turn_ids
        try:
            return order.index(b.id) != order.index(a.id) + 1
        except ValueError:
            return True

    def _between(self, a: Turn, b: Turn) -> list[str]:
        lines = [GAP] if self._gap(a, b) else []
        if b.time.date() != a.time.date():
            lines.append(_day_line(b))
        return lines

    def _between_tokens(self, a: Turn, b: Turn) -> int:
        return sum(self.line(text) for text in self._between(a, b))

    def _around(self, at: int) -> int:
        """Tokens that depend on the turn at index ``at``: its line, the markers on both sides, the header if first."""
        turn = self.turns[at]
        total = self.line_tokens[turn.id]
        total += self.line(self._header(turn)) if at == 0 else self._between_tokens(self.turns[at - 1], turn)
        if at + 1 < len(self.turns):
            total += self._between_tokens(turn, self.turns[at + 1])
        return total

    def _joined(self, at: int) -> int:
        """Tokens the neighbours of index ``at`` cost once the turn there is gone (joined to each other)."""
        prev = self.turns[at - 1] if at > 0 else None
        nxt = self.turns[at + 1] if at + 1 < len(self.turns) else None
        if nxt is None:
            return 0
        return self.line(self._header(nxt)) if prev is None else self._between_tokens(prev, nxt)

    def add(self, turn: Turn, scene: Scene | None) -> None:
        at = bisect.bisect_left(self.seqs, turn.seq)
        self.homes[turn.id] = scene
        self.line_tokens[turn.id] = self.line(format_turn(turn, dated=False))
        self.seqs.insert(at, turn.seq)
        self.turns.insert(at, turn)
        self.tokens += self._around(at) - self._joined(at)
        if at == len(self.turns) - 1:  # a new last line
            self._set_ends()

    def remove(self, turn: Turn) -> None:
        at = bisect.bisect_left(self.seqs, turn.seq)
        while self.turns[at].id != turn.id:
            at += 1
        self.tokens -= self._around(at) - self._joined(at)
        del self.seqs[at], self.turns[at], self.homes[turn.id], self.line_tokens[turn.id]
        if at == len(self.turns):  # the last line went
            self._set_ends()

    def render(self) -> str:
        lines = [self._header(self.turns[0])]
        for n, turn in enumerate(self.turns):
            if n:
                lines.extend(self._between(self.turns[n - 1], turn))
            lines.append(format_turn(turn, dated=False))
        return "\n".join(lines)


@dataclass
class Draft:
    """The context being packed: parts (the facts, then each block of turns, newest first) joined by blank lines,
    each a run of lines. Its count is kept up to date as parts grow: every line is counted with the newline that
    ends it (exact, :mod:`tmem.util.tokens`), and what the last line of each part changes - a blank line after it,
    or nothing when it ends the text - is added from that line alone."""

    counter: TokenCounter
    facts: list[str] = field(default_factory=list)  # newest first (fact_dates)
    fact_dates: list[FactDate] = field(default_factory=list)
    added: int = 0  # where the last fact line went (pop_fact)
    fact_tokens: int = 0  # "Facts:" and every fact line, each with its newline
    blocks: dict[str, TurnBlock] = field(default_factory=dict)
    fact_ends: tuple[int, int] = (0, 0)  # line_ends of the last fact line
    block_tokens: int = 0  # every block's count with its newline
    block_blank: int = 0  # what every block gains when a blank line follows it (TurnBlock.ends)
    last: TurnBlock | None = None  # the block that ends the text (the one with the lowest first_seq)
    persona: str = ""
    titled: bool = True  # scene headers carry the scene title (False: an extractive space's keyphrase titles)
    timeline: bool = False  # fact lines among the blocks by date, no "Facts:" part (an extractive space: timeline)
    order: Order = "date"  # ContextLayout.order and .lead: where the parts land (docs/context.md)
    lead: int = 0
    fact_ranks: list[int] = field(default_factory=list)  # beside facts: the order in which each part entered
    block_ranks: dict[str, int] = field(default_factory=dict)
    entered: int = 0  # parts opened so far (a part's rank)

    def _line(self, text: str) -> int:
        return self.counter.count(text + "\n")

    @property
    def by_rank(self) -> bool:
        """Whether some part is placed by rank: ``order="rank"`` lays every part (a fact line, or a block, ranked by
        the first unit that opened it) out in the order they entered; ``lead=N`` the first N, then the rest as one
        timeline newest first. Otherwise the date layout (the facts, then the blocks; or one timeline)."""
        return self.order == "rank" or self.lead > 0

    @property
    def tokens(self) -> int:
        """The count of :meth:`evidence`."""
        if not self.facts and not self.blocks:
            return 0
        if self.timeline or self.by_rank:
            return self._timeline_tokens()
        blank = self.block_blank + (self.fact_ends[0] if self.facts else 0)
        last = self.last.ends if self.last is not None else self.fact_ends
        return self.fact_tokens + self.block_tokens + blank - last[0] + last[1]

    def _entries(self) -> list[tuple[FactDate, str | TurnBlock]]:
        """The timeline newest first: every fact line and every block, by date and then place in the conversation (a
        block by its first turn)."""
        entries: list[tuple[FactDate, str | TurnBlock]] = list(zip(self.fact_dates, self.facts, strict=True))
        entries += [((b.turns[0].time.date().isoformat(), b.first_seq), b) for b in self.blocks.values()]
        if not self.by_rank:
            return sorted(entries, key=lambda entry: (entry[0], isinstance(entry[1], str)), reverse=True)
        ranks = [*self.fact_ranks, *self.block_ranks.values()]
        lead = len(ranks) if self.order == "rank" else self.lead
        first = set(sorted(ranks)[:lead])
        by_rank = sorted((r, n) for n, r in enumerate(ranks) if r in first)
        rest = sorted(
            (n for n, r in enumerate(ranks) if r not in first),
            key=lambda n: (entries[n][0], isinstance(entries[n][1], str)),
            reverse=True,
        )
        return [entries[n] for _, n in by_rank] + [entries[n] for n in rest]

    def _timeline_tokens(self) -> int:
        """Every line with its newline, plus what each part's last line gains from the blank line after it (none
        between two fact lines, which follow each other line by line), and from ending the text."""
        entries = self._entries()
        total = 0
        for n, (_, entry) in enumerate(entries):
            if isinstance(entry, str):
                total += self._line(entry)
                ends = line_ends(self.counter, entry)
            else:
                total += entry.tokens
                ends = entry.ends
            if n + 1 == len(entries):
                total += ends[1]
            elif not (isinstance(entry, str) and isinstance(entries[n + 1][1], str)):
                total += ends[0]
        return total

    def _render_timeline(self) -> str:
        lines: list[str] = []
        previous: str | TurnBlock | None = None
        for _, entry in self._entries():
            if previous is not None and not (isinstance(entry, str) and isinstance(previous, str)):
                lines.append("")
            lines.append(entry if isinstance(entry, str) else entry.render())
            previous = entry
        return "\n".join(lines)

    def evidence(self) -> str:
        if self.timeline or self.by_rank:
            return self._render_timeline()
        parts = []
        if self.facts:
            parts.append("\n".join(["Facts:", *self.facts]))
        order = sorted(self.blocks.values(), key=lambda block: block.first_seq, reverse=True)  # newest first
        parts.extend(block.render() for block in order)
        return "\n\n".join(parts)

    def text(self) -> str:
        evidence = self.evidence()
        return f"{evidence}{PERSONA_HEADER}{self.persona}" if self.persona else evidence

    def add_fact(self, line: str, when: FactDate) -> None:
        """Add a fact line at its place, newest first: after every line of a later or equal ``when``."""
        at = next((n for n, key in enumerate(self.fact_dates) if when > key), len(self.facts))
        self.fact_tokens += self._line(line) + (0 if self.facts else self._line("Facts:"))
        self.facts.insert(at, line)
        self.fact_dates.insert(at, when)
        self.fact_ranks.insert(at, self.entered)
        self.entered += 1
        self.fact_ends = line_ends(self.counter, self.facts[-1])
        self.added = at

    def pop_fact(self) -> None:
        """Take back the fact line added last."""
        line = self.facts.pop(self.added)
        del self.fact_dates[self.added], self.fact_ranks[self.added]
        self.fact_tokens -= self._line(line) + (0 if self.facts else self._line("Facts:"))
        self.fact_ends = line_ends(self.counter, self.facts[-1]) if self.facts else (0, 0)

    def _key(self, turn: Turn, scene: Scene | None) -> str:
        # Untitled blocks (an extractive space) are one per session: scenes of one session share one date header.
        return scene.id if scene is not None and self.titled else f"session:{turn.session_id}"

    def add_turn(self, turn: Turn, scene: Scene | None) -> None:
        key = self._key(turn, scene)
        block = self.blocks.get(key)
        if block is None:
            block = self.blocks[key] = TurnBlock(self.titled, scene if self.titled else None, self.counter)
            self.block_ranks[key] = self.entered
            self.entered += 1
        self.block_tokens -= block.tokens
        self.block_blank -= block.ends[0]
        block.add(turn, scene)
        self.block_tokens += block.tokens
        self.block_blank += block.ends[0]
        if self.last is None or (block is not self.last and block.first_seq < self.last.first_seq):
            self.last = block  # it starts before the block that ended the text: it ends the text now

    def remove_turn(self, turn: Turn, scene: Scene | None) -> None:
        key = self._key(turn, scene)
        block = self.blocks[key]
        self.block_tokens -= block.tokens
        self.block_blank -= block.ends[0]
        block.remove(turn)
        if block.turns:
            self.block_tokens += block.tokens
            self.block_blank += block.ends[0]
        else:
            del self.blocks[key], self.block_ranks[key]
        if block is self.last or self.last is None:
            self._find_last()

    def _find_last(self) -> None:
        self.last = min(self.blocks.values(), key=lambda block: block.first_seq) if self.blocks else None
