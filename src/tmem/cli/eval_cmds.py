"""``tmem ask``, ``tmem demo`` and ``tmem eval locomo|locomo-plus``.

``ask`` needs an LLM; ``demo`` and ``eval ... --retrieval-only`` run without one. Evaluations keep their memories in
``--dir`` when given, else in ``OUT/memory``, and their per-question results in ``OUT/<benchmark>/`` (resumable).
"""

from __future__ import annotations

import asyncio
import shlex
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import click
import platformdirs

from tmem.cli.context import AppContext, batch_api_options, echo_json, layout_option, pass_app
from tmem.errors import BatchPending, InputError
from tmem.settings import Settings
from tmem.util.extras import require_extra


def _dir_given(ctx: click.Context) -> bool:
    """True when the user chose the memory directory (--dir or TMEM_HOME), not the default."""
    root = ctx.find_root()
    return root.params.get("home") is not None


def _llm(settings: Settings, store: Any, model: str | None = None, *, batch: bool = False) -> Any:
    from tmem.llm.service import make_llm

    return make_llm(settings, store, model=model, batch=batch)


async def _close(*llms: Any) -> None:
    seen: set[int] = set()
    for llm in llms:
        if llm is not None and id(llm) not in seen and hasattr(llm, "aclose"):
            seen.add(id(llm))
            await llm.aclose()


# ------------------------------------------------------------------------------------------------ ask


@click.command("ask")
@click.argument("space")
@click.argument("question")
@click.option("--cot", is_flag=True, help="Use the chain-of-thought prompt instead of the short-answer one.")
@click.option(
    "--date", "asked", default=None, help="When the question is asked (ISO date); default: after the last session."
)
@click.option("--preset", default=None, help="Retrieval preset (default: TMEM_SEARCH_PRESET, else auto).")
@click.option(
    "--max-tokens",
    type=click.IntRange(min=0),
    default=None,
    help="Context budget handed to the model (tokens of TMEM_TOKENIZER; default 2000, env TMEM_CONTEXT_TOKENS).",
    envvar="TMEM_CONTEXT_TOKENS",
)
@layout_option("the context handed to the model")
@click.option("--explain", is_flag=True, help="Show the context handed to the model and the routes of every hit.")
@click.option("--json", "as_json", is_flag=True, help="Print the full Answer as JSON.")
@pass_app
def ask_cmd(
    app: AppContext,
    space: str,
    question: str,
    cot: bool,
    asked: str | None,
    preset: str | None,
    max_tokens: int | None,
    layout: tuple[str, ...],
    explain: bool,
    as_json: bool,
) -> None:
    """Answer QUESTION from the memory of SPACE (needs an LLM; `tmem search` works without one)."""
    from tmem.answer.budget import DEFAULT_CONTEXT_TOKENS
    from tmem.retrieve.layout import read_layout

    when: datetime | None = None
    if asked is not None:
        try:
            when = datetime.fromisoformat(asked)
        except ValueError:
            raise InputError(f"--date {asked!r}: write an ISO date such as 2023-05-08") from None
    mem = app.memory()
    # Memory.ask dates the question (after the latest session start unless --date) and resolves the preset
    budget = DEFAULT_CONTEXT_TOKENS if max_tokens is None else max_tokens
    laid = read_layout(layout)
    answer = mem.ask(
        space, question, when, variant="cot" if cot else "short", config=preset, max_tokens=budget, layout=laid
    )
    if as_json:
        echo_json(answer.model_dump(mode="json"))
        return
    click.echo(answer.answer)
    if explain:
        if answer.reasoning:
            click.echo(f"\nReasoning: {answer.reasoning}")
        click.echo(
            f"\n{answer.question_time.line()}\nContext ({answer.tokens.evidence} evidence + {answer.tokens.persona} persona tokens):"
        )
        click.echo(answer.context.text)
        click.echo("\nWhy recalled:")
        for h in answer.search.scenes:
            click.echo(f"  scene {h.scene.id}: " + "; ".join(f"{r.name} #{r.rank}" for r in h.routes))
        for i in answer.search.items:
            click.echo(f"  item {i.item.id}: " + "; ".join(f"{r.name} #{r.rank}" for r in i.routes))
        t = answer.tokens
        click.echo(f"\nTokens: prompt {t.prompt} (count_tokens), LLM in {t.llm_input} / out {t.llm_output}")


