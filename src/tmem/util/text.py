"""Small text helpers shared by several stages."""

from __future__ import annotations

import hashlib
import re

_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def text_hash(text: str) -> str:
    """Stable content hash of a text (sha256, hex)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def count_tokens(text: str) -> int:
    """Approximate LLM token count: words and punctuation marks.

    No tokenizer file can be downloaded here, so every report uses this one documented measure (see
    docs/design-decisions.md); it is consistent across tmem and the baselines it is compared with.
    """
    return len(_TOKEN.findall(text))
