"""Table 5: memory-construction cost from the LLM call log, beside the paper's figures.

Construction stages are every logged stage except the evaluation's own (``answer``, ``answer.reply``, ``judge``).
Counts follow :mod:`tmem.llm.cost`: calls the model served (cache hits excluded), tokens as the server reported them.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from tmem.llm.cost import StageCost, cost_report
from tmem.scope import Scope
from tmem.store.base import Store

EVAL_STAGES = frozenset({"answer", "answer.reply", "judge"})
# Paper Table 5, T-Mem over all 10 LoCoMo conversations (GPT-4.1-mini): input/output tokens and calls.
PAPER_TOTAL = {"input_m": 13.58, "output_m": 2.02, "calls": 9689, "conversations": 10}


class ConstructionCost(BaseModel):
    spaces: list[str]
    stages: list[StageCost] = Field(description="Summed over the spaces.")
    total: StageCost

    @property
    def per_space_calls(self) -> float:
        return self.total.calls / max(len(self.spaces), 1)

    @property
    def per_space_tokens(self) -> float:
        return (self.total.input_tokens + self.total.output_tokens) / max(len(self.spaces), 1)


def construction_cost(store: Store, spaces: Sequence[str]) -> ConstructionCost:
    stages: dict[str, StageCost] = {}
    total = StageCost(stage="total")
    for space in spaces:
        for stage in cost_report(store, Scope.local(space)).stages:
            if stage.stage in EVAL_STAGES:
                continue
            acc = stages.setdefault(stage.stage, StageCost(stage=stage.stage))
            for target in (acc, total):
                target.calls += stage.calls
                target.cached_calls += stage.cached_calls
                target.batch_calls += stage.batch_calls
                target.errors += stage.errors
                target.input_tokens += stage.input_tokens
                target.output_tokens += stage.output_tokens
    return ConstructionCost(spaces=list(spaces), stages=list(stages.values()), total=total)


def render_cost(cost: ConstructionCost) -> str:
    n = max(len(cost.spaces), 1)
    paper_n = PAPER_TOTAL["conversations"]
    lines = [
        f"# Construction cost (Table 5 style), {len(cost.spaces)} conversation(s)",
        "",
        "Tokens in millions per conversation; calls per conversation (cache hits excluded).",
        "",
        "| Method | In(M) | Out(M) | Sum(M) | Calls |",
        "|---|---:|---:|---:|---:|",
        f"| T-Mem (paper, GPT-4.1-mini) | {PAPER_TOTAL['input_m'] / paper_n:.3f} | "
        f"{PAPER_TOTAL['output_m'] / paper_n:.3f} | {(PAPER_TOTAL['input_m'] + PAPER_TOTAL['output_m']) / paper_n:.3f}"
        f" | {PAPER_TOTAL['calls'] / paper_n:.0f} |",
        f"| tmem (this run) | {cost.total.input_tokens / n / 1e6:.3f} | {cost.total.output_tokens / n / 1e6:.3f} | "
        f"{cost.per_space_tokens / 1e6:.3f} | {cost.per_space_calls:.0f} |",
        "",
        "| Stage | Calls | Cached | Input tokens | Output tokens |",
        "|---|---:|---:|---:|---:|",
    ]
    for s in [*cost.stages, cost.total]:
        lines.append(f"| {s.stage} | {s.calls} | {s.cached_calls} | {s.input_tokens} | {s.output_tokens} |")
    return "\n".join(lines) + "\n"
