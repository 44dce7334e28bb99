"""``tmem demo``: the main job on the offline default, end to end, in about a minute on two cores.

It imports a real LoCoMo conversation (the dev file beside the repository when present, else the slice bundled in
the package), builds it - in extractive mode without an LLM, fully with one - and answers a few of LoCoMo's own
questions: the evidence recalled, the route that reached it, whether the gold evidence turns were recalled and, with
an LLM, the answer. It states which recall quadrants are active.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

import tmem
from tmem.answer.answerer import Answerer, QuestionTime
from tmem.answer.context import assemble_context
from tmem.construct.pipeline import build_space
from tmem.construct.report import BuildReport
from tmem.embed.base import Embedder
from tmem.eval.locomo_data import CATEGORY_NAMES, normalise_evidence
from tmem.eval.records import RetrievedRef, retrieved_refs
from tmem.ingest.importer import import_spaces
from tmem.ingest.locomo import read_locomo
from tmem.llm.base import LLM
from tmem.retrieve.cascade import Retriever
from tmem.retrieve.config import RetrievalConfig
from tmem.scope import Scope
from tmem.store.base import Store

CONVERSATION = "conv-30"
BUNDLED = "locomo_conv30_s1-5.json"
DEFAULT_SESSIONS = 5
# Three of LoCoMo's own questions on the first five sessions: single-hop, temporal, multi-hop.
QUESTIONS = (
    "What kind of flooring is Jon looking for in his dance studio?",
    "When did Gina launch an ad campaign for her store?",
    "What Jon thinks the ideal dance studio should look like?",
)
OFFLINE_NOTE = (
    "No LLM configured, so this memory is DESCRIPTIVE ONLY (extractive mode): scenes from session breaks and topic "
    "shifts, atomic items from turns, Entity triggers on items (Quadrant I) and similarity over scenes, items and "
    "topics (the descriptive side, where Quadrant IV sits). Bridge (Q II), Horizon (Q III) and Scene (Q IV) "
    "triggers, connected items and the persona need an LLM, and so do answers. To enable them:\n"
    "    export TMEM_LLM=openai TMEM_LLM_MODEL=gpt-4.1-mini OPENAI_BASE_URL=https://api.openai.com/v1 "
    "OPENAI_API_KEY=...\n"
    "    tmem demo\n"
    "(any OpenAI-compatible server works: Ollama, vLLM, llama.cpp, LM Studio)."
)


def dev_file() -> Path | None:
    """``../shared/data/locomo10.dev.json`` relative to the repository holding this package, if present."""
    repo = Path(tmem.__file__).resolve().parents[2]
    candidate = repo.parent / "shared" / "data" / "locomo10.dev.json"
    return candidate if candidate.is_file() else None


class DemoQuestion(BaseModel):
    model_config = ConfigDict(frozen=True)

    question: str
    category: str
    gold_answer: str
    gold_turn_ids: list[str]
    recalled_gold: list[str] = Field(description="Gold evidence turns inside the returned context.")
    retrieved: list[RetrievedRef]
    hits: list[str] = Field(description="The top hits, one line each: kind, date, title or text.")
    recalled_lines: list[str] = Field(description="The recalled gold evidence turns, as said.")
    answer: str | None = None
    context_tokens: int


class DemoReport(BaseModel):
    source: str
    space: str
    sessions: int
    build: BuildReport
    descriptive_only: bool
    questions: list[DemoQuestion]
    note: str


def _load(source: Path | None) -> tuple[list[Any], str]:
    if source is not None:
        data = json.loads(source.read_text(encoding="utf-8"))
        return list(data), str(source)
    ref = resources.files("tmem.eval").joinpath("data", BUNDLED)
    return json.loads(ref.read_text(encoding="utf-8")), f"bundled {BUNDLED}"


async def run_demo(
    store: Store,
    *,
    llm: LLM | None,
    embedder: Embedder,
    config: RetrievalConfig,
    source: Path | None,
    sessions: int = DEFAULT_SESSIONS,
    echo: Callable[[str], None] = print,
) -> DemoReport:
    data, where = _load(source)
    spaces = read_locomo(data, where)
    conv = next((s for s in spaces if s.name == CONVERSATION), spaces[0])
    if sessions > 0:
        conv = conv.model_copy(update={"sessions": conv.sessions[:sessions]})
    echo(
        f"Importing {conv.name} ({len(conv.sessions)} sessions, {sum(len(s.turns) for s in conv.sessions)} turns) "
        f"from {where}"
    )
    import_spaces(store, [conv], source=where)
    echo("Building the memory " + ("with the LLM" if llm else "in extractive mode (no LLM)") + " ...")
    scope = Scope.local(conv.name)
    report = await build_space(store, scope, llm=llm, embedder=embedder)
    echo("Built: " + ", ".join(f"{v} {k}" for k, v in report.counts.items()) + f" in {report.seconds:.1f}s")
    sample = next(s for s in data if isinstance(s, dict) and s.get("sample_id") == conv.name)
    qa: list[dict[str, Any]] = [q for q in sample.get("qa", []) if isinstance(q, dict)]
    chosen = [q for text in QUESTIONS for q in qa if q.get("question") == text]
    if not chosen:  # another conversation: its first single-hop, temporal and multi-hop questions
        chosen = [
            next(q for q in qa if q.get("category") == c) for c in (4, 2, 1) if any(q.get("category") == c for q in qa)
        ]
    known = {t.id for s in conv.sessions for t in s.turns}
    retriever = Retriever(store, embedder)
    answerer = Answerer(retriever, llm) if llm is not None else None
    when = QuestionTime.after_sessions(s.started_at for s in conv.sessions)
    out: list[DemoQuestion] = []
    for q in chosen:
        question = str(q["question"])
        gold = normalise_evidence(q.get("evidence"), known).turn_ids
        if answerer is not None:
            ans = await answerer.answer(scope, question, when, config=config)
            result, context, answer_text = ans.search, ans.context, ans.answer
        else:
            result = retriever.search(scope, question, config)
            context, answer_text = assemble_context(result), None
        inside = set(result.turn_ids())
        turn_text = {t.id: f"{t.id} {t.speaker}: {t.text}" for s in conv.sessions for t in s.turns}
        hits = [f"scene {h.scene.start:%Y-%m-%d} {h.scene.title}" for h in result.scenes]
        hits += [f"item {h.item.text}" for h in result.items]
        out.append(
            DemoQuestion(
                question=question,
                category=CATEGORY_NAMES.get(int(q.get("category", 0)), "?"),
                gold_answer=str(q.get("answer", "")),
                gold_turn_ids=gold,
                recalled_gold=[g for g in gold if g in inside],
                retrieved=retrieved_refs(result),
                hits=hits,
                recalled_lines=[turn_text[g] for g in gold if g in inside],
                answer=answer_text,
                context_tokens=context.evidence_tokens,
            )
        )
    return DemoReport(
        source=where,
        space=conv.name,
        sessions=len(conv.sessions),
        build=report,
        descriptive_only=llm is None,
        questions=out,
        note=OFFLINE_NOTE if llm is None else "Full memory built with the LLM: all four trigger families and persona.",
    )
