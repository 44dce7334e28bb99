"""Answer metrics: LoCoMo-style token F1 and the mean / standard deviation of judge accuracy over runs.

Normalisation follows LoCoMo's official ``evaluation.py``: lowercase, drop punctuation, drop the words
``a``, ``an``, ``the`` and ``and``, collapse whitespace. Unlike the official script no Porter stemming is applied
(nltk is not a dependency); docs/evaluation.md records this.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Sequence

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """LoCoMo normalisation: lowercase, strip punctuation and articles, collapse whitespace."""
    lowered = text.lower().replace(",", "")
    no_punct = lowered.translate(_PUNCT)
    no_articles = _ARTICLES.sub(" ", no_punct)
    return " ".join(no_articles.split())


def token_f1(prediction: str, gold: str) -> float:
    """Harmonic mean of token precision and recall after normalisation (0.0 when nothing is shared)."""
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:
        return 1.0 if pred_tokens == gold_tokens else 0.0
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and population standard deviation (ddof=0, as the MemOS LoCoMo script reports); (nan, nan) if empty."""
    if not values:
        return math.nan, math.nan
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / len(values)
    return mean, math.sqrt(var)
