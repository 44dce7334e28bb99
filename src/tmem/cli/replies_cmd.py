"""``tmem eval replies SPACE --probes FILE``: replies written from tmem's context and from flat dense's at equal
tokens, judged on request (:mod:`tmem.eval.replies`; docs/context.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import click

from tmem.cli.context import AppContext, echo_json, layout_option, pass_app
from tmem.errors import BatchPending, ConfigError


def _budgets(raw: str) -> list[int]:
    try:
        values = sorted({int(part) for part in raw.split(",") if part.strip()})
    except ValueError:
        raise click.BadParameter(f"{raw!r}: write token budgets as integers, e.g. 500,1000") from None
    if not values or values[0] <= 0:
        raise click.BadParameter(f"{raw!r}: give at least one budget, each a positive number of tokens")
    return values


@click.command("replies")
@click.argument("space")
@click.option(
    "--probes",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="Cue probes: queries.json's format (space -> [{key, query, gold_turn_ids, ...}]) or a list of probes.",
)
@click.option("--budgets", default="500,1000", show_default=True, help="Context budgets (tokens of TMEM_TOKENIZER).")
@layout_option("tmem's context")
@click.option("--preset", default=None, help="Retrieval preset (default: TMEM_SEARCH_PRESET, else auto).")
@click.option("--judge", "with_judge", is_flag=True, help="Also judge both replies of every probe.")
@click.option("--answer-model", default=None, help="Model writing the replies (default TMEM_ANSWER_MODEL / LLM model).")
@click.option("--judge-model", default=None, help="Judge model (default TMEM_JUDGE_MODEL, else the answer model).")
@click.option(
    "--batch-out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Batch protocol: write the uncached requests here (OpenAI Batch JSONL) instead of calling the model.",
)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Also write the table here.")
@click.option("--json", "as_json", is_flag=True, help="Print every record and the table as JSON.")
@pass_app
def replies_cmd(app: AppContext, /, space: str, probes: Path, budgets: str, layout: tuple[str, ...], **kw: Any) -> None:
    """Replies from SPACE's memory and from flat dense retrieval at the same tokens, for each cue probe in FILE."""
    from tmem.eval.baselines import SpaceBaselines
    from tmem.eval.replies import load_probes, report, run_replies
    from tmem.index.space import cached_vectorizer
    from tmem.llm.batch import export_pending
    from tmem.llm.service import make_llm
    from tmem.retrieve.config import RetrievalConfig
    from tmem.retrieve.layout import read_layout
    from tmem.scope import Scope

    sizes = _budgets(budgets)
    chosen = read_layout(layout)
    mem = app.memory()
    settings = mem.settings
    if settings.llm == "none" or not settings.llm_model:
        raise ConfigError(
            "tmem eval replies needs a model to write the replies: set TMEM_LLM=openai and TMEM_LLM_MODEL (with "
            "--batch-out no request is sent: the model answers the exported file)."
        )
    scope = Scope.local(space)
    mem.store.get_space(scope)
    cue_probes = load_probes(probes, space)
    batch = kw["batch_out"] is not None
    answer_name = kw["answer_model"] or settings.answer_model or settings.llm_model
    reply_llm = make_llm(settings, mem.store, model=answer_name, batch=batch)
    judge_name = kw["judge_model"] or settings.judge_model or answer_name
    judge_llm = None
    if kw["with_judge"]:
        judge_llm = (
            reply_llm if judge_name == answer_name else make_llm(settings, mem.store, model=judge_name, batch=batch)
        )
    assert reply_llm is not None  # settings.llm != "none" was checked
    assert judge_llm is not None or not kw["with_judge"]
    config = RetrievalConfig.preset(kw["preset"] or settings.search_preset)
    baselines = SpaceBaselines(mem.store, scope, cached_vectorizer(mem.store, scope, mem.embedder), mem.core.counter)

    async def go() -> Any:
        try:
            return await run_replies(
                mem.store,
                mem.retriever,
                baselines,
                cue_probes,
                sizes,
                reply_llm,
                judge_llm,
                config=config,
                layout=chosen,
            )
        finally:
            for llm in {id(x): x for x in (reply_llm, judge_llm) if x is not None}.values():
                await llm.aclose()

    try:
        records = asyncio.run(go())
    except BatchPending as exc:
        if kw["batch_out"] is None:
            raise
        n = export_pending(mem.store, kw["batch_out"], scope)
        raise BatchPending(
            f"{n} {exc.stage} request(s) of {space} written to {kw['batch_out']}: run them through the Batch API, then "
            "`tmem llm batch-import RESULTS` and rerun this command.",
            count=n,
            stage=exc.stage,
            path=str(kw["batch_out"]),
        ) from exc
    table = report(records)
    if kw["out"] is not None:
        kw["out"].write_text(table, encoding="utf-8")
    shown = " ".join(layout) or "auto"
    if kw["as_json"]:
        echo_json({"layout": shown, "records": [r.model_dump(mode="json") for r in records], "table": table})
    else:
        click.echo(f"Layout `{shown}`; {len(cue_probes)} cue probes of {space}.\n\n{table}")
