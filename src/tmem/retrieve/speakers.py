"""A query's speaker names say whom it asks about, not what it means (docs/retrieval.md, "Speaker names in a query").

"Where does Dana work?" asked of a conversation between Dana and Sam names one of its speakers. Raw turns are embedded
without their speaker, so the name's only dense match is the turns that *address* her ("Hey Dana! Good to see you!"),
and with MiniLM a name weighs heavily in a short query: such greetings outrank the turn that answers ("I've been working
at Acme Logistics as a dispatcher"). So the query is embedded with the names of the space's speakers taken out (a
possessive "'s" with them). BM25 keeps them: a turn's BM25 text starts with its speaker, so there the name says who
said it (measured: taking the names out of BM25 as well gave 0.4-1.0 points less LoCoMo evidence coverage, pooled
over the 7 dev conversations, at every budget).

When nothing but question scaffolding would remain ("Who is Dana?", "Tell me about Dana"), the name *is* what is asked
and the query is embedded as it is. ``RetrievalConfig.keep_speaker_names`` turns the rule off.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from tmem.index.bm25 import tokenize

__all__ = ["without_speakers"]

# Words that ask rather than say what is asked about (English): a query left with only these asks about the person.
_ASKING = frozenset(
    re.findall(
        r"\w+",
        "what when where which who whom whose why how is are was were am do does did has have had can could will "
        "would shall should may might must tell me about know you i s",
    )
)


def _pattern(names: Iterable[str]) -> re.Pattern[str] | None:
    """One pattern for every name (a multi-word name also by each of its words), longest first."""
    words: set[str] = set()
    for name in names:
        name = name.strip()
        if not name or not tokenize(name):
            continue
        words.add(name)
        parts = name.split()
        if len(parts) > 1:
            words.update(p for p in parts if tokenize(p) and p.casefold() not in _ASKING)
    if not words:
        return None
    alternatives = "|".join(re.escape(w) for w in sorted(words, key=lambda w: (-len(w), w)))
    return re.compile(rf"(?<!\w)(?:{alternatives})(?:['’]s)?(?!\w)", re.IGNORECASE)


def without_speakers(query: str, names: Iterable[str]) -> str:
    """``query`` with the speaker ``names`` taken out, to be embedded; ``query`` itself when it names none of them or
    when only question words would remain."""
    pattern = _pattern(names)
    if pattern is None:
        return query
    stripped, found = pattern.subn(" ", query)
    if not found:
        return query
    stripped = re.sub(r"\s+([?!.,;:])", r"\1", re.sub(r"\s+", " ", stripped)).strip()
    if not any(token not in _ASKING for token in tokenize(stripped)):
        return query
    return stripped
