"""Keyphrases and names without any model: a RAKE-style scorer written for conversational text.

RAKE (Rose et al., 2010) splits a text into candidate phrases at stopwords and punctuation and scores each word by
``degree / frequency`` over the document, a phrase by the sum of its words. Two changes for chat:

- the stoplist also holds conversational fillers ("wow", "really", "awesome", "gonna") and light verbs, which would
  otherwise glue themselves to every phrase;
- a capitalised word following a lower-case one starts a new candidate (names stand alone: "met Jon");
- candidates are at most three words long, and a phrase's document score is multiplied by how often it occurs, so a
  thing talked about repeatedly outranks a one-off long phrase.

Phrases made only of excluded names (or short forms of them: "Mel" for "Melanie") are dropped.

Names are capitalised spans that are not at the start of a sentence (or are capitalised wherever they occur in the
document), minus the words in the stoplist; they are returned as candidates like any other phrase and flagged.

The "document" is whatever the caller passes (a session, a scene, a topic's scenes): scores never depend on text
outside it, which keeps incremental builds equal to full builds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["FIRST_PERSON", "STOPWORDS", "Keyphrase", "content_words", "extract_keyphrases"]

_STOP_TEXT = """
a about above after again against all almost also although always am among an and another any anybody anyone
anything anyway anyways are aren't around as at away back be became because become been before being below
besides between both but by can can't cannot could couldn't did didn't do does doesn't doing don't done down during
each either else enough especially even ever every everybody everyone everything few for from further had hadn't has
hasn't have haven't having he he'd he'll he's her here here's hers herself him himself his how how's however i i'd
i'll i'm i've if in into is isn't it it's its itself just least less let let's like likely lot lots made make makes
making many may maybe me might mine more most much must my myself neither never no nobody none nor not nothing now of
off often oh ok okay on once one ones only onto or other others otherwise ought our ours ourselves out over own
perhaps please quite rather re really same several shall she she'd she'll she's should shouldn't since so some
somebody someone something sometimes somewhat soon still such than that that's the their theirs them themselves then
there there's these they they'd they'll they're they've thing things this those though through thus till to too
toward towards under until up upon us very via was wasn't we we'd we'll we're we've well were weren't what what's
whatever when whenever where where's whether which while who who's whoever whole whom whose why will with within
without won't would wouldn't yet you you'd you'll you're you've your yours yourself yourselves
hey hi hello bye goodbye thanks thank thx yeah yes yep yup nope wow whoa cool awesome great amazing nice good glad
fantastic wonderful incredible lovely sweet super totally definitely absolutely truly seriously actually honestly
basically literally pretty kinda sorta gonna wanna gotta lol haha hahaha omg btw hmm um uh ah aw aww gosh sure
fine alright right true exactly agreed congrats congratulations sounds sound seems seem looks look feel feels felt
feeling think thought thinking know knew known get gets got getting go goes going went gone come comes came coming
say says said tell told see saw seen want wanted wants take took taken give gave given keep kept mean means meant
guess hope hoped hoping love loved loves wish wished bet way ways kind sort stuff bit lots much many new old big
help helps helped helping try tries tried trying lot
little day days time times today yesterday tomorrow tonight week weeks month months year years ago last next
recently lately also already again something anything everything nothing ya yah
photo photos pic pics picture pictures image images
two three four five six seven eight nine ten eleven twelve twenty hundred thousand first second third
"""
STOPWORDS: frozenset[str] = frozenset(_STOP_TEXT.split())

# A speaker's own facts are said in the first person ("I moved", "my car", "we sold").
FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|we|we're|we've|we'd|us|our|ours)\b", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’\-]*")
_SENTENCE_END = re.compile(r"[.!?]+|\n")
_TOKEN = re.compile(r"(?P<w>[A-Za-z0-9][A-Za-z0-9'’\-]*)|(?P<b>[&,;:()\"“”\[\]{}/—–…!?\n]|\.(?=\s|$)|\s-\s)")
_MAX_WORDS = 3


@dataclass(frozen=True)
class Keyphrase:
    """A scored candidate phrase of a document."""

    text: str  # surface form of the first occurrence
    key: str  # normalised form (lower case, possessive dropped): what counts as "the same phrase"
    score: float
    count: int
    is_name: bool
    first_pos: int  # character offset of the first occurrence in the joined document


def _norm(word: str) -> str:
    word = word.lower().replace("’", "'").strip("'-")
    return word[:-2] if word.endswith("'s") else word


def _is_content(word: str) -> bool:
    """Not a stopword, at least two characters, not starting with a digit ("18th" and "2023" carry no topic)."""
    return len(word) >= 2 and word not in STOPWORDS and not word[0].isdigit()


def _surface(raw: str) -> str:
    word = raw.replace("’", "'").strip("'-")
    return word[:-2] if word.lower().endswith("'s") else word


def content_words(text: str) -> list[str]:
    """Lower-cased words of ``text`` that are not stopwords or fillers (and at least two characters long)."""
    out = []
    for match in _WORD.finditer(text):
        word = _norm(match.group(0))
        if _is_content(word):
            out.append(word)
    return out


def _candidates(text: str) -> Iterable[tuple[list[str], list[str], int]]:
    """(normalised words, surface words, start offset) of each candidate phrase.

    A phrase is a maximal run of non-stopwords not interrupted by punctuation.
    """
    run_norm: list[str] = []
    run_surface: list[str] = []
    run_start = 0
    for match in _TOKEN.finditer(text):
        raw = match.group("w")
        word = _norm(raw) if raw is not None else ""
        if raw is None or not _is_content(word):
            if run_norm:
                yield from _emit(run_norm, run_surface, run_start)
            run_norm, run_surface = [], []
            continue
        if run_norm and raw[:1].isupper() and run_surface[-1][:1].islower():
            # a capitalised word after a lower-case one starts a name: "met Jon" is "met" + "Jon"
            yield from _emit(run_norm, run_surface, run_start)
            run_norm, run_surface = [], []
        if not run_norm:
            run_start = match.start()
        run_norm.append(word)
        run_surface.append(_surface(raw))
    if run_norm:
        yield from _emit(run_norm, run_surface, run_start)


def _emit(norm: list[str], surface: list[str], start: int) -> Iterable[tuple[list[str], list[str], int]]:
    # runs longer than the limit are cut into consecutive pieces of at most _MAX_WORDS words
    for i in range(0, len(norm), _MAX_WORDS):
        yield norm[i : i + _MAX_WORDS], surface[i : i + _MAX_WORDS], start


def _capitalised_words(text: str) -> tuple[set[str], set[str]]:
    """Words capitalised mid-sentence (name evidence) and words seen in lower case anywhere."""
    mid_caps: set[str] = set()
    lower_seen: set[str] = set()
    for sentence in _SENTENCE_END.split(text):
        for i, match in enumerate(_WORD.finditer(sentence)):
            raw = match.group(0)
            if raw[:1].islower():
                lower_seen.add(_norm(raw))
            elif i > 0 and raw[:1].isupper() and raw.lower() != "i":
                mid_caps.add(_norm(raw))
    return mid_caps, lower_seen


def _is_short_form(word: str, names: tuple[str, ...]) -> bool:
    return len(word) >= 3 and any(name != word and name.startswith(word) for name in names)


def extract_keyphrases(
    texts: Sequence[str], *, exclude: Iterable[str] = (), top: int | None = None, distinct: bool = False
) -> list[Keyphrase]:
    """Score candidate phrases over the document made of ``texts`` (joined by newlines), best first.

    ``exclude`` removes phrases equal (case-insensitively) to one of the given strings, e.g. the speakers' names,
    which would otherwise top every list. ``distinct`` drops a phrase whose words all occur in a better-ranked one
    ("studio" after "dance studio"), for titles and labels. Ties are broken by first occurrence, so the order is
    deterministic.
    """
    document = "\n".join(texts)
    excluded = {_norm(x) for x in exclude}
    # a short form of an excluded name ("Mel" for "Melanie") is the same person addressed familiarly
    prefixes = tuple(x for x in excluded if x)
    freq: dict[str, int] = {}
    degree: dict[str, int] = {}
    phrases: dict[str, tuple[str, int, int]] = {}  # key -> (surface, count, first_pos)
    cands = list(_candidates(document))
    for norm, words_surface, start in cands:
        for word in norm:
            freq[word] = freq.get(word, 0) + 1
            degree[word] = degree.get(word, 0) + len(norm)
        key = " ".join(norm)
        if key in phrases:
            s, c, p = phrases[key]
            phrases[key] = (s, c + 1, p)
        else:
            phrases[key] = (" ".join(words_surface), 1, start)
    mid_caps, lower_seen = _capitalised_words(document)
    out: list[Keyphrase] = []
    for key, (surface, count, first_pos) in phrases.items():
        words = key.split()
        if key in excluded or all(w in excluded or _is_short_form(w, prefixes) for w in words):
            continue
        score = sum(degree[w] / freq[w] for w in words) * count
        is_name = all(w in mid_caps and w not in lower_seen for w in words)
        out.append(Keyphrase(text=surface, key=key, score=score, count=count, is_name=is_name, first_pos=first_pos))
    out.sort(key=lambda k: (-k.score, k.first_pos, k.text))
    if distinct:
        chosen: list[set[str]] = []
        kept: list[Keyphrase] = []
        for k in out:
            key_words = set(k.key.split())
            if not any(key_words <= c for c in chosen):
                chosen.append(key_words)
                kept.append(k)
        out = kept
    return out if top is None else out[:top]
