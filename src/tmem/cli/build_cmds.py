"""``tmem build``: construct the memory of one space or of all spaces.

With an LLM configured (``--llm openai`` / ``TMEM_LLM=openai`` and a model) the full T-Mem memory is built; with
``--llm none`` the extractive, descriptive-only memory. ``--batch-out FILE`` runs the batch protocol: the build stops at
the first stage with uncached requests, writes them to FILE and exits with status 3; run them, import the results
with ``tmem llm batch-import``, and build again. A build whose units failed (replies still invalid after the retries)
finishes everything else, prints the failed units and exits with status 4; rerunning it retries only those.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from tmem.cli.context import AppContext, batch_api_options, echo_json, pass_app
from tmem.construct.options import BuildOptions
from tmem.construct.report import EXIT_INCOMPLETE, BuildReport
from tmem.errors import BatchPending, ConfigError
from tmem.scope import Scope
from tmem.settings import Settings
from tmem.store.base import Store

EXIT_BATCH_PENDING = 3
_Pass = tuple[list[BuildReport], list[BatchPending]]
T = TypeVar("T")

# (option name, BuildOptions field, help)
_SIZE_OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("--segment-window", "segment_window", "Turns shown to the scene segmenter per call."),
    ("--max-scene-turns", "max_scene_turns", "Longest allowed scene, in turns."),
    ("--topic-scenes", "topic_scenes_per_call", "New scenes assigned to topics per call."),
    ("--item-scenes", "item_scenes_per_call", "New scenes of one topic per item-extraction call."),
    ("--trigger-items", "items_per_trigger_call", "Items per Entity+Bridge trigger call."),
    ("--item-triggers", "item_triggers_n", "Entity+Bridge tuples per item (N)."),
    ("--trigger-scenes", "scenes_per_trigger_call", "Scenes per Scene+Horizon trigger call."),
    ("--horizon-max", "horizon_max", "Most Horizon dimensions per scene."),
    ("--persona-items", "persona_items_per_call", "Items read per persona call."),
    ("--concurrency", "concurrency", "Concurrent LLM requests within a stage (default: TMEM_LLM_CONCURRENCY)."),
)


def _size_options(fn: Any) -> Any:
    for flag, field, text in reversed(_SIZE_OPTIONS):
        default = BuildOptions.model_fields[field].default
        envvar = "TMEM_BUILD_" + field.upper()
        fn = click.option(
            flag,
            field,
            type=click.IntRange(min=1),
            default=None,
            envvar=envvar,
            help=f"{text} [default {default}; env {envvar}]",
        )(fn)
    return fn


@click.command("build")
@click.argument("space", required=False)
@click.option("--all", "all_spaces", is_flag=True, help="Build every space.")
@click.option(
    "--batch-out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Batch protocol: write the first stage's uncached requests to FILE (OpenAI Batch JSONL) and stop.",
)
@batch_api_options("the build's stages")
@click.option(
    "--few-rounds/--sequential",
    "few_rounds",
    default=None,
    help="Build plan: one round per stage (sessions segmented in parallel; default with --batch-out) or the "
    "sequential plan (scenes may span session breaks; default live).",
)
@click.option(
    "--no-fallback",
    is_flag=True,
    help="A window the model cannot segment is left as a failed unit instead of being split without the model.",
)
@click.option("--rebuild", is_flag=True, help="Drop the built memory first (the conversation is kept).")
@click.option("--json", "as_json", is_flag=True, help="Print the build reports as JSON.")
@click.option("--no-progress", is_flag=True, help="No progress bars.")
@_size_options
@pass_app
def build_cmd(
    app: AppContext,
    /,
    space: str | None,
    all_spaces: bool,
    batch_out: Path | None,
    batch_api: bool,
    poll_max: float,
    few_rounds: bool | None,
    no_fallback: bool,
    rebuild: bool,
    as_json: bool,
    no_progress: bool,
    **sizes: int | None,
) -> None:
    """Build the memory of SPACE (or of every space with --all); only what is new is processed."""
    from tmem.llm.batch import export_pending

    if (space is None) == (not all_spaces):
        raise click.UsageError("Give one SPACE or --all.")
    mem = app.memory()
    # --all skips spaces without turns (nothing to build); a named empty space is reported as an error.
    if not all_spaces:
        mem.staleness(space or "")  # NotFoundError naming the known spaces
    names = [s.name for s in mem.spaces() if s.turns] if all_spaces else [space or ""]
    settings = app.settings
    if batch_api and batch_out is not None:
        raise click.UsageError(
            "Give --batch-api (the build submits the batches) or --batch-out FILE (you do), not both."
        )
    if mem.llm is None and (batch_out is not None or batch_api):
        flag = "--batch-api" if batch_api else "--batch-out"
        raise ConfigError(f"{flag} needs an LLM: set TMEM_LLM=openai and TMEM_LLM_MODEL (or --llm-model NAME).")
    work = settings.home / "batches"
    if batch_api:
        batch_out = work / "stage.jsonl"  # the pipeline's per-space export (scratch); rounds export everything
    chosen = {k: v for k, v in sizes.items() if v is not None}
    chosen.setdefault("concurrency", settings.llm_concurrency)
    options = BuildOptions.model_validate(
        {**chosen, "batch_out": batch_out, "few_rounds": few_rounds, "fallback": not no_fallback}
    )
    if (batch_out is not None or batch_api) and not as_json:
        # Before a batch build starts (nothing segmented yet): what it will take, per stage, and in how many rounds.
        from tmem.cli.llm_cmds import estimate_table
        from tmem.construct.estimate import estimate_build

        for name in names:
            scope = Scope.local(name)
            if mem.store.turns(scope) and not mem.store.scenes(scope):
                click.echo(estimate_table(estimate_build(mem.store, scope, options)), err=True)
    passes = 0

    def build_all() -> tuple[list[BuildReport], list[BatchPending]]:
        nonlocal passes
        done: list[BuildReport] = []
        waiting: list[BatchPending] = []
        first, passes = passes == 0, passes + 1
        for name in names:
            try:
                done.append(mem.build(name, options, rebuild=rebuild and first, progress=not no_progress))
            except BatchPending as exc:  # collected: with --all every space queues its requests first
                waiting.append(exc)
        return done, waiting

    if batch_api:

        def until_built() -> _Pass:
            reports, pending = build_all()
            if pending:
                raise pending[0]
            return reports, pending

        reports, pending = through_batch_api(mem.store, settings, work, poll_max, until_built)
    else:
        reports, pending = build_all()
    if as_json:
        echo_json([r.model_dump(mode="json") for r in reports])
    else:
        for report in reports:
            click.echo(_describe(report))
    if pending:
        assert batch_out is not None  # only the batch mode raises BatchPending
        count = export_pending(mem.store, batch_out) if len(names) > 1 else pending[0].count
        stages = ", ".join(f"{p.stage}" for p in pending)
        click.echo(
            f"{count} request(s) of stage(s) {stages} written to {batch_out}. Run them through the OpenAI Batch API "
            "(or any offline process), then `tmem llm batch-import RESULTS.jsonl` and run this build again.",
            err=True,
        )
        raise SystemExit(EXIT_BATCH_PENDING)
    incomplete = [r for r in reports if not r.complete]
    if incomplete:
        units = sum(len(r.failed) for r in incomplete)
        click.echo(
            f"{units} unit(s) failed in {', '.join(r.space for r in incomplete)}: everything else was built. Run the "
            "same build again to retry only those (a more capable model or a higher TMEM_LLM_OUTPUT_RETRIES helps).",
            err=True,
        )
        raise SystemExit(EXIT_INCOMPLETE)


def through_batch_api(store: Store, settings: Settings, work: Path, poll_max: float, run: Callable[[], T]) -> T:
    """Call ``run`` (a build or an evaluation in batch mode) with batch rounds through the OpenAI Batch API between
    calls until it stops raising BatchPending, printing progress and the tokens of the rounds to stderr."""
    from tmem.llm.batch_api import BatchAPIOptions, BatchAPIRunner, batch_client, until_done

    options = BatchAPIOptions(poll_max=poll_max, poll_initial=min(10.0, poll_max), work_dir=work)
    runner = BatchAPIRunner(store, batch_client(settings), options, echo=lambda line: click.echo(line, err=True))
    try:
        result = until_done(run, runner)
    finally:
        runner.client.close()
    rounds = runner.rounds
    if rounds:
        click.echo(
            f"{len(rounds)} batch round(s): {sum(r.imported for r in rounds)} result(s), "
            f"{sum(r.input_tokens for r in rounds):,} input and {sum(r.output_tokens for r in rounds):,} output "
            "tokens (`tmem llm cost` for the whole log).",
            err=True,
        )
    return result


def _describe(report: BuildReport) -> str:
    lines = [f"Built {report.space} ({report.mode} mode) in {report.seconds:.1f}s"]
    if report.descriptive_only:
        lines[0] += " — descriptive only: no Bridge, Horizon or Scene triggers and no persona"
    header = ("stage", "created", "updated", "skipped", "calls", "cached", "seconds")
    rows = [
        (
            s.stage,
            str(s.created),
            str(s.updated),
            str(s.skipped),
            str(s.llm_calls),
            str(s.cached_calls),
            f"{s.seconds:.1f}",
        )
        for s in report.stages
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        lines.append(
            "  " + "  ".join([row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))])
        )
    lines.append("  " + ", ".join(f"{k} {v}" for k, v in sorted(report.counts.items())))
    if report.fallback:
        lines.append(f"  {len(report.fallback)} scene(s) segmented without the model (fallback, see `tmem check`)")
    for unit in report.failed:
        lines.append(f"  FAILED {unit.stage} {unit.unit}: {unit.reason[:200]}")
    return "\n".join(lines)


def register(cli: click.Group) -> None:
    """Attach ``tmem build``."""
    cli.add_command(build_cmd)
