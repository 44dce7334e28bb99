"""Slots: what a fact is the current value of (issue 21), and the rule that a newer fact on a slot supersedes the
older one.

A slot is written ``subject / attribute`` (``dana / employer``). An LLM-built item carries the slot the model
labelled it with; two labels name the same slot when their :func:`slot_key` is equal:

* the subject is case-folded, its possessive ``'s`` and punctuation dropped;
* the attribute is case-folded, its qualifiers dropped (``current``, ``new``, ``former``, articles and possessive
  pronouns), plurals made singular, and a few common attribute nouns mapped to one name (``job``, ``work``,
  ``workplace``, ``company``, ``occupation`` are all ``employer``; ``city``, ``residence``, ``address`` are ``home``;
  see :data:`SYNONYMS`). The label the model wrote is stored as it normalises; the synonyms apply only when
  comparing, so a stored slot is what the model said.

Matching happens in code after every items round (:func:`link_slots`): the items a round produced and the current
items of the space are grouped by slot key, and in each group every item is superseded by the next newer one (a chain, one link each way). So two
items of the same round (which never see each other) are linked too. Newer means a later date, or the same date
and a later source turn; two items with the same date and turns are restatements, not a change, and stay as they
are. Items that record a conflict with each other are never linked: the conversation says both; nor is an item the
model already marked as updating another one.

docs/construction.md says how this was chosen and bench/results/updates.md what it measured.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence

from tmem.models import Item

__all__ = ["SYNONYMS", "link_slots", "normalise_slot", "slot_key"]

_QUALIFIERS = frozenset(
    {"a", "an", "the", "current", "currently", "new", "old", "former", "latest", "present", "previous"}
    | {"his", "her", "their", "its", "my", "our", "your", "main"}
)
# Attribute nouns a model writes for the same thing, each mapped to one name. Kept to the common, general families
# (where someone lives and works, a partner, studies); anything else matches by its normalised words only.
SYNONYMS: dict[str, str] = {
    "job": "employer",
    "work": "employer",
    "workplace": "employer",
    "company": "employer",
    "occupation": "employer",
    "profession": "employer",
    "position": "employer",
    "job title": "employer",
    "role": "employer",
    "career": "employer",
    "city": "home",
    "home city": "home",
    "residence": "home",
    "address": "home",
    "location": "home",
    "place of residence": "home",
    "living place": "home",
    "where lives": "home",
    "relationship": "partner",
    "relationship status": "partner",
    "girlfriend": "partner",
    "boyfriend": "partner",
    "spouse": "partner",
    "romantic partner": "partner",
    "dating": "partner",
    "school": "study",
    "studies": "study",
    "education": "study",
    "course": "study",
    "vehicle": "car",
}
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")


def _words(text: str) -> list[str]:
    words = [w.removesuffix("'s") for w in _WORD.findall(text.casefold().replace("\u2019", "'"))]
    return [w for w in words if w]


def _singular(word: str) -> str:
    if len(word) > 3 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def normalise_slot(label: str | None, speaker: str | None = None) -> str | None:
    """``Dana's / Current Employer`` -> ``dana / employer``; a label without ``/`` is an attribute of ``speaker``.
    None when the label is empty or names no attribute."""
    if label is None or not label.strip():
        return None
    subject, sep, attribute = label.partition("/")
    if not sep:
        subject, attribute = speaker or "", label
    subj = " ".join(_words(subject))
    attr = " ".join(_singular(w) for w in _words(attribute) if w not in _QUALIFIERS)
    if not subj or not attr:
        return None
    return f"{subj} / {attr}"


def slot_key(slot: str) -> tuple[str, str]:
    """The pair two slots are compared by: subject and attribute, the attribute through :data:`SYNONYMS`."""
    subject, _, attribute = slot.partition(" / ")
    return subject, SYNONYMS.get(attribute, attribute)


def _order(item: Item, turn_seq: Callable[[str], int]) -> tuple[str, int]:
    last = max((turn_seq(t) for t in item.turn_ids), default=-1)
    return (item.date or "", last)


def link_slots(items: Sequence[Item], turn_seq: Callable[[str], int]) -> dict[str, str]:
    """Older item id -> the id of the newer item on its slot that supersedes it, for current items (not superseded
    yet) with a slot. ``turn_seq`` gives a turn's position in the space (ties on the date go to the later turn)."""
    groups: dict[tuple[str, str], list[Item]] = {}
    for it in items:
        if it.slot is not None and it.superseded_by is None:
            groups.setdefault(slot_key(it.slot), []).append(it)
    links: dict[str, str] = {}
    for group in groups.values():
        ranked = sorted(group, key=lambda it: (*_order(it, turn_seq), it.seq, it.id))
        for older, newer in itertools.pairwise(ranked):
            if _order(newer, turn_seq) == _order(older, turn_seq):
                continue  # a restatement of the same moment, not a change
            if newer.id in older.conflicts_with or newer.supersedes not in (None, older.id):
                continue  # the conversation says both; or the model linked the newer one to another item
            links[older.id] = newer.id
    return links
