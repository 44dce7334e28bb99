"""Per-question result records and the JSONL file that keeps them (the resume mechanism).

Every evaluated question becomes one JSON line, written and flushed as soon as it is complete. A rerun loads the
file, skips every key already present and appends the rest; a last line cut short by an interruption is reported and
redone, never silently dropped or trusted; any other invalid line (one before the last, or a complete object that is
not a record) stops the run: it cannot come from an interruption, and dropping it would discard results.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tmem.errors import InputError
from tmem.eval.judge import Judgement
from tmem.eval.locomo_data import EvidenceIssue
from tmem.retrieve.types import SearchResult

R = TypeVar("R", bound="Keyed")
log = logging.getLogger(__name__)


class Keyed(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str = Field(description="Stable question key: '<space>#<qa index>' or 'plus#<probe index>'.")
    variant: str = Field(description="'full', an ablation ('w/o HT') or a sweep point ('kT=5').")

    @property
    def record_id(self) -> str:
        return f"{self.variant}|{self.key}"


class RetrievedRef(BaseModel):
    """One retrieved node and the routes that reached it."""

    model_config = ConfigDict(frozen=True)

    kind: str
    id: str
    score: float
    routes: list[str] = Field(description="'<route name>#<rank>' for every list that reached the node.")


def retrieved_refs(result: SearchResult) -> list[RetrievedRef]:
    refs = [
        RetrievedRef(kind="scene", id=h.scene.id, score=h.score, routes=[f"{r.name}#{r.rank}" for r in h.routes])
        for h in result.scenes
    ]
    refs += [
        RetrievedRef(kind="item", id=h.item.id, score=h.score, routes=[f"{r.name}#{r.rank}" for r in h.routes])
        for h in result.items
    ]
    return refs


class SystemCoverage(BaseModel):
    """What one system's context held for one question (retrieval-only mode)."""

    model_config = ConfigDict(frozen=True)

    tokens: int
    coverage: float | None = Field(description="Share of gold evidence turns in the context (LoCoMo).")
    hit: bool = Field(description="LoCoMo: every gold turn present; LoCoMo-Plus: any cue turn present.")
    position: float | None = Field(
        default=None,
        description="Where gold evidence first appears, as a share of the text's tokens (tmem.eval.position); a flat "
        "baseline's in rank order. None when no gold turn is inside.",
    )
    position_by_time: float | None = Field(
        default=None, description="A flat baseline's position with its turns in conversation order (None for tmem)."
    )


class BudgetCell(BaseModel):
    """Every system's context walked to one token budget (retrieval-only ``--budgets``)."""

    model_config = ConfigDict(frozen=True)

    budget: int
    systems: dict[str, SystemCoverage] = Field(description="'tmem' (Memory.context), the flat baselines, the control.")
    routes: list[str] = Field(
        default_factory=list, description="Routes of the tmem hits that put a gold turn or cue inside the context."
    )


class CoverageRecord(Keyed):
    space: str
    benchmark: str
    category: int | None = None
    relation: str | None = Field(default=None, description="LoCoMo-Plus relation type (causal, state, goal, value).")
    question: str
    gold_turn_ids: list[str]
    evidence_issues: list[EvidenceIssue] = Field(default_factory=list)
    systems: dict[str, SystemCoverage] = Field(description="'tmem', 'bm25', 'dense', 'hybrid', 'random-scenes'.")
    retrieved: list[RetrievedRef]
    budgets: list[BudgetCell] = Field(default_factory=list, description="Fixed-budget cells (--budgets).")
    counter: str = Field(
        default="words", description="The tokenizer every system's tokens were counted with (Settings.tokenizer)."
    )


class AnswerRecord(Keyed):
    """One answered and judged question (LoCoMo) or trigger (LoCoMo-Plus)."""

    space: str
    benchmark: str
    category: int | None = None
    question: str
    gold: str | None = Field(description="Gold answer (LoCoMo) or the cue dialogue (LoCoMo-Plus).")
    question_time: str
    prediction: str
    reasoning: str | None = None
    f1: float | None = None
    judgements: list[Judgement]
    gold_turn_ids: list[str] = Field(default_factory=list)
    evidence_issues: list[EvidenceIssue] = Field(default_factory=list)
    evidence_coverage: float | None = None
    retrieved: list[RetrievedRef]
    context_tokens: int = Field(description="count_tokens of the evidence handed to the QA model.")
    persona_tokens: int
    prompt_tokens: int
    answer_tokens_in: int
    answer_tokens_out: int
    judge_tokens_in: int
    judge_tokens_out: int

    @property
    def labels(self) -> list[str]:
        return [j.label for j in self.judgements]


class ResultsFile(Generic[R]):
    """An append-only JSONL file of records of one type, keyed by ``record_id``."""

    def __init__(self, path: Path, model: type[R]) -> None:
        self.path = path
        self.model = model
        self.records: dict[str, R] = {}
        self.damaged: list[int] = []
        if path.exists():
            lines = path.read_text(encoding="utf-8").splitlines()
            last = max((n for n, line in enumerate(lines, start=1) if line.strip()), default=0)
            for lineno, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    rec = model.model_validate(json.loads(line))
                except (json.JSONDecodeError, ValidationError) as exc:
                    if lineno != last or isinstance(exc, ValidationError):
                        # An interrupted append cuts the last line short (not JSON); a bad line before it, or a
                        # complete object that is not a record, is no interruption.
                        raise InputError(
                            f"{path}: line {lineno} is not a valid {model.__name__} ({exc.__class__.__name__}); the "
                            "file was written by another tmem version or edited. Pass another --out, or delete "
                            "the file to evaluate again from scratch."
                        ) from exc
                    self.damaged.append(lineno)  # an interrupted write: redo that question
                    continue
                self.records[rec.record_id] = rec
            if self.damaged:
                log.warning(
                    "%s: line(s) %s are incomplete (an interrupted write); those questions will be redone",
                    path,
                    ", ".join(map(str, self.damaged)),
                )
                good = [r.model_dump_json() for r in self.records.values()]
                path.write_text("".join(g + "\n" for g in good), encoding="utf-8")

    def __contains__(self, record_id: str) -> bool:
        return record_id in self.records

    def __iter__(self) -> Iterator[R]:
        return iter(self.records.values())

    def __len__(self) -> int:
        return len(self.records)

    def add(self, record: R) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(record.model_dump_json() + "\n")
            fh.flush()
        self.records[record.record_id] = record