# ------------------------------------------------------------------------------------------------ demo


@click.command("demo")
@click.option(
    "--sessions",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="Sessions of the conversation to import (0: all).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the demo report as JSON.")
@click.pass_context
def demo_cmd(ctx: click.Context, sessions: int, as_json: bool) -> None:
    """Import a real LoCoMo conversation, build its memory and show what it recalls (no LLM or network needed)."""
    from tmem.embed import make_embedder
    from tmem.eval.demo import dev_file, run_demo
    from tmem.retrieve.config import RetrievalConfig
    from tmem.store import open_store, sqlite_url

    app: AppContext = ctx.ensure_object(AppContext)
    settings = app.settings
    home = settings.home if _dir_given(ctx) else Path(platformdirs.user_cache_dir("tmem", appauthor=False)) / "demo"
    store = open_store(settings.database_url or sqlite_url(home / "tmem.db"), create_dirs=settings.database_url is None)
    llm = _llm(settings, store) if settings.llm != "none" else None
    say = (lambda _s: None) if as_json else (lambda s: click.echo(s, err=True))

    async def go() -> Any:
        try:
            return await run_demo(
                store,
                llm=llm,
                embedder=make_embedder(settings),
                config=RetrievalConfig.preset(settings.search_preset),
                source=dev_file(),
                sessions=sessions,
                echo=say,
            )
        finally:
            await _close(llm)

    try:
        report = asyncio.run(go())
    finally:
        store.close()
    if as_json:
        echo_json(report.model_dump(mode="json"))
        return
    click.echo(
        f'\nMemory: {home}  (space {report.space}; try `tmem --dir {home} search {report.space} "..." --explain`)'
    )
    for q in report.questions:
        click.echo(f"\nQ [{q.category}] {q.question}")
        click.echo(f"  gold answer: {q.gold_answer}   gold evidence: {', '.join(q.gold_turn_ids) or '-'}")
        if q.answer is not None:
            click.echo(f"  tmem answer: {q.answer}")
        found = ", ".join(q.recalled_gold) or "none"
        click.echo(
            f"  gold evidence recalled: {found} ({len(q.recalled_gold)}/{len(q.gold_turn_ids)}), "
            f"context {q.context_tokens} tokens"
        )
        for ref, hit in list(zip(q.retrieved, q.hits, strict=True))[:3]:
            click.echo(f"  - {hit[:110]}\n      via {', '.join(ref.routes)}")
        for line in q.recalled_lines:
            click.echo(f"  evidence > {line[:140]}")
    click.echo("\n" + report.note)


# ------------------------------------------------------------------------------------------------ eval


