"""LongMemEval's retrieval metrics, as its official script defines them (src/retrieval/eval_utils.py), re-written.

A ranked list is given as ``rankings`` (indexes into ``corpus_ids``, best first; it may stop before the end of the
corpus, as tmem's returned context does) over the whole corpus of the history:

* ``recall_any@k``: 1 when any gold id is among the first ``k`` ranked ids, else 0;
* ``recall_all@k``: 1 when every gold id is among them;
* ``ndcg_any@k``: DCG of the first ``k`` ranked entries (relevance 1 when the entry's id is gold; the first entry
  undiscounted, entry ``i >= 2`` divided by ``log2(i)``) over the DCG of the corpus' relevances sorted best first,
  0 when the corpus holds no gold id. Entries, not ids, count: a corpus with two entries of one gold id has an ideal
  DCG of two entries.

Session-level figures of a turn ranking (``turn_to_session``) strip the turn number from every id
(``<session>_<n>`` -> ``<session>``) and grow ``k`` until the ranked entries cover ``k`` distinct sessions (or the
corpus ends). The official corpus renames the turns of an evidence session that carry no ``has_answer`` from
``answer_...`` to ``noans_...`` so that only labelled turns count; :func:`official_turn_id` does the same.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

KS = (1, 3, 5, 10)
METRICS = ("recall_any", "recall_all", "ndcg_any")


@dataclass(frozen=True)
class Scores:
    recall_any: float
    recall_all: float
    ndcg_any: float


def dcg(relevances: Sequence[float], k: int) -> float:
    """Discounted cumulative gain of the first ``k`` relevances (the first one undiscounted)."""
    rel = list(relevances)[:k]
    if not rel:
        return 0.0
    return rel[0] + sum(r / math.log2(i) for i, r in enumerate(rel[1:], start=2))


def ndcg(rankings: Sequence[int], gold: Sequence[str], corpus_ids: Sequence[str], k: int) -> float:
    wanted = set(gold)
    relevance = [1.0 if cid in wanted else 0.0 for cid in corpus_ids]
    ideal = dcg(sorted(relevance, reverse=True), k)
    if ideal == 0:
        return 0.0
    return dcg([relevance[i] for i in rankings[:k]], k) / ideal


def evaluate(rankings: Sequence[int], gold: Sequence[str], corpus_ids: Sequence[str], k: int) -> Scores:
    """recall_any, recall_all and ndcg_any at ``k`` (the official ``evaluate_retrieval``)."""
    top = {corpus_ids[i] for i in rankings[:k]}
    return Scores(
        recall_any=float(any(g in top for g in gold)),
        recall_all=float(all(g in top for g in gold)),
        ndcg_any=ndcg(rankings, gold, corpus_ids, k),
    )


def strip_turn(turn_id: str) -> str:
    """``<session id>_<n>`` -> ``<session id>``."""
    return turn_id.rsplit("_", 1)[0]


def turn_to_session(rankings: Sequence[int], gold_turns: Sequence[str], corpus_ids: Sequence[str], k: int) -> Scores:
    """Session-level scores of a turn ranking (the official ``evaluate_retrieval_turn2session``)."""
    gold = sorted({strip_turn(g) for g in gold_turns})
    sessions = [strip_turn(c) for c in corpus_ids]
    effective = k
    while effective <= len(sessions) and len({sessions[i] for i in rankings[:effective]}) < k:
        effective += 1
    return evaluate(rankings, gold, sessions, effective)


def official_turn_id(session_id: str, number: int, has_answer: bool) -> str:
    """The official corpus id of user turn ``number`` (1-based over all turns) of a session."""
    turn_id = f"{session_id}_{number}"
    if "answer" in session_id and not has_answer:
        return turn_id.replace("answer", "noans")
    return turn_id


def official_session_id(session_id: str, user_labelled: bool) -> str:
    """The official corpus id of a whole session: an evidence session none of whose user turns is labelled counts
    as ``noans_...``."""
    return session_id.replace("answer", "noans") if "answer" in session_id and not user_labelled else session_id


def gold_of(corpus_ids: Sequence[str]) -> list[str]:
    """The official gold ids of a corpus: every id that contains ``answer``, once."""
    return list(dict.fromkeys(c for c in corpus_ids if "answer" in c))


def all_scores(scores_at: dict[int, Scores]) -> dict[str, float]:
    """``{"recall_any@1": ..., "ndcg_any@10": ...}`` for every k."""
    return {f"{m}@{k}": getattr(s, m) for k, s in scores_at.items() for m in METRICS}
