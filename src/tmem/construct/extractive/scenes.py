"""Scene and topic records from extractive evidence (keyphrases and central turns).

- Scene title: the scene's top ``TITLE_PHRASES`` keyphrases (speakers' names excluded), joined by "; ". A scene with
  no keyphrase at all (pure greetings) is titled "Small talk between A and B".
- Scene summary: the date, then the scene's most central turns verbatim ("Speaker: text"), in conversation order.
  Centrality is the cosine between a turn's vector and the scene's mean vector; substantive turns are preferred. One
  central turn per ``TURNS_PER_SUMMARY_LINE`` turns, between 1 and ``MAX_SUMMARY_TURNS``.
- Scene narrative: empty (the extractive mode writes no third-person narrative; the summary carries the date).
- Topic label: the top ``LABEL_PHRASES`` keyphrases over the turns of all member scenes; description: the next ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from tmem.construct.extractive.dates import format_day
from tmem.construct.extractive.items import is_substantive
from tmem.construct.extractive.keyphrases import extract_keyphrases
from tmem.models import BuildMode, Scene, Topic, Turn
from tmem.util.text import text_hash

__all__ = ["make_scene", "make_topic", "scene_id", "scene_topic_text", "topic_id"]

TITLE_PHRASES = 3
LABEL_PHRASES = 3
DESCRIPTION_PHRASES = 8
TOPIC_TEXT_PHRASES = 8
TURNS_PER_SUMMARY_LINE = 6
MAX_SUMMARY_TURNS = 3


def scene_id(turn_ids: Sequence[str]) -> str:
    return "xs-" + text_hash("\n".join(turn_ids))[:16]


def topic_id(founding_scene_id: str) -> str:
    return "xt-" + text_hash(founding_scene_id)[:16]


def _turn_texts(turns: Sequence[Turn]) -> list[str]:
    return [t.text + (f"\n{t.caption}" if t.caption else "") for t in turns]


def _small_talk(speakers: Sequence[str]) -> str:
    return "Small talk between " + " and ".join(speakers) if speakers else "Small talk"


def scene_topic_text(turns: Sequence[Turn], speakers: Sequence[str]) -> str:
    """What a scene's topic vector encodes: its top keyphrases joined by "; " (the small-talk title when none).

    Keyphrases rather than the turns themselves: the mean vector of whole turns is dominated by what every scene of a
    chat shares (greetings, praise, the two speakers), which pulls all scenes into one topic.
    """
    phrases = extract_keyphrases(_turn_texts(turns), exclude=speakers, top=TOPIC_TEXT_PHRASES, distinct=True)
    if phrases:
        return "; ".join(k.text for k in phrases)
    return _small_talk(sorted({t.speaker for t in turns}))


def make_scene(turns: Sequence[Turn], vectors: npt.NDArray[np.float32], seq: int, speakers: Sequence[str]) -> Scene:
    """A scene over consecutive ``turns`` of one session (``vectors``: their embeddings, row per turn)."""
    phrases = extract_keyphrases(_turn_texts(turns), exclude=speakers, top=TITLE_PHRASES, distinct=True)
    present = sorted({t.speaker for t in turns}, key=lambda s: (speakers.index(s) if s in speakers else 99, s))
    title = "; ".join(k.text for k in phrases) if phrases else _small_talk(present)
    mean = vectors.astype(np.float64).mean(axis=0)
    norm = float(np.linalg.norm(mean))
    centrality = vectors.astype(np.float64) @ (mean / norm if norm > 0 else mean)
    substantive = [is_substantive(t) for t in turns]
    k = min(MAX_SUMMARY_TURNS, max(1, -(-len(turns) // TURNS_PER_SUMMARY_LINE)))
    order = sorted(range(len(turns)), key=lambda i: (not substantive[i], -float(centrality[i]), i))
    chosen = sorted(order[:k])
    start = min(t.time for t in turns)
    end = max(t.time for t in turns)
    lines = " ".join(f"{turns[i].speaker}: {' '.join(turns[i].text.split())}" for i in chosen)
    summary = f"On {format_day(start.date())}: {lines}"
    ids = [t.id for t in turns]
    return Scene(
        id=scene_id(ids),
        seq=seq,
        title=title,
        summary=summary,
        narrative="",
        turn_ids=ids,
        start=start,
        end=end,
        mode=BuildMode.EXTRACTIVE,
    )


def make_topic(topic_id_: str, seq: int, member_turns: Sequence[Turn], speakers: Sequence[str]) -> Topic:
    """A topic record labelled from the keyphrases of all its member scenes' turns."""
    phrases = extract_keyphrases(
        _turn_texts(member_turns), exclude=speakers, top=LABEL_PHRASES + DESCRIPTION_PHRASES, distinct=True
    )
    if phrases:
        label = "; ".join(k.text for k in phrases[:LABEL_PHRASES])
        description = "; ".join(k.text for k in phrases[LABEL_PHRASES:])
    else:
        label, description = _small_talk(speakers), ""
    return Topic(id=topic_id_, seq=seq, label=label, description=description)
