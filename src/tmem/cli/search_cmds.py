"""``tmem search``: run the retrieval cascade and show what was recalled and why."""

from __future__ import annotations

import click

from tmem.answer.budget import Context
from tmem.cli.context import AppContext, echo_json, layout_option, pass_app
from tmem.retrieve.config import SWITCHES
from tmem.retrieve.types import Route, SearchResult


def _route(r: Route) -> str:
    text = f"{r.name} #{r.rank} ({r.score:.3f}"
    if r.view:
        text += f", view {r.view}"
    if r.gate is not None:
        text += f", gate {r.gate:g}"
    return text + ")"


def _print(result: SearchResult, explain: bool) -> None:
    notes = [f"preset {result.preset}"]
    if result.disabled:
        notes.append("without " + ",".join(result.disabled))
    if result.descriptive_only:
        notes.append("descriptive only: built without an LLM, so no Bridge/Horizon/Scene triggers or persona")
    if result.stale:
        notes.append(
            f"stale: {result.stale_turns} turn(s) in no scene yet, searched as raw turns; tmem build structures them"
        )
    click.echo(f"Search in {result.space!r}: {result.query!r} [{'; '.join(notes)}]")
    if explain and result.topics:
        click.echo("Topics kept by the prefilter: " + ", ".join(f"{t} ({s:.4f})" for t, s in result.topics))
    click.echo(f"\nScenes ({len(result.scenes)}):")
    for n, sh in enumerate(result.scenes, start=1):
        s = sh.scene
        click.echo(f"{n:>2}. [{s.id}] {s.start:%Y-%m-%d} {s.title}  score {sh.score:.4f}")
        if explain:
            click.echo("    via " + "; ".join(_route(r) for r in sh.routes))
            if sh.topic_ids:
                click.echo("    topics " + ", ".join(sh.topic_ids))
            for t in sh.turns:
                click.echo(f"      {t.id} {t.time:%Y-%m-%d %H:%M} {t.speaker}: {t.text}")
    click.echo(f"\nItems ({len(result.items)}):")
    for n, ih in enumerate(result.items, start=1):
        click.echo(f"{n:>2}. [{ih.item.id}] {ih.item.text}  score {ih.score:.4f}")
        if explain:
            click.echo("    via " + "; ".join(_route(r) for r in ih.routes))
            click.echo(
                "    from scenes "
                + ", ".join(s.id for s in ih.source_scenes)
                + "; turns "
                + ", ".join(ih.source_turn_ids)
            )
    if result.turns:
        click.echo(f"\nRaw turns ({len(result.turns)}):")
        for n, th in enumerate(result.turns, start=1):
            where = f"scene {th.scene_id}" if th.scene_id else "not built yet"
            click.echo(f"{n:>2}. [{th.turn.id}] {th.turn.speaker}: {th.turn.text}  score {th.score:.4f} ({where})")
            if explain:
                click.echo("    via " + "; ".join(_route(r) for r in th.routes))
    if result.personas:
        click.echo("\nPersona (beside the evidence, outside the budget):")
        for p in result.personas:
            traits = "; ".join(f"{t.category}: {t.value}" for t in p.traits)
            click.echo(f"  {p.speaker}: {traits}")


def _print_context(ctx: Context, explain: bool) -> None:
    notes = [f"preset {ctx.preset}", f"{ctx.tokens} of {ctx.max_tokens} tokens", f"{len(ctx.hits)} hits"]
    if ctx.left_out:
        notes.append(f"{ctx.left_out} hits did not fit")
    if ctx.anchorless and ctx.lexical_anchor is not None:
        notes.append(f"no lexical anchor ({ctx.lexical_anchor:.2f}): ordered by dense raw turns first")
    if ctx.descriptive_only:
        notes.append("descriptive only: built without an LLM")
    click.echo(f"Context for {ctx.query!r} in {ctx.space!r} [{'; '.join(notes)}]")
    if ctx.unbuilt_turns:
        click.echo(
            f"Note: {ctx.unbuilt_turns} turns are in no scene yet (added after the last build): they are searched as "
            f"raw turns only; `tmem build {ctx.space}` structures them."
        )
    click.echo("")
    click.echo(ctx.text or "(nothing fits in this budget)")
    click.echo("\nWhy recalled:")
    for n, hit in enumerate(ctx.hits, start=1):
        trimmed = ", trimmed" if hit.trimmed else ""
        click.echo(f"{n:>2}. {hit.kind} {hit.id} ({hit.tokens} tokens{trimmed}): turns {', '.join(hit.turn_ids)}")
        if explain:
            click.echo("    via " + "; ".join(_route(r) for r in hit.routes))


