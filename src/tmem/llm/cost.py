"""The cost report, computed from the LLM call log (``tmem llm cost``).

Per stage (in the order stages first appear in the log) and in total:

- ``calls``: requests the model served or failed - every logged call not answered from the cache (outcomes ``ok``,
  ``batch`` and ``error``). A batch result counts once, when imported; using it later is a cached call.
- ``cached_calls``: requests answered from the cache (outcome ``cached``, 0 tokens).
- ``batch_calls`` and ``errors``: the parts of ``calls`` that came through the batch protocol or failed.
- ``input_tokens`` / ``output_tokens``: as reported by the server, summed over every attempt (repairs and retries
  included), failed calls included because they were paid.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from tmem.models import LLMCall
from tmem.scope import Scope
from tmem.store.base import Store


class StageCost(BaseModel):
    stage: str
    calls: int = Field(default=0, description="Requests served or failed by the model (not from the cache).")
    cached_calls: int = Field(default=0, description="Requests answered from the cache.")
    batch_calls: int = Field(default=0, description="Part of `calls` imported through the batch protocol.")
    errors: int = Field(default=0, description="Part of `calls` that ended in an error.")
    input_tokens: int = 0
    output_tokens: int = 0

    def add(self, call: LLMCall) -> None:
        if call.outcome == "cached":
            self.cached_calls += 1
        else:
            self.calls += 1
            self.batch_calls += int(call.outcome == "batch")
            self.errors += int(call.outcome == "error")
        self.input_tokens += call.tokens_in
        self.output_tokens += call.tokens_out


class CostReport(BaseModel):
    space: str | None = Field(description="The space reported on; None for all spaces together.")
    models: list[str] = Field(default_factory=list, description="Models seen in the log, in order of first use.")
    stages: list[StageCost] = Field(default_factory=list)
    total: StageCost = Field(default_factory=lambda: StageCost(stage="total"))


def cost_report(store: Store, space: Scope | None = None) -> CostReport:
    report = CostReport(space=None if space is None else space.space)
    by_stage: dict[str, StageCost] = {}
    for call in store.llm_calls(space):
        stage = by_stage.get(call.stage)
        if stage is None:
            stage = by_stage[call.stage] = StageCost(stage=call.stage)
            report.stages.append(stage)
        if call.model not in report.models:
            report.models.append(call.model)
        stage.add(call)
        report.total.add(call)
    return report
