"""The judge's output schema and the robust parsing of its verdict.

Judges are asked for JSON (``{"reasoning": ..., "label": "CORRECT" | "WRONG"}``), but real models write
``"**Correct**"``, ``"Label: WRONG."``, ``"incorrect"``, a fenced JSON block inside the label, or a sentence. The
label is therefore parsed, not matched: :func:`parse_label` maps every unambiguous spelling to CORRECT or WRONG
and raises ``ValueError`` on an ambiguous or empty verdict, which the LLM layer turns into a retry that shows the
model the validation error.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Label = Literal["CORRECT", "WRONG"]

# Negated forms first: "not correct", "isn't correct" and "not entirely correct" must never count as CORRECT, "not
# wrong" never as WRONG. A contraction ("isn't") has no word boundary before its "n't", hence no \b there.
_VERDICT = re.compile(
    r"(?:(?P<neg>(?:\bnot|n['\u2019]t)\s+(?:(?:entirely|fully|completely|quite|exactly|totally|really|actually|"
    r"necessarily)\s+)?|\bin)|\b)(?P<word>correct|wrong|aware|unaware)\b",
    re.IGNORECASE,
)
_POSITIVE = {"correct", "aware"}
# Weak words count only when they are the whole verdict: "no" or "true" inside a sentence says nothing.
_WHOLE = {"yes": "CORRECT", "true": "CORRECT", "right": "CORRECT", "no": "WRONG", "false": "WRONG"}
_KEYED = re.compile(r"""["']?(?:label|verdict|judg(?:e)?ment)["']?\s*[:=]\s*["'*`\s]*(?P<rest>[^\n]*)""", re.I)


def _verdicts(text: str) -> list[Label]:
    found: list[Label] = []
    for m in _VERDICT.finditer(text):
        word = m.group("word").lower()
        neg = m.group("neg")
        if neg is not None and neg.lower() == "in" and word != "correct":
            continue  # "intrue" and the like are not words; only "incorrect" carries a prefix
        positive = word in _POSITIVE
        if neg is not None:
            positive = not positive
        found.append("CORRECT" if positive else "WRONG")
    return found


def parse_label(raw: Any) -> Label:
    """Map a messy verdict to CORRECT or WRONG; ``ValueError`` when it is empty or ambiguous."""
    if isinstance(raw, bool):
        return "CORRECT" if raw else "WRONG"
    if not isinstance(raw, str):
        raise ValueError(f"label must be the string CORRECT or WRONG, got {type(raw).__name__}")
    text = raw.strip()
    whole = _WHOLE.get(text.strip(" \t\n.!*`'\"").lower())
    if whole == "CORRECT":
        return "CORRECT"
    if whole == "WRONG":
        return "WRONG"
    # A JSON object smuggled into the field (or given as the whole reply): use its label key.
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        try:
            obj = json.loads(text[start : end + 1])
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            for key in ("label", "verdict", "judgement", "judgment"):
                if key in obj:
                    return parse_label(obj[key])
    keyed = _KEYED.search(text)
    if keyed:
        verdicts = _verdicts(keyed.group("rest"))
        if verdicts:
            return verdicts[0]
    verdicts = _verdicts(text)
    if not verdicts:
        raise ValueError(f"no verdict in {raw!r}: answer with the single word CORRECT or WRONG")
    if len(set(verdicts)) > 1:
        raise ValueError(f"ambiguous verdict {raw!r}: answer with the single word CORRECT or WRONG")
    return verdicts[0]


class JudgeVerdict(BaseModel):
    """Output of both judges (LoCoMo correctness and LoCoMo-Plus memory awareness)."""

    model_config = ConfigDict(extra="ignore")

    reasoning: str = Field(default="", description="One short sentence explaining the verdict.")
    label: Label = Field(description="CORRECT or WRONG.")

    @field_validator("label", mode="before")
    @classmethod
    def _parse(cls, value: Any) -> Label:
        return parse_label(value)
