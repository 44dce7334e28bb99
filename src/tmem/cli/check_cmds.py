"""``tmem check SPACE [--json] [--wait S]``: verify a memory's integrity; exit 1 on any violation, 4 when the memory
is consistent but the last build left failed units (``tmem build SPACE`` retries them), 75 when a build of SPACE kept
running through ``--wait`` seconds (check reads only between builds: it holds the space's build lease).

JSON output (stable): ``{"space", "mode", "descriptive_only", "ok", "build_incomplete", "pending_turns", "complete",
"checked": {type: count},
"violations": [{"code", "message", "record"}], "failed_units": [{"stage", "unit", "refs", "reason"}],
"fallback_scenes": {scene id: reason}}``.
"""

from __future__ import annotations

import time

import click

from tmem.cli.context import AppContext, echo_json, pass_app
from tmem.construct.check import CheckReport, check_space
from tmem.construct.policy import build_lease
from tmem.construct.report import EXIT_INCOMPLETE
from tmem.errors import BuildBusy
from tmem.scope import Scope
from tmem.store.base import Store

DEFAULT_WAIT = 600.0
EXIT_BUSY = 75  # EX_TEMPFAIL: a build of the space kept running through --wait; nothing was checked
POLL_SECONDS = 0.2
DESCRIPTIVE_NOTE = "descriptive only (built without an LLM: no Bridge, Horizon or persona)"


@click.command("check")
@click.argument("space")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=DEFAULT_WAIT,
    show_default=True,
    help="Seconds to wait for a running build of SPACE to end: check reads a memory no build is writing.",
)
@pass_app
@click.pass_context
def check_command(ctx: click.Context, app: AppContext, space: str, as_json: bool, wait: float) -> None:
    """Verify the integrity of SPACE's memory; exit 1 on any violation, 4 when the last build left failed units.

    Checks that every built turn is in exactly one scene, every item is linked to existing scenes (an atomic item to
    exactly one), every trigger is attached to an existing host of the right kind, no topic link or persona citation
    is orphaned, supersession links agree both ways, and the LLM call log is consistent (no call paid twice).
    """
    try:
        report = checked_between_builds(app.store(), Scope.local(space), app.settings.build_lease_seconds, wait)
    except BuildBusy as exc:
        click.echo(f"Error: {exc}", err=True)
        ctx.exit(EXIT_BUSY)
    if as_json:
        payload = report.model_dump(mode="json")
        payload["ok"] = report.ok
        payload["build_incomplete"] = report.build_incomplete
        payload["complete"] = report.complete
        echo_json(payload)
    else:
        mode = report.mode or "not built"
        if report.descriptive_only:
            mode += f", {DESCRIPTIVE_NOTE}"
        checked = ", ".join(f"{n} {kind}" for kind, n in report.checked.items())
        click.echo(f"{space}: {mode}; checked {checked}")
        for v in report.violations:
            click.echo(f"  {v.code}: {v.message}")
        if report.build_incomplete:
            click.echo(
                f"Build incomplete (interrupted, or still running): {report.pending_turns} turn(s) await segmentation. "
                f"Not corruption: run `tmem build {space}` to resume."
            )
        if report.fallback_scenes:
            click.echo(f"{len(report.fallback_scenes)} scene(s) segmented without the model (fallback).")
        for unit in report.failed_units:
            click.echo(f"  failed unit {unit.stage} {unit.unit}: {unit.reason[:200]}")
        if report.ok and report.complete:
            click.echo("OK: no violation")
        elif report.ok:
            click.echo(
                f"OK: no violation, but incomplete: {len(report.failed_units)} failed unit(s) of the last build. "
                f"Run `tmem build {space}` to retry them."
            )
        else:
            click.echo(
                f"{len(report.violations)} violation(s). Rebuild the space (delete it, import again, build) or report "
                "the codes above as a bug."
            )
    if not report.ok:
        ctx.exit(1)
    if not report.complete:
        ctx.exit(EXIT_INCOMPLETE)


def checked_between_builds(store: Store, space: Scope, lease_seconds: float, wait: float) -> CheckReport:
    """``check_space`` while holding the space's build lease, so that no build rewrites a session mid-check (a
    build between its transactions leaves turns in no scene for a moment). Waits up to ``wait`` seconds for a
    running build to end, then raises BuildBusy."""
    store.get_space(space)  # a missing space is a NotFoundError, not a wait
    deadline = time.monotonic() + wait
    while True:
        try:
            with build_lease(store, space, lease_seconds):
                return check_space(store, space)
        except BuildBusy:
            if time.monotonic() >= deadline:
                raise BuildBusy(
                    f"A build of {space.key!r} is still running after {wait:g} s; run `tmem check {space.key}` when it has "
                    "ended, or give it longer with --wait."
                ) from None
            time.sleep(POLL_SECONDS)


def register(cli: click.Group) -> None:
    """Attach this module's commands to the top-level group."""
    cli.add_command(check_command)
