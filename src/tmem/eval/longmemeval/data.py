"""A LongMemEval file as the evaluation sees it: spaces to build, questions with their metadata, the file's kind."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from statistics import median
from typing import Literal

from tmem.errors import ConfigError
from tmem.eval.longmemeval.synth import ABSTENTION, QUESTION_TYPES
from tmem.ingest.longmemeval import STATE_KEY
from tmem.ingest.reader import read_file
from tmem.ingest.types import SpaceInput
from tmem.models import SessionInput
from tmem.util.text import text_hash

Kind = Literal["s", "m", "oracle"]
M_SESSIONS = 200  # a history of at least this many sessions (median over the file) is M-sized; S has about 50


@dataclass(frozen=True)
class Instance:
    """One question with its history (``space``) and the benchmark's labels."""

    space: SpaceInput
    question_type: str
    abstention: bool
    question: str
    answer: str
    question_date: datetime
    answer_session_ids: list[str]
    evidence_turn_ids: list[str]

    @property
    def key(self) -> str:
        return self.space.name

    @property
    def type_label(self) -> str:
        """The reporting group: the question type, or ``abstention`` for a ``_abs`` question."""
        return ABSTENTION if self.abstention else self.question_type


def _instance(space: SpaceInput) -> Instance:
    meta = json.loads(space.state[STATE_KEY])
    answer = meta["answer"]
    return Instance(
        space=space,
        question_type=meta["question_type"],
        abstention=bool(meta["abstention"]),
        question=meta["question"],
        answer=answer if isinstance(answer, str) else json.dumps(answer),
        question_date=datetime.fromisoformat(meta["question_date"]),
        answer_session_ids=list(meta["answer_session_ids"]),
        evidence_turn_ids=list(meta["evidence_turn_ids"]),
    )


def detect_kind(instances: Sequence[Instance]) -> Kind:
    """``oracle`` when every history holds only evidence sessions; else ``m`` for long histories, ``s`` otherwise."""
    if all({s.id for s in i.space.sessions} <= set(i.answer_session_ids) for i in instances):
        return "oracle"
    return "m" if median(len(i.space.sessions) for i in instances) >= M_SESSIONS else "s"


def load_instances(path: Path, *, types: Sequence[str] = (), limit: int | None = None) -> list[Instance]:
    """The file's instances, those of ``types`` only (question types or ``abstention``), the first ``limit``."""
    known = (*QUESTION_TYPES, ABSTENTION)
    unknown = [t for t in types if t not in known]
    if unknown:
        raise ConfigError(f"--types: {', '.join(unknown)} unknown; use any of {', '.join(known)}.")
    out = [_instance(s) for s in read_file(path, "longmemeval")]
    if types:
        out = [i for i in out if i.type_label in types]
    if not out:
        raise ConfigError(f"{path}: no instance of the types {', '.join(types)}; drop --types or pick others.")
    return out[:limit] if limit is not None else out


def _said(session: SessionInput) -> str:
    """What a session says, whenever it took place (a shared filler session has each history's own date)."""
    return text_hash(json.dumps([[t.id, t.speaker, t.text] for t in session.turns], ensure_ascii=False))


def seed_sources(instances: Sequence[Instance]) -> dict[str, str]:
    """For each instance, the earlier instance sharing most sessions with it (same id and turns; the dates may
    differ), when any: its cached embeddings are copied before the build (:func:`tmem.eval.harness.seed_embeddings`).
    A vector depends on the text alone, so a copied vector is exactly the one the instance's own build computes."""
    out: dict[str, str] = {}
    seen: list[tuple[str, set[tuple[str, str]]]] = []
    for inst in instances:
        mine = {(s.id, _said(s)) for s in inst.space.sessions}
        best, shared = None, 0
        for name, theirs in seen:
            n = len(mine & theirs)
            if n > shared:
                best, shared = name, n
        if best is not None:
            out[inst.key] = best
        seen.append((inst.key, mine))
    return out
