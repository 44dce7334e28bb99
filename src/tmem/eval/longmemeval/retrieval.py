"""LongMemEval retrieval-only: the official session- and turn-level metrics, and evidence coverage at equal tokens.

Per instance, every system ranks the history for the question:

* ``tmem``: the turns of its unbudgeted context (:func:`tmem.answer.budget.recall` without a token limit) in the
  order its hits are taken (the one priority order over items, scenes and raw turns that every budgeted reader
  gets): an item ranks its source turn, a scene its excerpt's turns. It returns a context, not the whole history,
  so its ranking stops there;
* ``bm25``, ``dense``, ``hybrid``: the flat turn baselines of :mod:`tmem.eval.baselines` (ranked over every turn);
* ``bm25-session``, ``dense-session``, ``hybrid-session``: the same three over whole sessions, a session's text
  being its user turns joined (the official session corpus).

As in the official retrieval script, the turn corpus is the user turns (``<session>_<n>``, a turn of an evidence
session without ``has_answer`` renamed ``noans_...``), so assistant turns are dropped from every turn ranking before
scoring; session-level figures of a turn ranking use the official turn-to-session rule; abstention questions and
questions without a labelled user turn are left out of the averages (their records say ``counted: false``).

With budgets, every system's context is also walked to each token budget (:func:`budget_cells`): the share of the
``has_answer`` turns (user and assistant) inside tmem's budgeted context beside the flat turn baselines and the
query-agnostic control packed to the same number of tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field
from tqdm import tqdm

from tmem.answer.budget import recall
from tmem.eval.baselines import SpaceBaselines, Vectorize
from tmem.eval.harness import MemoEmbedder, Variant
from tmem.eval.longmemeval.data import Instance
from tmem.eval.longmemeval.metrics import (
    KS,
    all_scores,
    evaluate,
    gold_of,
    official_session_id,
    official_turn_id,
    turn_to_session,
)
from tmem.eval.records import BudgetCell, Keyed, ResultsFile
from tmem.eval.retrieval_only import Query, budget_cells
from tmem.index.bm25 import BM25Index
from tmem.index.dense import DenseTable
from tmem.index.space import cached_vectorizer
from tmem.retrieve.cascade import Retriever
from tmem.retrieve.fusion import rrf
from tmem.scope import Scope
from tmem.store.base import Store
from tmem.util.tokens import TokenCounter

TURN_SYSTEMS = ("tmem", "bm25", "dense", "hybrid")
SESSION_SYSTEMS = ("bm25-session", "dense-session", "hybrid-session")


class RetrievalRecord(Keyed):
    """One instance's metrics for every system."""

    question_type: str
    abstention: bool
    counted: bool = Field(description="In the official averages: not abstention, and a user turn is labelled.")
    metrics: dict[str, dict[str, dict[str, float]]] = Field(
        description="system -> 'session' | 'turn' -> 'recall_any@5' ... (turn level for turn rankings only)."
    )
    budgets: list[BudgetCell] = Field(default_factory=list)
    counter: str


class _Corpus:
    """The official turn and session corpora of one history, with the stored turn id of every corpus entry."""

    def __init__(self, inst: Instance) -> None:
        labelled = set(inst.evidence_turn_ids)
        self.turn_ids: list[str] = []  # official ids of the user turns
        self.index: dict[str, int] = {}  # stored turn id -> position in turn_ids
        self.session_ids: list[str] = []
        self.session_texts: list[str] = []
        for session in inst.space.sessions:
            users = [t for t in session.turns if t.speaker == "user"]
            for t in users:
                number = int(t.id.rsplit("_", 1)[1])
                self.index[t.id] = len(self.turn_ids)
                self.turn_ids.append(official_turn_id(session.id, number, t.id in labelled))
            if users:
                self.session_ids.append(official_session_id(session.id, any(t.id in labelled for t in users)))
                self.session_texts.append(" ".join(t.text for t in users))
        self.turn_gold = gold_of(self.turn_ids)
        self.session_gold = gold_of(self.session_ids)

    def turn_scores(self, ranked: Sequence[str]) -> dict[str, dict[str, float]]:
        rankings = [self.index[t] for t in ranked if t in self.index]
        return {
            "turn": all_scores({k: evaluate(rankings, self.turn_gold, self.turn_ids, k) for k in KS}),
            "session": all_scores({k: turn_to_session(rankings, self.turn_gold, self.turn_ids, k) for k in KS}),
        }

    def session_rankings(self, question: str, vectorize: Vectorize) -> dict[str, list[int]]:
        ids = [str(i) for i in range(len(self.session_ids))]
        bm25 = [int(d) for d, _ in BM25Index.build(ids, self.session_texts).search(question, len(ids))]
        ranked = set(bm25)
        bm25 += [i for i in range(len(ids)) if i not in ranked]
        table = DenseTable(ids, vectorize(self.session_texts))
        dense = [int(d) for d, _ in table.search(vectorize([question])[0], len(ids))]
        hybrid = [int(d) for d, _ in rrf([[str(i) for i in bm25], [str(i) for i in dense]])]
        return {"bm25-session": bm25, "dense-session": dense, "hybrid-session": hybrid}

    def session_scores(self, rankings: Sequence[int]) -> dict[str, dict[str, float]]:
        return {"session": all_scores({k: evaluate(rankings, self.session_gold, self.session_ids, k) for k in KS})}


def run_retrieval(
    store: Store,
    retriever: Retriever,
    embedder: MemoEmbedder,
    instances: Sequence[Instance],
    variant: Variant,
    results: ResultsFile[RetrievalRecord],
    *,
    budgets: Sequence[int],
    counter: TokenCounter,
    progress: bool = False,
) -> int:
    """Score every instance not in ``results`` yet; returns how many records were added."""
    todo = [i for i in instances if f"{variant.name}|{i.key}" not in results]
    embedder.prime([i.question for i in todo])
    added = 0
    for inst in tqdm(todo, desc="retrieval", unit="q", disable=not progress):
        scope = Scope.local(inst.key)
        vectorize = cached_vectorizer(store, scope, embedder)
        corpus = _Corpus(inst)
        baselines = SpaceBaselines(store, scope, vectorize, counter)
        _, context = recall(retriever, scope, inst.question, None, variant.config, include_persona=False)
        ranked = list(dict.fromkeys(t for hit in context.hits for t in hit.turn_ids))
        metrics = {"tmem": corpus.turn_scores(ranked)}
        for name, ranking in baselines.rankings(inst.question).items():
            metrics[name] = corpus.turn_scores(ranking)
        if corpus.session_ids:
            for name, ranking_ in corpus.session_rankings(inst.question, vectorize).items():
                metrics[name] = corpus.session_scores(ranking_)
        query = Query(inst.key, inst.key, "longmemeval", inst.question, None, [], None, inst.question_type)
        cells = (
            budget_cells(retriever, baselines, query, inst.evidence_turn_ids, budgets, variant.config, any_hit=False)
            if budgets
            else []
        )
        results.add(
            RetrievalRecord(
                key=inst.key,
                variant=variant.name,
                question_type=inst.question_type,
                abstention=inst.abstention,
                counted=not inst.abstention and bool(corpus.turn_gold),
                metrics=metrics,
                budgets=cells,
                counter=counter.name,
            )
        )
        added += 1
    return added