def _eval_options(f: Any) -> Any:
    options = [
        click.option(
            "--data",
            "data",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            required=True,
            help="The benchmark file.",
        ),
        click.option(
            "--out",
            type=click.Path(file_okay=False, path_type=Path),
            default=Path("eval-results"),
            show_default=True,
            help="Results folder (resumable).",
        ),
        click.option("--conversations", default=None, help="Comma-separated sample ids (default: all)."),
        click.option("--retrieval-only", is_flag=True, help="No LLM at query time: coverage / cue hit vs baselines."),
        click.option(
            "--budgets",
            default=None,
            help="Retrieval-only: also compare every system at these context budgets (tokens), e.g. 500,1000,2000,4000.",
        ),
        click.option(
            "--answer-model", envvar="TMEM_ANSWER_MODEL", default=None, help="QA model (default TMEM_LLM_MODEL)."
        ),
        click.option(
            "--judge-model", envvar="TMEM_JUDGE_MODEL", default=None, help="Judge model (default the QA model)."
        ),
        click.option(
            "--runs", type=click.IntRange(min=1), default=3, show_default=True, help="Judge runs (mean, std)."
        ),
        click.option("--ablate", default=None, help="Ablation rows, e.g. SL,IC,ET+BT,PS,TF,ST,HT,ST+HT."),
        click.option("--sweep", multiple=True, help="Sweep, e.g. kT=5,10,15,20 (repeatable; kT, kS, kI, R)."),
        click.option("--preset", envvar="TMEM_SEARCH_PRESET", default=None, help="Retrieval preset."),
        click.option(
            "--limit",
            type=click.IntRange(min=1),
            default=None,
            help="At most N questions per conversation (LongMemEval: N instances).",
        ),
        click.option("--concurrency", type=click.IntRange(min=1), default=8, show_default=True),
        click.option(
            "--batch-out",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="Batch protocol: write uncached requests of the current stage here and stop.",
        ),
        batch_api_options("builds, answers, judges"),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _budgets(raw: str | None, retrieval_only: bool) -> list[int]:
    if raw is None:
        return []
    if not retrieval_only:
        raise click.UsageError("--budgets applies to --retrieval-only runs; add --retrieval-only.")
    try:
        values = [int(part) for part in raw.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"{raw!r}: write token budgets as integers, e.g. 500,1000,2000,4000") from None
    if not values or any(v <= 0 for v in values):
        raise click.BadParameter(f"{raw!r}: give at least one budget, each a positive number of tokens")
    return sorted(set(values))


def _run_eval(ctx: click.Context, benchmark: str, kw: dict[str, Any]) -> None:
    require_extra("eval", "tmem eval")
    from tmem.construct.options import BuildOptions
    from tmem.embed import make_embedder
    from tmem.eval.longmemeval.run import eval_longmemeval
    from tmem.eval.runs import EvalOptions, Models, eval_locomo, eval_plus
    from tmem.llm.batch import export_pending
    from tmem.store import open_store, sqlite_url

    app: AppContext = ctx.ensure_object(AppContext)
    settings = app.settings
    out: Path = kw["out"]
    home = settings.home if _dir_given(ctx) else out / "memory"
    if kw["batch_api"] and kw["batch_out"] is not None:
        raise click.UsageError("Give --batch-api (tmem submits the batches) or --batch-out FILE (you do), not both.")
    if kw["batch_api"] and settings.llm == "none":
        raise click.UsageError("--batch-api needs an LLM: set TMEM_LLM=openai and TMEM_LLM_MODEL.")
    store = open_store(settings.database_url or sqlite_url(home / "tmem.db"), create_dirs=settings.database_url is None)
    batch_out: Path | None = home / "batches" / "stage.jsonl" if kw["batch_api"] else kw["batch_out"]
    batch = batch_out is not None
    opts = EvalOptions(
        data=kw["data"],
        locomo=kw.get("locomo"),
        out=out,
        conversations=[c.strip() for c in (kw["conversations"] or "").split(",") if c.strip()],
        retrieval_only=kw["retrieval_only"],
        budgets=_budgets(kw["budgets"], kw["retrieval_only"]),
        runs=kw["runs"],
        prompt=kw.get("variant", "short"),
        ablate=kw["ablate"],
        sweep=list(kw["sweep"]),
        preset=kw["preset"] or settings.search_preset,
        stitch=kw.get("stitch", "shared"),
        limit=kw["limit"],
        types=[t.strip() for t in (kw.get("types") or "").split(",") if t.strip()],
        judge=kw.get("judge", True),
        concurrency=kw["concurrency"],
        progress=sys.stderr.isatty(),
        command="tmem " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        build_options=BuildOptions(batch_out=batch_out) if batch else None,
    )
    runner = {"locomo": eval_locomo, "locomo-plus": eval_plus, "longmemeval": eval_longmemeval}[benchmark]

    def once() -> Any:
        """One pass (the models are made and closed inside the pass's event loop)."""
        build_llm = _llm(settings, store, batch=batch) if settings.llm != "none" else None
        answer_llm = judge_llm = None
        if not kw["retrieval_only"] and settings.llm != "none" and settings.llm_model:
            answer_name = kw["answer_model"] or settings.answer_model or settings.llm_model
            answer_llm = _llm(settings, store, answer_name, batch=batch)
            judge_name = kw["judge_model"] or settings.judge_model or answer_name
            if kw.get("judge", True):
                judge_llm = answer_llm if judge_name == answer_name else _llm(settings, store, judge_name, batch=batch)
        models = Models(build=build_llm, answer=answer_llm, judge=judge_llm)

        async def go() -> Any:
            try:
                return await runner(store, settings, opts, models, make_embedder(settings))
            finally:
                await _close(build_llm, answer_llm, judge_llm)

        return asyncio.run(go())

    try:
        if kw["batch_api"]:
            from tmem.cli.build_cmds import through_batch_api

            report = through_batch_api(store, settings, home / "batches", kw["poll_max"], once)
        else:
            report = once()
    except BatchPending as exc:
        if kw["batch_out"] is not None and exc.path is None:
            n = export_pending(store, kw["batch_out"])
            raise BatchPending(
                f"{n} {exc.stage} requests written to {kw['batch_out']}: run them through the Batch API, then "
                f"`tmem --dir {home} llm batch-import RESULTS` and rerun this command.",
                count=n,
                stage=exc.stage,
                path=str(kw["batch_out"]),
            ) from exc
        raise
    finally:
        store.close()
    folder = out / benchmark
    click.echo((folder / "report.md").read_text(encoding="utf-8"))
    made = "report.json"
    if benchmark == "longmemeval":
        made = "summary.json" if kw["retrieval_only"] else "summary.json, hypotheses.jsonl"
    click.echo(f"Results: {folder} (records.jsonl, report.md, {made}, manifest.json); memories: {home}")
    del report


@click.group("eval")
def eval_group() -> None:
    """Reproduce the paper's tables on LoCoMo and LoCoMo-Plus (docs/evaluation.md); run LongMemEval
    (docs/longmemeval.md)."""


@eval_group.command("locomo")
@_eval_options
@click.option(
    "--variant",
    type=click.Choice(["short", "cot"]),
    default="short",
    show_default=True,
    help="Answer prompt: LoCoMo's short answer or chain of thought.",
)
@click.pass_context
def eval_locomo_cmd(ctx: click.Context, /, **kw: Any) -> None:
    """LoCoMo categories 1-4: LLM-as-judge accuracy and F1 (Table 2), or --retrieval-only evidence coverage."""
    _run_eval(ctx, "locomo", kw)


@eval_group.command("locomo-plus")
@_eval_options
@click.option(
    "--locomo",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="The LoCoMo file whose conversations the probes are stitched into.",
)
@click.option(
    "--stitch",
    type=click.Choice(["shared", "per-probe"]),
    default="shared",
    show_default=True,
    help="One stitched space per conversation (all its probes) or one per probe (one build each).",
)
@click.pass_context
def eval_plus_cmd(ctx: click.Context, /, **kw: Any) -> None:
    """LoCoMo-Plus: memory-aware replies judged for awareness of the cue (Table 3), or --retrieval-only cue hit."""
    _run_eval(ctx, "locomo-plus", kw)


@eval_group.command("longmemeval")
@_eval_options
@click.option(
    "--types",
    default=None,
    help="Comma-separated question types to run (single-session-user, ..., multi-session, abstention); default all.",
)
@click.option(
    "--variant",
    type=click.Choice(["short", "cot"]),
    default="short",
    show_default=True,
    help="Answer prompt (QA): a short answer or chain of thought.",
)
@click.option(
    "--judge/--no-judge",
    default=True,
    show_default=True,
    help="QA: judge the answers (accuracy per type); --no-judge only answers and writes the hypothesis file.",
)
@click.pass_context
def eval_longmemeval_cmd(ctx: click.Context, /, **kw: Any) -> None:
    """LongMemEval S, M or oracle file (detected): official session/turn recall and NDCG against flat baselines with
    --retrieval-only, or QA with the official hypothesis file and per-type judged accuracy (docs/longmemeval.md)."""
    if kw["ablate"] or kw["sweep"] or kw["conversations"]:
        raise click.UsageError("--ablate, --sweep and --conversations apply to LoCoMo; use --types and --limit here.")
    _run_eval(ctx, "longmemeval", kw)


def register(cli: click.Group) -> None:
    """Attach this module's commands to the top-level group."""
    cli.add_command(ask_cmd)
    cli.add_command(demo_cmd)
    from tmem.cli.replies_cmd import replies_cmd

    eval_group.add_command(replies_cmd)
    cli.add_command(eval_group)