@click.command("search")
@click.argument("space")
@click.argument("query")
@click.option("--preset", default=None, help="Retrieval preset (default: TMEM_SEARCH_PRESET, else auto).")
@click.option("--k-topics", "kT", type=click.IntRange(min=1), default=None, help="Topics kept by the prefilter (kT).")
@click.option("--k-scenes", "kS", type=click.IntRange(min=0), default=None, help="Scenes returned (kS).")
@click.option("--k-items", "kI", type=click.IntRange(min=0), default=None, help="Items returned (kI).")
@click.option("--r", "R", type=click.IntRange(min=0), default=None, help="Item-trigger union top-R.")
@click.option("--gate", type=float, default=None, help="Cosine gate on the item-trigger route.")
@click.option(
    "--without",
    "switches",
    multiple=True,
    type=click.Choice(SWITCHES),
    help="Remove a component (repeatable): SL, IC, ET+BT, PS, TF, ST, HT.",
)
@click.option("--reranker", default=None, help="CrossEncoder model name or local path (env TMEM_RERANKER_MODEL).")
@click.option(
    "--max-tokens",
    type=click.IntRange(min=0),
    default=None,
    help="Print the context a reader would get, packed within N tokens (TMEM_TOKENIZER, default cl100k), instead of "
    "the raw hits.",
)
@layout_option("the context")
@click.option("--explain", is_flag=True, help="Show each hit's routes, topics and dated turns.")
@click.option("--json", "as_json", is_flag=True, help="Print the full SearchResult as JSON.")
@pass_app
def search_cmd(
    app: AppContext,
    space: str,
    query: str,
    preset: str | None,
    kT: int | None,
    kS: int | None,
    kI: int | None,
    R: int | None,
    gate: float | None,
    switches: tuple[str, ...],
    reranker: str | None,
    max_tokens: int | None,
    layout: tuple[str, ...],
    explain: bool,
    as_json: bool,
) -> None:
    """Recall the scenes and items of SPACE that answer QUERY, with the routes that reached them (with --max-tokens,
    the context a reader gets, laid out as --layout says)."""
    mem = app.memory()
    config = mem.core.resolve_config(preset)  # the same rule as Memory.search: --preset, else TMEM_SEARCH_PRESET
    changes: dict[str, object] = {
        k: v for k, v in {"kT": kT, "kS": kS, "kI": kI, "R": R, "gate": gate}.items() if v is not None
    }
    if reranker:
        changes["reranker"] = reranker
    if changes:
        config = config.replace(**changes)
    if switches:
        config = config.without(*switches)
    from tmem.retrieve.layout import read_layout

    laid = read_layout(layout)
    if laid is not None and max_tokens is None:
        raise click.UsageError("--layout lays out a budgeted context: add --max-tokens N.")
    if max_tokens is not None:
        ctx = mem.context(space, query, max_tokens, config, layout=laid)
        if as_json:
            echo_json(ctx.model_dump(mode="json"))
        else:
            _print_context(ctx, explain)
        return
    result = mem.search(space, query, config)
    if as_json:
        echo_json(result.model_dump(mode="json"))
    else:
        _print(result, explain)


def register(cli: click.Group) -> None:
    """Attach this module's commands to the top-level group."""
    cli.add_command(search_cmd)
