"""What a record's vector encodes. Below both construction (which embeds turns while it builds) and the index (which
embeds the same turns when it refreshes or searches unbuilt ones), so neither package imports the other for it."""

from __future__ import annotations

from tmem.models import Turn

__all__ = ["turn_embedding_text"]


def turn_embedding_text(turn: Turn) -> str:
    """What a turn's vector encodes: its text, plus the caption of an image it shared."""
    return turn.text if not turn.caption else f"{turn.text} (image: {turn.caption})"
