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
closing marker, no chat-template control tokens such as ``<|im_start|>`` or ``<<SYS>>``.

The rest is decided by Unicode data, not by a list of characters someone happened to try (issue 33):

* **Bracket look-alikes** are written as HTML numeric references (``&#x227A;``), which keep their meaning and lose
  their glyph: every character whose name says it points left or right like a bracket (LESS-THAN, GREATER-THAN,
  ANGLE BRACKET, ANGLE QUOTATION MARK, LEFT/RIGHT ARROWHEAD, PRECEDES, SUCCEEDS, LEFT-/RIGHT-POINTING triangles,
  pointers and angles), whose NFKC form holds ``<`` or ``>``, or which Unicode's confusables data (UTS #39
  ``confusables.txt``, as shipped by ``confusable-homoglyphs``) lists as confusable with ``<`` or ``>``. A letter
  of a living script that merely resembles a bracket and is in none of these (Bopomofo U+3111) is kept: escaping it
  would garble the text of its readers, and it cannot close a fence (``>`` and every right-pointing look-alike are
  escaped).
* **Invisible characters are removed**: every Default_Ignorable_Code_Point (zero-width spaces and joiners, the
  combining grapheme joiner, Hangul fillers, variation selectors, the tag block U+E0000-U+E0FFF), every format
  character (category Cf: bidirectional overrides and isolates, soft hyphens), private-use characters (Co) and
  unassigned code points (Cn), control characters (newlines and tabs stay), and combining marks without a base
  (a mark at the start of the text or after whitespace: nothing for it to sit on, so it only hides or stacks). A
  mark on a letter (``é`` written ``e`` + U+0301) is kept. They can hide text from a human reviewing a prompt, or
  carry an instruction a model decodes. The rewrite is one-way and prompt-only: stored text is never changed.

Fence tags are fixed names, not per-request nonces: a request's hash is the response-cache key (a resumed build pays
nothing twice), so prompts must be a pure function of their inputs. Escaping makes a nonce unnecessary.

Program-written text (instructions, counts, references such as ``S1``) is marked :class:`Trusted`; renderers accept
only :class:`Fenced`, :class:`Trusted` and numbers as placeholder values, so raw conversation text cannot be put into
a prompt by accident.
"""

from __future__ import annotations

import json
import re
import unicodedata
from functools import cache
from importlib import resources

import regex

__all__ = ["Fenced", "Trusted", "check_value", "fence", "fence_inline", "neutralise", "one_line", "shown_id"]

# Characters a reader (or a model) takes for "<" or ">".
_LT = "<\uff1c\ufe64\u2039\u2329\u27e8\u3008\u276e\u276c\u2770\u29fc\u02c2\u1438"
_GT = ">\uff1e\ufe65\u203a\u232a\u27e9\u3009\u276f\u276d\u2771\u29fd\u02c3\u1433"
_BRACKET_NAMES = (
    "LESS-THAN",
    "GREATER-THAN",
    "ANGLE BRACKET",
    "ANGLE QUOTATION MARK",
    "LEFT ARROWHEAD",
    "RIGHT ARROWHEAD",
    "PRECEDES",
    "SUCCEEDS",
)
_POINTING = re.compile(r"\b(LEFT|RIGHT)[- ]POINTING\b.*\b(TRIANGLE|POINTER|ANGLE)\b")
# Removed inside a fence: Default_Ignorable_Code_Point, format, private-use and unassigned code points.
_IGNORABLE = regex.compile(r"[\p{Default_Ignorable_Code_Point}\p{Cf}\p{Co}\p{Cn}]")
_BASELESS_MARKS = regex.compile(r"(?:^|(?<=\s))\p{M}+")


@cache
def _confusable_brackets() -> frozenset[str]:
    """Characters Unicode's confusables data lists as confusable with ``<`` or ``>`` (either direction)."""
    data = json.loads(resources.files("confusable_homoglyphs").joinpath("confusables.json").read_text("utf-8"))
    found = {h["c"] for key in "<>" for h in data.get(key, ())}
    found |= {key for key, alikes in data.items() if any(h["c"] in "<>" for h in alikes)}
    return frozenset(c for c in found if len(c) == 1 and c not in "<>")


def _rewrite(cp: int) -> str | None:
    """What code point ``cp`` becomes inside a fence: None (removed), a replacement, or itself."""
    char = chr(cp)
    if cp in (0x2028, 0x2029):  # line and paragraph separators: a newline, as every reader shows them
        return "\n"
    if _IGNORABLE.match(char):
        return None
    name = unicodedata.name(char, "")
    nfkc = unicodedata.normalize("NFKC", char)
    if (
        any(word in name for word in _BRACKET_NAMES)
        or _POINTING.search(name)
        or "<" in nfkc
        or ">" in nfkc
        or (cp > 0x7F and char in _confusable_brackets())
    ):
        return f"&#x{cp:X};"
    return char


class _Table(dict[int, str | None]):
    """The translation table of :func:`neutralise`, filled in as code points are met (one lookup per new one)."""

    def __missing__(self, cp: int) -> str | None:
        self[cp] = out = _rewrite(cp)
        return out


_TABLE = _Table({ord(c): "&lt;" for c in _LT} | {ord(c): "&gt;" for c in _GT})
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
    """``text`` with every angle bracket (and lookalike) escaped and control and invisible characters removed.

    Newlines and tabs are kept (multi-line data stays readable); lone surrogates are replaced by U+FFFD so a prompt
    can always be encoded.
    """
    text = _CONTROL.sub(" ", text.replace("\r\n", "\n").replace("\r", "\n")).translate(_TABLE)
    return _BASELESS_MARKS.sub("", _SURROGATE.sub("\ufffd", text))


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
