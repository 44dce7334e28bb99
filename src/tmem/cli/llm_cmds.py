"""``tmem llm cost``, ``tmem llm batch-export`` and ``tmem llm batch-import``.

The ``--json`` shapes are documented in docs/llm.md and are a contract: add keys, never rename or remove them.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import click

from tmem.cli.context import AppContext, echo_json, pass_app
from tmem.construct.estimate import BuildEstimate, FileEstimate
from tmem.ingest.reader import FORMATS, Format
from tmem.llm.batch import BATCH_URL, export_pending, import_results
from tmem.llm.cost import CostReport, StageCost, cost_report
from tmem.scope import Scope


@click.group("llm")
def llm_group() -> None:
    """LLM cost report and the batch protocol (export uncached requests, import results)."""


@llm_group.command("cost")
@click.argument("space", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (documented in docs/llm.md).")
@click.option(
    "--estimate",
    is_flag=True,
    help="Instead of the logged cost: what building SPACE's open turns will take (requests and tokens per stage, "
    "batch rounds), before the build starts.",
)
@click.option(
    "--few-rounds/--sequential",
    "few_rounds",
    default=True,
    help="Build plan of the estimate (default few rounds, as `tmem build --batch-out` plans).",
)
@click.option(
    "--file",
    "data",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="With --estimate: the cost of building every space of this importable file, before importing it "
    "(nothing is written).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="auto",
    show_default=True,
    help="With --file: the file's format (as `tmem import`).",
)
@pass_app
def cost_cmd(
    app: AppContext, space: str | None, as_json: bool, estimate: bool, few_rounds: bool, data: Path | None, fmt: str
) -> None:
    """Calls and input/output tokens per stage and in total (of SPACE, or of every space); with --estimate, the
    expected cost of building SPACE, or with --estimate --file FILE of every space in FILE."""
    if data is not None:
        from tmem.construct.estimate import estimate_file
        from tmem.construct.options import BuildOptions

        if not estimate or space is not None:
            raise click.UsageError("--file goes with --estimate and no SPACE: `tmem llm cost --estimate --file FILE`.")
        planned_file = estimate_file(data, cast(Format, fmt), BuildOptions(few_rounds=few_rounds))  # a Choice
        if as_json:
            echo_json(planned_file.model_dump(mode="json"))
        else:
            click.echo(file_estimate_table(planned_file))
        return
    store = app.store()
    scope = None if space is None else Scope.local(space)
    if scope is not None:
        store.get_space(scope)  # NotFoundError names the known spaces
    if estimate:
        from tmem.construct.estimate import estimate_build
        from tmem.construct.options import BuildOptions

        if scope is None:
            raise click.UsageError("--estimate needs a SPACE.")
        planned = estimate_build(store, scope, BuildOptions(few_rounds=few_rounds))
        if as_json:
            echo_json(planned.model_dump(mode="json"))
        else:
            click.echo(estimate_table(planned))
        return
    report = cost_report(store, scope)
    if as_json:
        echo_json(report.model_dump(mode="json"))
        return
    click.echo(_cost_table(report))


def _cost_table(report: CostReport) -> str:
    scope = f"space {report.space}" if report.space else "all spaces"
    if not report.stages:
        return f"No LLM calls logged for {scope}."
    header = ("stage", "calls", "cached", "batch", "errors", "input tokens", "output tokens")
    rows = [_row(s) for s in report.stages]
    rows.append(_row(report.total))
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def fmt(cells: tuple[str, ...]) -> str:
        first = cells[0].ljust(widths[0])
        return "  ".join([first, *(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))])

    lines = [f"LLM cost for {scope} (models: {', '.join(report.models)})", fmt(header)]
    lines += [fmt(r) for r in rows[:-1]]
    lines.append("-" * len(fmt(header)))
    lines.append(fmt(rows[-1]))
    return "\n".join(lines)


def estimate_table(planned: BuildEstimate) -> str:
    """The estimate as a table (also printed by `tmem build --batch-out` before a fresh build)."""
    if not planned.open_turns:
        return f"Space {planned.space}: nothing to build (every turn is in a scene)."
    header = ("stage", "requests", "input tokens", "output tokens")
    rows = [(s.stage, f"{s.requests:,}", f"{s.input_tokens:,}", f"{s.output_tokens:,}") for s in planned.stages]
    t = planned.total
    total = ("total", f"{t.requests:,}", f"{t.input_tokens:,}", f"{t.output_tokens:,}")
    widths = [max(len(r[i]) for r in [header, *rows, total]) for i in range(len(header))]

    def fmt(cells: tuple[str, ...]) -> str:
        return "  ".join([cells[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))])

    lines = [
        f"Estimated cost of building {planned.space} ({planned.plan} plan, {planned.rounds} batch round(s)): "
        f"{planned.open_turns} open turns -> about {planned.scenes} scenes and {planned.items} items",
        fmt(header),
        *(fmt(r) for r in rows),
        "-" * len(fmt(header)),
        fmt(total),
        "An estimate from rates measured on model-built memories (docs/construction.md), not a bill.",
    ]
    return "\n".join(lines)


def file_estimate_table(planned: FileEstimate) -> str:
    """:func:`tmem.construct.estimate.estimate_file` as a table: the stages summed over the file's spaces."""
    whole = BuildEstimate(
        space=f"{planned.file} ({len(planned.spaces)} spaces)",
        plan=planned.plan,
        open_turns=planned.open_turns,
        scenes=sum(s.scenes for s in planned.spaces),
        items=sum(s.items for s in planned.spaces),
        rounds=planned.rounds,
        stages=planned.stages,
        total=planned.total,
    )
    return estimate_table(whole)


