"""Atomic items and Entity triggers from single turns, without a model.

Substantive rule: an item is a fact, so a turn yields one when its statements (its sentences that are not questions)
and image caption together hold at least ``MIN_CONTENT_WORDS`` distinct content words (words that are neither
stopwords nor conversational fillers, see :data:`tmem.construct.extractive.keyphrases.STOPWORDS`), the speakers'
names not counted. "Hey Caroline! Good to see you!" has none and is skipped, as is a question ("Any plans for the
weekend?"); "I moved to Lyon" has two and is kept.

Item text format (self-contained, so that it reads correctly out of context)::

    On 8 May 2023, Caroline said: "I went to a LGBTQ support group yesterday [7 May 2023] and it was so
    powerful." Caroline shared an image: a photo of a dog walking past a wall with a painting of a woman.

- the prefix names the date the turn was said (the turn time from the conversation) and the speaker;
- the turn text is quoted verbatim from its first sentence that holds a content word (a greeting that opens the turn,
  "Hey Caroline! Good to see you!", is left out), with each relative date expression followed by its absolute resolution in
  square brackets;
- an image caption, when present, follows as its own sentence.

``Item.date`` is the start of the first resolved expression (the date the fact refers to) or, when the turn holds no
relative expression, the date it was said; ``date_precision`` and ``date_end`` say what it names ("last week": week,
its Monday to Sunday; "last weekend": a Saturday-Sunday range; "next month": month).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tmem.construct.extractive.dates import Granularity, ResolvedDate, format_day, resolve_relative_dates
from tmem.construct.extractive.keyphrases import FIRST_PERSON, Keyphrase, content_words, extract_keyphrases
from tmem.models import BuildMode, Item, ItemKind, Trigger, TriggerFamily, TriggerView, Turn
from tmem.util.text import text_hash

__all__ = [
    "MAX_ENTITY_TRIGGERS",
    "MIN_CONTENT_WORDS",
    "entity_triggers",
    "is_substantive",
    "item_from_turn",
    "item_id",
    "render_item_text",
]

MIN_CONTENT_WORDS = 2
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*[\"')\]]*\s*")
MAX_ENTITY_TRIGGERS = 4


def item_id(turn_id: str) -> str:
    return "xi-" + text_hash(turn_id)[:16]


def trigger_id(host_id: str, group: int) -> str:
    return "xe-" + text_hash(f"{host_id}|{group}")[:16]


def _names(turn: Turn, names: Sequence[str]) -> set[str]:
    return {w for n in (*names, turn.speaker) for w in content_words(n)}


def is_substantive(turn: Turn, names: Sequence[str] = ()) -> bool:
    """The turn states a fact (module docstring); ``names``: the conversation's speakers (not counted)."""
    skip = _names(turn, names)
    statements = [s for s in _SENTENCE.findall(turn.text) if not s.rstrip().endswith("?")]
    words = {w for s in statements for w in content_words(s) if w not in skip}
    if turn.caption:
        words |= set(content_words(turn.caption)) - skip
        return len(words) >= MIN_CONTENT_WORDS
    # two words make a fact when said in the first person ("I moved to Lyon"), not in a remark ("Free company!")
    first_person = any(FIRST_PERSON.search(s) for s in statements)
    return len(words) >= (MIN_CONTENT_WORDS if first_person else MIN_CONTENT_WORDS + 1)


def _without_greeting(text: str, skip: set[str]) -> str:
    """``text`` from its first sentence that holds a content word other than a name (all of it when none does)."""
    pos = 0
    for sentence in _SENTENCE.findall(text):
        if set(content_words(sentence)) - skip:
            return text[pos:]
        pos += len(sentence)
    return text


def _annotate(text: str, resolved: Sequence[ResolvedDate]) -> str:
    out: list[str] = []
    pos = 0
    for r in resolved:
        out.append(text[pos : r.end_char])
        out.append(f" [{r.label}]")
        pos = r.end_char
    out.append(text[pos:])
    return "".join(out)


def render_item_text(turn: Turn, names: Sequence[str] = ()) -> tuple[str, list[ResolvedDate]]:
    """The self-contained item text of a turn and the date expressions it resolved (``names``: the speakers)."""
    said = turn.time.date()
    body = _without_greeting(" ".join(turn.text.split()), _names(turn, names))
    resolved = resolve_relative_dates(body, said)
    text = f'On {format_day(said)}, {turn.speaker} said: "{_annotate(body, resolved)}"'
    if turn.caption:
        caption = " ".join(turn.caption.split()).rstrip(".")
        text += f" {turn.speaker} shared an image: {caption}."
    return text, resolved


# A weekend is a two-day range; the other granularities keep their names (tmem.util.dates.DATE_PRECISIONS).
_PRECISION = {
    Granularity.DAY: "day",
    Granularity.WEEKEND: "range",
    Granularity.WEEK: "week",
    Granularity.MONTH: "month",
    Granularity.YEAR: "year",
}


def item_from_turn(turn: Turn, scene_id: str, names: Sequence[str] = ()) -> Item:
    text, resolved = render_item_text(turn, names)
    fact_date = resolved[0].start if resolved else turn.time.date()
    precision = _PRECISION[resolved[0].granularity] if resolved else "day"
    return Item(
        id=item_id(turn.id),
        text=text,
        kind=ItemKind.ATOMIC,
        scene_ids=[scene_id],
        topic_id=None,
        speaker=turn.speaker,
        date=fact_date.isoformat(),
        date_end=resolved[0].end.isoformat() if resolved and precision != "day" else None,
        date_precision=precision,
        turn_ids=[turn.id],
        seq=turn.seq,
        mode=BuildMode.EXTRACTIVE,
    )


def entity_triggers(
    item: Item, turn: Turn, session_phrases: dict[str, Keyphrase], speakers: Sequence[str]
) -> list[Trigger]:
    """Entity triggers of an item: its names first, then its best keyphrases (scored over the whole session).

    ``session_phrases`` maps a phrase's normalised key to its keyphrase record computed over the turn's session, so
    that a phrase the session keeps returning to outranks a passing one. At most :data:`MAX_ENTITY_TRIGGERS` per item.
    """
    texts = [turn.text] + ([turn.caption] if turn.caption else [])
    local = extract_keyphrases(texts, exclude=speakers)
    ranked: list[tuple[int, float, int, str, bool]] = []
    for k in local:
        session = session_phrases.get(k.key)
        is_name = session.is_name if session is not None else k.is_name
        score = session.score if session is not None else k.score
        ranked.append((0 if is_name else 1, -score, k.first_pos, k.text, is_name))
    ranked.sort()
    triggers: list[Trigger] = []
    seen: set[str] = set()
    for _, _, _, phrase, is_name in ranked:
        if phrase.lower() in seen:
            continue
        seen.add(phrase.lower())
        group = len(triggers)
        triggers.append(
            Trigger(
                id=trigger_id(item.id, group),
                family=TriggerFamily.ENTITY,
                host_kind="item",
                host_id=item.id,
                group=group,
                fields={"concept": phrase, "source": "name" if is_name else "keyphrase"},
                views=[TriggerView(name="concept", text=phrase)],
            )
        )
        if len(triggers) == MAX_ENTITY_TRIGGERS:
            break
    return triggers
