"""Prompt fencing: the one way conversation-derived text enters an LLM prompt.

Every piece of text that comes from a conversation (turns, speaker names, ids, captions) or from a model that read
one (scene titles and narratives, topic labels, items, persona traits fed back to later stages, retrieved memories)
is put inside a fence::

    <conversation>
    ... data ...
    </conversation>

A fence is only as good as the guarantee that its closing marker cannot occur in the data. :func:`neutralise`
gives that guarantee by construction: it rewrites every ``<`` and ``>`` (and the Unicode characters a model reads
as angle brackets: fullwidth, small, mathematical and CJK lookalikes) to ``&lt;`` / ``&gt;``, the escaped form
models know from HTML. Fenced data therefore contains no tag at all: no ``</conversation>``, no other fence's
closing marker, no chat-template control tokens such as ``<|im_start|>`` or ``<<SYS>>``. It also removes control
and bidirectional-override characters (which can hide text from a human reviewing a prompt). The rewrite is one-way
and prompt-only: stored text is never changed.

Fence tags are fixed names, not per-request nonces: a request's hash is the response-cache key (a resumed build pays
nothing twice), so prompts must be a pure function of their inputs. Escaping makes a nonce unnecessary.

Program-written text (instructions, counts, references such as ``S1``) is marked :class:`Trusted`; renderers accept
only :class:`Fenced`, :class:`Trusted` and numbers as placeholder values, so raw conversation text cannot be put into
a prompt by accident.
"""

from __future__ import annotations

import re

__all__ = ["Fenced", "Trusted", "check_value", "fence", "fence_inline", "neutralise", "one_line", "shown_id"]

# Characters a reader (or a model) takes for "<" or ">".
_LT = "<\uff1c\ufe64\u2039\u2329\u27e8\u3008\u276e\u276c\u2770\u29fc\u02c2\u1438"
_GT = ">\uff1e\ufe65\u203a\u232a\u27e9\u3009\u276f\u276d\u2771\u29fd\u02c3\u1433"
_TABLE = {ord(c): "&lt;" for c in _LT} | {ord(c): "&gt;" for c in _GT}
# Bidirectional embeddings/overrides/isolates: they reorder what a reviewer sees.
_TABLE |= {cp: None for cp in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))}
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_TAG = re.compile(r"^[a-z][a-z_]*$")


class Fenced(str):
    """Text already inside a fence (made only by :func:`fence` / :func:`fence_inline`)."""

    __slots__ = ()


class Trusted(str):
    """Program-written prompt text (instructions, counts, our own references): never conversation-derived."""

    __slots__ = ()


def neutralise(text: str) -> str:
    """``text`` with every angle bracket (and lookalike) escaped and control/bidi-override characters removed.

    Newlines and tabs are kept (multi-line data stays readable); lone surrogates are replaced by U+FFFD so a prompt
    can always be encoded.
    """
    text = _CONTROL.sub(" ", text.replace("\r\n", "\n").replace("\r", "\n")).translate(_TABLE)
    return _SURROGATE.sub("\ufffd", text)


def one_line(text: str) -> str:
    """Collapse all whitespace (newlines included) to single spaces: for fields shown on one line."""
    return " ".join(text.split())


def shown_id(ident: str) -> str:
    """How an id (turn, session) appears inside a fence: a model quoting it back quotes this form."""
    return one_line(neutralise(ident))


def _tag(tag: str) -> str:
    if not _TAG.match(tag):
        raise ValueError(f"fence tag {tag!r} must be lower-case letters and underscores")
    return tag


def fence(tag: str, data: str) -> Fenced:
    """``data`` neutralised and fenced on lines of its own: ``<tag>\\n...\\n</tag>``."""
    tag = _tag(tag)
    return Fenced(f"<{tag}>\n{neutralise(data)}\n</{tag}>")


def fence_inline(tag: str, data: str) -> Fenced:
    """A short single-line value fenced inline: ``<tag>value</tag>`` (whitespace collapsed)."""
    tag = _tag(tag)
    return Fenced(f"<{tag}>{one_line(neutralise(data))}</{tag}>")


def check_value(name: str, value: object) -> str:
    """A placeholder value as a string, refusing raw ``str`` (which might be unfenced conversation text)."""
    if isinstance(value, Fenced | Trusted):
        return str(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise TypeError(
        f"prompt value {name!r} is a plain {type(value).__name__}: fence conversation-derived text with "
        "tmem.util.fence.fence(), or mark program-written text Trusted(...)"
    )