def _row(stage: StageCost) -> tuple[str, ...]:
    return (
        stage.stage or "(none)",
        f"{stage.calls:,}",
        f"{stage.cached_calls:,}",
        f"{stage.batch_calls:,}",
        f"{stage.errors:,}",
        f"{stage.input_tokens:,}",
        f"{stage.output_tokens:,}",
    )


@llm_group.command("batch-export")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--space", default=None, help="Only the requests of this space (default: all).")
@click.option("--json", "as_json", is_flag=True, help="Print {file, requests, space} as JSON.")
@pass_app
def batch_export_cmd(app: AppContext, file: Path, space: str | None, as_json: bool) -> None:
    """Write the pending (uncached) requests to FILE as OpenAI Batch API JSONL."""
    store = app.store()
    scope = None if space is None else Scope.local(space)
    if scope is not None:
        store.get_space(scope)
    count = export_pending(store, file, scope)
    if as_json:
        echo_json({"file": str(file), "requests": count, "space": space})
    elif count == 0:
        click.echo(f"No pending requests; wrote an empty {file}. Run `tmem build SPACE --batch-out FILE` first.")
    else:
        click.echo(
            f"Wrote {count} request(s) to {file}. Submit it as a batch (endpoint {BATCH_URL}), or run it with any "
            "offline process, then `tmem llm batch-import RESULTS.jsonl` and rerun the build."
        )


@llm_group.command("batch-import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the import report as JSON.")
@pass_app
@click.pass_context
def batch_import_cmd(ctx: click.Context, app: AppContext, file: Path, as_json: bool) -> None:
    """Import a Batch API results JSONL into the cache. Exits 1 if any line was bad (the good ones are kept)."""
    report = import_results(app.store(), file)
    if as_json:
        echo_json(report.model_dump(mode="json"))
    else:
        click.echo(
            f"Imported {report.imported} result(s) from {file} ({report.already_imported} already imported, "
            f"{len(report.bad)} bad line(s)); {report.still_pending} request(s) still pending."
        )
        for bad in report.bad:
            ident = f" (custom_id {bad.custom_id})" if bad.custom_id else ""
            click.echo(f"Error: line {bad.line}{ident}: {bad.reason}", err=True)
    if report.bad:
        ctx.exit(1)


def register(cli: click.Group) -> None:
    """Attach this module's commands to the top-level group."""
    cli.add_command(llm_group)
