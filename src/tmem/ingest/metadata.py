"""Metadata a caller attaches to a message (issue 19): labels such as ``{"project": "alpha", "priority": 2}``.

A message's ``metadata`` is a flat JSON object, stored with its turn (``Turn.metadata``) and used by filters
(:mod:`tmem.retrieve.filters`). The limits, checked before anything of a call is stored:

* at most ``MAX_KEYS`` keys; each key a printable, non-blank string of at most ``MAX_KEY_CHARS`` characters;
* each value a string of at most ``MAX_STRING_CHARS`` characters (no NUL), an integer of magnitude below 2**53 (so
  that every JSON reader reads it back exactly), a finite number, or a boolean. No null (leave the key out), no list
  or object (flatten it: ``{"tags": ["a", "b"]}`` becomes ``{"tag_a": true, "tag_b": true}``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from tmem.ingest.limits import check_name, check_text

MAX_KEYS = 32
MAX_KEY_CHARS = 64
MAX_STRING_CHARS = 256
MAX_INT = 2**53


def value_problem(value: object) -> str | None:
    """The problem with one metadata value, or None when it is fine."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return (
            None
            if abs(value) < MAX_INT
            else f"is {value}; an integer value must lie strictly between -2**53 and 2**53."
        )
    if isinstance(value, float):
        return None if math.isfinite(value) else f"is {value}; a number must be finite."
    if isinstance(value, str):
        if len(value) > MAX_STRING_CHARS:
            return f"is {len(value)} characters long; a string value may have at most {MAX_STRING_CHARS}."
        return check_text(value, "a metadata value", MAX_STRING_CHARS)
    if value is None:
        return "is null; leave the key out instead."
    kind = "a list" if isinstance(value, list | tuple) else "an object" if isinstance(value, Mapping) else "not JSON"
    return f"is {kind}; a value must be a string, a number or a boolean (flatten lists and objects into keys)."


def metadata_problem(metadata: object) -> str | None:
    """The problem with a message's whole ``metadata`` (naming the key), or None when it is fine."""
    if not isinstance(metadata, Mapping):
        return 'must be an object of keys to values, e.g. {"project": "alpha"}.'
    if len(metadata) > MAX_KEYS:
        return f"has {len(metadata)} keys; a message may carry at most {MAX_KEYS} (drop or merge some)."
    for key, value in metadata.items():
        if not isinstance(key, str):
            return f"has the key {key!r}; keys must be strings."
        problem = check_name(key, "a metadata key", MAX_KEY_CHARS)
        if problem:
            return f"key {key[:MAX_KEY_CHARS]!r} {problem}"
        problem = value_problem(value)
        if problem:
            return f"value of {key!r} {problem}"
    return None
