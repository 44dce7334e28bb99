"""LoCoMo questions: loading, categories and evidence-id normalisation.

The conversations themselves are read by :mod:`tmem.ingest`; this module reads the ``qa`` part of each sample.
LoCoMo category ids: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial (excluded, as in the paper).

Evidence ids in the public files are not all well formed. Seen in the dev split: ``"D8:6; D9:17"`` (two ids in one
string), ``"D:11:26"`` (stray colon), ``"D"`` (no id at all) and ids of turns that do not exist (``"D10:19"`` in a
session of 18 turns); the full file also has ``"D10:0"``. Every id is normalised where the intent is clear and every
other one is reported as an :class:`EvidenceIssue` beside the question; nothing crashes and nothing is dropped
silently.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tmem.errors import InputError, NotFoundError

CATEGORY_NAMES: dict[int, str] = {
    1: "Multi-hop",
    2: "Temporal",
    3: "Open Domain",
    4: "Single-hop",
    5: "Adversarial",
}
SCORED_CATEGORIES = (4, 1, 2, 3)  # Table 2 column order: Single-hop, Multi-hop, Temporal, Open Domain

_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.IGNORECASE)


class EvidenceIssue(BaseModel):
    model_config = ConfigDict(frozen=True)

    raw: str
    problem: Literal["normalised", "unparsable", "unknown turn", "missing"]
    fixed: list[str] = Field(default_factory=list, description="The ids the raw entry was normalised to.")


class Evidence(BaseModel):
    model_config = ConfigDict(frozen=True)

    turn_ids: list[str] = Field(description="Well-formed ids of turns that exist in the conversation, in order.")
    issues: list[EvidenceIssue] = Field(default_factory=list)


class LocomoQuestion(BaseModel):
    model_config = ConfigDict(frozen=True)

    space: str = Field(description="The sample_id, which is also the space name after import.")
    index: int = Field(description="Position of the question in the sample's qa list (stable key).")
    question: str
    answer: str = Field(description="Gold answer as text (numbers in the data are converted).")
    category: int
    evidence_raw: list[str]

    @property
    def key(self) -> str:
        return f"{self.space}#{self.index}"

    @property
    def category_name(self) -> str:
        return CATEGORY_NAMES.get(self.category, f"category {self.category}")


def normalise_evidence(raw: Any, known_turn_ids: Collection[str]) -> Evidence:
    """Turn the raw ``evidence`` field of a question into existing turn ids plus a list of issues."""
    if raw is None:
        return Evidence(turn_ids=[], issues=[EvidenceIssue(raw="", problem="missing")])
    entries = raw if isinstance(raw, list) else [raw]
    ids: list[str] = []
    issues: list[EvidenceIssue] = []
    for entry in entries:
        text = str(entry)
        found = [f"D{int(s)}:{int(t)}" for s, t in _ID.findall(text)]
        if not found:
            issues.append(EvidenceIssue(raw=text, problem="unparsable"))
            continue
        if found != [text]:
            issues.append(EvidenceIssue(raw=text, problem="normalised", fixed=found))
        for tid in found:
            if tid not in known_turn_ids:
                issues.append(EvidenceIssue(raw=tid, problem="unknown turn"))
            elif tid not in ids:
                ids.append(tid)
    if not entries:
        issues.append(EvidenceIssue(raw="", problem="missing"))
    return Evidence(turn_ids=ids, issues=issues)


def read_json_list(path: Path, *, benchmark: str, example: str, entries: str) -> list[Any]:
    """The top-level list of a benchmark file, or a NotFoundError / InputError saying what to pass instead."""
    if not path.exists():
        raise NotFoundError(f"{path}: no such file; pass the {benchmark} JSON (e.g. {example}) with --data")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    if not isinstance(data, list):
        raise InputError(f"{path}: $ must be a list of {benchmark} {entries}")
    return data


def _read_samples(path: Path) -> list[dict[str, Any]]:
    data = read_json_list(path, benchmark="LoCoMo", example="locomo10.json", entries="samples")
    for i, sample in enumerate(data):
        if not isinstance(sample, dict) or not isinstance(sample.get("sample_id"), str):
            raise InputError(f"{path}: $[{i}].sample_id is missing; is this a LoCoMo file?")
        if not isinstance(sample.get("qa", []), list):
            raise InputError(f"{path}: $[{i}].qa must be a list")
    return data


def load_questions(
    path: Path,
    *,
    conversations: Collection[str] | None = None,
    categories: Collection[int] = SCORED_CATEGORIES,
) -> list[LocomoQuestion]:
    """The scored questions of a LoCoMo file (categories 1-4 by default), in file order."""
    samples = _read_samples(path)
    known = {s["sample_id"] for s in samples}
    if conversations:
        unknown = sorted(set(conversations) - known)
        if unknown:
            raise NotFoundError(
                f"{path}: no conversation {', '.join(unknown)}; the file has {', '.join(sorted(known))}"
            )
    out: list[LocomoQuestion] = []
    for i, sample in enumerate(samples):
        space = sample["sample_id"]
        if conversations and space not in conversations:
            continue
        for j, qa in enumerate(sample.get("qa", [])):
            where = f"{path}: $[{i}].qa[{j}]"
            if not isinstance(qa, dict) or "question" not in qa or "category" not in qa:
                raise InputError(f"{where} needs 'question' and 'category'")
            category = qa["category"]
            if not isinstance(category, int):
                raise InputError(f"{where}.category must be an integer 1-5, got {category!r}")
            if category not in categories:
                continue
            if "answer" not in qa:
                raise InputError(f"{where}.answer is missing (only category 5 may lack it)")
            raw = qa.get("evidence")
            evidence_raw = [] if raw is None else [str(e) for e in (raw if isinstance(raw, list) else [raw])]
            out.append(
                LocomoQuestion(
                    space=space,
                    index=j,
                    question=str(qa["question"]),
                    answer=str(qa["answer"]),
                    category=category,
                    evidence_raw=evidence_raw,
                )
            )
    return out


def sample_ids(path: Path) -> list[str]:
    """The conversation ids of a LoCoMo file, in file order."""
    return [s["sample_id"] for s in _read_samples(path)]
