"""The lexical anchor of a query: how much of it the best lexical match explains.

A question such as "When did Caroline go to the LGBTQ support group?" shares its rare words with the turn that
answers it; a message such as "My feet are killing me by every evening lately" shares none with the memory it should
recall (a new standing job, weeks earlier). BM25 still returns *something* for the second one, through the common
words it happens to share, and those accidental matches crowd the context.

The anchor of a query is the largest share of the query's IDF mass (over the space's raw turns) that one of the best
BM25 turns contains: ``sum idf(t) for t in query & turn / sum idf(t) for t in query``, in [0, 1]. Query words no turn
holds get the largest IDF (they cannot be matched, so they weigh as unexplained). It uses only the space's own
turns and the query, so it carries to any conversation and any embedder. docs/retrieval.md says how the context uses
it (``ContextLayout.lexical_floor``).

A calendar date in the query ("on 5 November, 2022", "in May 2023") is left out of both sides of the share: it says
*when*, not *what*. A turn's date is metadata, not words of its text, so BM25 can never match it, and counted as
unexplained it would make "What game is John hooked on playing on 5 November, 2022?" look as unanchored as a message
that shares nothing with the memory.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence

from tmem.index.bm25 import tokenize
from tmem.util.dates import MONTHS

_MONTH = "|".join([*(f"{name[:3]}(?:{name[3:]})?" for name in MONTHS), "Sept"])
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_YEAR = r"(?:19|20)\d\d"
_DATE = re.compile(
    rf"\b(?P<iso>{_YEAR}-\d{{1,2}}-\d{{1,2}})\b"  # 2023-05-08
    rf"|\b(?P<slash>\d{{1,2}}/\d{{1,2}}/(?:\d{{4}}|\d{{2}}))\b"  # 5/8/2023
    # 5 November, 2022 / November 5th 2022 / the 3rd of July / May 2023 / Sept. 4th / June
    rf"|\b(?P<month>(?:{_DAY}\s+(?:of\s+)?)?(?P<name>{_MONTH})\b\.?(?:\s*{_DAY}\b)?(?:,?\s*(?P<year>{_YEAR})\b)?)"
    rf"|\b(?P<bare_year>{_YEAR})\b",
    re.IGNORECASE,
)
# A month name with no day or year is a date only after one of these ("in June", "mid-May"): a person called April,
# "to June", "plan to march" stay words of the query. A year alone is one only after one of the second list ("in
# 2021", "from 2019 to 2021"): "2000 dollars" stays a number.
_BEFORE_MONTH = re.compile(r"(?:\b(?:in|since|until|till|during|last|next)\s+|\b(?:early|mid|late)[\s-]+)$", re.I)
_BEFORE_YEAR = re.compile(
    r"\b(?:in|since|until|till|during|of|by|before|after|from|to|through|around|circa|early|mid|late|spring|summer"
    r"|autumn|fall|winter)[\s-]+$",
    re.IGNORECASE,
)
_LOOK_BACK = 16  # characters before a match searched for the words above (the longest is "through" and a space)
# A direct question: an interrogative word first and a question mark last ("Would Caroline likely have Dr. Seuss
# books?"). A message that ends on a rhetorical question ("... who am I, choosing rest over gadgets?") is not one.
_QUESTION = re.compile(
    r"^\W*(?:what|when|where|which|who|whom|whose|why|how|is|are|was|were|am|do|does|did|has|have|had|can|could|will"
    r"|would|shall|should|may|might|must)\b[^\n]*\?\W*$",
    re.IGNORECASE,
)


def is_question(query: str) -> bool:
    """Whether ``query`` is a direct question (English): it opens with an interrogative word or an auxiliary verb and
    ends with a question mark. It asks for what was said, so its words are those of the turns that answer it even
    when one turn holds few of them (docs/retrieval.md: how a space never built orders such a query)."""
    return bool(_QUESTION.match(query.strip()))


def date_words(query: str) -> set[str]:
    """The tokens of the calendar dates in ``query``, which the anchor leaves out: numeric dates, a month with its day
    or year, a capitalised month after a word such as "in", a year after a word such as "in" or "since". A month
    written in lower case counts only with its year ("in may 2023", not "the 5 may help")."""
    words: set[str] = set()
    for match in _DATE.finditer(query):
        start = match.start()
        before = max(0, start - _LOOK_BACK)
        if match.group("iso") or match.group("slash"):
            found = True
        elif match.group("month"):
            if match.group("year"):
                found = True
            elif match.group("name")[0].islower():
                found = False
            else:
                found = any(c.isdigit() for c in match.group(0)) or bool(_BEFORE_MONTH.search(query, before, start))
        else:
            found = bool(_BEFORE_YEAR.search(query, before, start))
        if found:
            words.update(tokenize(match.group(0)))
    return words


class TurnLexicon:
    """Document frequencies of the tokens of a space's raw turns (BM25's tokenizer), for :meth:`anchor`."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.df: Counter[str] = Counter()
        self.n = 0
        self.tokens = 0  # every document's length in tokens, summed (BM25's average length: tokens / n)
        for text in texts:
            words = tokenize(text)
            self.df.update(set(words))
            self.n += 1
            self.tokens += len(words)

    def idf(self, token: str) -> float:
        df = self.df.get(token, 0)
        return math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))

    def anchor(self, query: str, best_texts: Sequence[str]) -> float:
        """The largest share of the query's IDF mass that one of ``best_texts`` contains (0 when none is given or the
        query has no token but its dates)."""
        words = set(tokenize(query)) - date_words(query)
        if not words or not best_texts:
            return 0.0
        weights = {w: self.idf(w) for w in words}
        total = math.fsum(weights.values())
        if total <= 0.0:
            return 0.0
        best = 0.0
        for text in best_texts:
            shared = words.intersection(tokenize(text))
            best = max(best, math.fsum(weights[w] for w in shared) / total)
        return best
