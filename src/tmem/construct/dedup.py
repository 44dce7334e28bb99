"""Near-duplicate items: the same fact extracted twice from the same scene(s), in other words.

Items are extracted per topic and a scene belongs to one to three topics, so the same fact comes back from each topic
that reads its scene ("renter's insurance" under budgeting and under home), each copy costing trigger calls and
appearing twice in personas and contexts. Exact copies already share an id (kind, normalised text, scenes); this
module catches restatements.

Two items are compared when they have the same kind, the same speaker and the same source scenes, by their content
words (lower-cased words of three letters or more, minus a short list of function words). A later item whose words
are almost all (``COVERED``) among an earlier one's, with a Jaccard index of at least ``JACCARD``, says nothing new
and is dropped. When it is the other way round - the later item states the earlier one and more ("Caroline enrolled
in the MBA because she wants to run a nonprofit" after "Caroline wants to run a nonprofit") - the later one replaces
the earlier if the earlier is still replaceable (produced by the same build, so nothing was built on it yet);
otherwise both stay. The rule needs no model and no embedding, so it is deterministic and cheap. The thresholds were
read off the pairs of the LLM-built dev memories (bench/item_duplicates.py lists every merge): different facts of the
same scene share words, but not 85 % of the smaller one's content words.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from tmem.models import Item

COVERED = 0.85
JACCARD = 0.45

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_FUNCTION = frozenset(
    [
        "the",
        "and",
        "for",
        "that",
        "with",
        "was",
        "were",
        "has",
        "had",
        "have",
        "her",
        "his",
        "she",
        "him",
        "they",
        "them",
        "their",
        "its",
        "this",
        "than",
        "then",
        "also",
        "into",
        "from",
        "about",
        "after",
        "before",
        "would",
        "could",
        "should",
        "will",
        "which",
        "who",
        "whom",
        "what",
        "when",
        "where",
        "while",
        "said",
        "says",
        "told",
        "stated",
    ]
)


def content_words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.casefold()) if len(w) >= 3 and w not in _FUNCTION)


def overlap(earlier: str, later: str) -> tuple[float, float, float]:
    """(Jaccard, share of the later text's content words in the earlier, share of the earlier's in the later)."""
    we, wl = content_words(earlier), content_words(later)
    if not we or not wl:
        same = float(we == wl)
        return same, same, same
    common = len(we & wl)
    return common / len(we | wl), common / len(wl), common / len(we)


def _key(item: Item) -> tuple[str, str | None, tuple[str, ...]]:
    return (item.kind.value, item.speaker, tuple(sorted(set(item.scene_ids))))


def repeats(earlier: Item, later: Item) -> bool:
    """``later`` says nothing ``earlier`` does not (same kind, speaker and scenes; its words covered)."""
    if _key(earlier) != _key(later):
        return False
    jaccard, later_covered, _ = overlap(earlier.text, later.text)
    return jaccard >= JACCARD and later_covered >= COVERED


def extends(earlier: Item, later: Item) -> bool:
    """``later`` states ``earlier`` and more."""
    if _key(earlier) != _key(later):
        return False
    jaccard, _, earlier_covered = overlap(earlier.text, later.text)
    return jaccard >= JACCARD and earlier_covered >= COVERED


def near_duplicate(a: Item, b: Item) -> bool:
    return repeats(a, b) or extends(a, b)


class DuplicateFilter:
    """Admits items one by one (see the module docstring). Items given at construction are fixed (stored by an
    earlier build: never replaced); admitted ones are replaceable."""

    def __init__(self, fixed: Iterable[Item] = ()) -> None:
        self._by_key: dict[tuple[str, str | None, tuple[str, ...]], list[Item]] = {}
        self._fixed: set[str] = set()
        for item in fixed:
            self._by_key.setdefault(_key(item), []).append(item)
            self._fixed.add(item.id)

    def admit(self, item: Item) -> tuple[Item | None, list[Item]]:
        """(repeated, replaced): the item ``item`` repeats (then it is not admitted, and nothing is replaced), or the
        replaceable items it replaces: the first one it extends (it takes that one's place) and every other
        replaceable one it covers (which would repeat it now); ``(None, [])`` when it is new."""
        bucket = self._by_key.setdefault(_key(item), [])
        repeated = next((kept for kept in bucket if repeats(kept, item)), None)
        if repeated is not None:
            return repeated, []
        first = next((n for n, kept in enumerate(bucket) if kept.id not in self._fixed and extends(kept, item)), None)
        if first is None:
            bucket.append(item)
            return None, []
        replaced = [bucket[first]] + [
            kept for n, kept in enumerate(bucket) if n != first and kept.id not in self._fixed and repeats(item, kept)
        ]
        gone = {kept.id for kept in replaced}
        bucket[first] = item
        bucket[:] = [kept for kept in bucket if kept.id not in gone]
        return None, replaced


def dedup(items: Sequence[Item]) -> tuple[list[Item], dict[str, str]]:
    """Items in order without near-duplicates (a replacement takes the place of the first item it replaces), and
    {dropped id: kept id}."""
    keep = DuplicateFilter()
    kept: dict[str, Item] = {}
    dropped: dict[str, str] = {}
    for item in items:
        repeated, replaced = keep.admit(item)
        if repeated is not None:
            dropped[item.id] = repeated.id
            continue
        if replaced:
            gone = {r.id for r in replaced}
            first = replaced[0].id
            kept = {
                (item.id if k == first else k): (item if k == first else v)
                for k, v in kept.items()
                if k == first or k not in gone
            }
            dropped = {d: (item.id if k in gone else k) for d, k in dropped.items()}
            dropped.update({r: item.id for r in gone})
            continue
        kept[item.id] = item
    return list(kept.values()), dropped
