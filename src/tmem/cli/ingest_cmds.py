"""``tmem import``, ``tmem spaces`` and ``tmem show``: getting conversations in and looking at what is stored.

The ``--json`` shapes are documented in docs/cli.md and are a contract: add keys, never rename or remove them.
"""

from __future__ import annotations

import textwrap
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import click

from tmem.cli.context import AppContext, echo_json, pass_app
from tmem.ingest import FORMATS, Format, ImportReport
from tmem.models import (
    BuildMode,
    Item,
    ItemKind,
    Persona,
    Scene,
    SpaceSummary,
    Topic,
    Trigger,
    TriggerFamily,
)
from tmem.scope import Scope
from tmem.store.base import Store
from tmem.util.state import STATE_MODE

DESCRIPTIVE_ONLY = "descriptive only (built without an LLM: no Bridge, Horizon or persona)"
SECTIONS = ("scenes", "topics", "items", "triggers", "persona")
_WIDTH = 100


# --------------------------------------------------------------------------------------------- import


def _import_payload(report: ImportReport) -> dict[str, Any]:
    return {
        "source": report.source,
        "spaces": [s.model_dump(mode="json") for s in report.spaces],
        "sessions_added": report.sessions_added,
        "sessions_skipped": report.sessions_skipped,
        "turns_added": report.turns_added,
    }


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="auto",
    show_default=True,
    help="LoCoMo JSON, LongMemEval JSON (docs/longmemeval.md), native JSON/JSONL (docs/ingest.md), or recognise it "
    "from the content.",
)
@click.option(
    "--space",
    default=None,
    help="Import only this space (a LoCoMo sample_id, a LongMemEval question_id); names the space of native records "
    "that name none.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the import report as JSON.")
@pass_app
def import_cmd(app: AppContext, file: Path, fmt: str, space: str | None, as_json: bool) -> None:
    """Import conversations from FILE. Running it again changes nothing; new sessions are appended."""
    report = app.memory().import_file(file, cast(Format, fmt), space)  # click.Choice checked the value
    if as_json:
        echo_json(_import_payload(report))
        return
    for s in report.spaces:
        new = " (new space)" if s.created else ""
        click.echo(
            f"{s.space}{new}: {len(s.sessions_added)} sessions added, {len(s.sessions_skipped)} already stored, "
            f"{s.turns_added} turns added"
        )
    click.echo(
        f"Imported {report.source}: {report.sessions_added} sessions and {report.turns_added} turns added, "
        f"{report.sessions_skipped} sessions already stored, in {len(report.spaces)} space(s)."
    )


# --------------------------------------------------------------------------------------------- spaces


def _date(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value is not None else "-"


def _state(summary: SpaceSummary) -> str:
    return f"{summary.build_state} ({summary.build_mode})" if summary.build_mode else summary.build_state


@click.command("spaces")
@click.option("--json", "as_json", is_flag=True, help="Print one object per space as JSON.")
@pass_app
def spaces_cmd(app: AppContext, as_json: bool) -> None:
    """List the spaces in the memory directory: sessions, turns, first/last date, build state."""
    summaries = app.memory().spaces()
    if as_json:
        echo_json([s.model_dump(mode="json") for s in summaries])
        return
    if not summaries:
        click.echo(f"No spaces in {app.settings.home} yet: run `tmem import FILE`.")
        return
    rows = [("SPACE", "SESSIONS", "TURNS", "FIRST", "LAST", "BUILD")] + [
        (s.name, str(s.sessions), str(s.turns), _date(s.first_date), _date(s.last_date), _state(s)) for s in summaries
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


@click.command("delete")
@click.argument("space")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_app
def delete_cmd(app: AppContext, space: str, yes: bool) -> None:
    """Delete SPACE and erase it: conversation, memory, embeddings and LLM log, with no bytes left in the files."""
    from tmem.memory import Memory

    summary = _summary(app.store(), Scope.local(space))  # NotFoundError naming the known spaces
    if not yes:
        click.confirm(
            f"Delete space {space!r} ({summary.sessions} sessions, {summary.turns} turns) and everything built from "
            "it? This cannot be undone",
            abort=True,
        )
    memory = Memory(app.store(), app.settings)
    done = memory.delete_space(space)
    for wait in (0.5, 1.0, 2.0, 4.0):  # bounded: a reader that stays open leaves the erasure pending
        if done.erased:
            break
        time.sleep(wait)
        done = done.model_copy(update={"erased": memory.upkeep()})
    if done.erased:
        click.echo(f"Deleted space {space!r}.")
        return
    click.echo(f"Deleted space {space!r}, erasure pending (erasure {done.erasure}).")
    click.echo(
        "Another process keeps a read open on the memory, so copies of the deleted data remain in the database's "
        "files until it ends. The erasure is finished by the next tmem command, or within seconds by a running "
        "tmem serve, mcp or ui; `tmem erasures` shows its state.",
        err=True,
    )


# --------------------------------------------------------------------------------------------- show: data


def _summary(store: Store, space: Scope) -> SpaceSummary:
    store.get_space(space)  # NotFoundError naming the known spaces
    return next(s for s in store.list_spaces() if s.name == space.key)


def _overview(store: Store, space: Scope) -> dict[str, Any]:
    summary = _summary(store, space)
    items = store.items(space)
    triggers = store.triggers(space)
    mode = store.get_state(space, STATE_MODE)
    descriptive = mode == BuildMode.EXTRACTIVE.value
    return {
        "space": space.key,
        "speakers": store.get_space(space).speakers,
        "sessions": summary.sessions,
        "turns": summary.turns,
        "first_date": summary.first_date.isoformat() if summary.first_date else None,
        "last_date": summary.last_date.isoformat() if summary.last_date else None,
        "build_state": summary.build_state,
        "build_mode": mode,
        "descriptive_only": descriptive,
        "note": DESCRIPTIVE_ONLY if descriptive else None,
        "counts": {
            "scenes": len(store.scenes(space)),
            "topics": len(store.topics(space)),
            "items": len(items),
            "items_atomic": sum(1 for i in items if i.kind == ItemKind.ATOMIC),
            "items_connected": sum(1 for i in items if i.kind == ItemKind.CONNECTED),
            "items_superseded": sum(1 for i in items if i.superseded_by),
            "triggers": {f.value: sum(1 for t in triggers if t.family == f) for f in TriggerFamily},
            "personas": len(store.personas(space)),
        },
    }


def _topics_by_scene(store: Store, space: Scope) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    by_scene: dict[str, list[str]] = defaultdict(list)
    by_topic: dict[str, list[str]] = defaultdict(list)
    for link in store.topic_links(space):
        by_scene[link.scene_id].append(link.topic_id)
        by_topic[link.topic_id].append(link.scene_id)
    return by_scene, by_topic


def _section_data(store: Store, space: Scope, section: str) -> list[dict[str, Any]]:
    if section == "scenes":
        by_scene, _ = _topics_by_scene(store, space)
        return [{**s.model_dump(mode="json"), "topic_ids": by_scene.get(s.id, [])} for s in store.scenes(space)]
    if section == "topics":
        _, by_topic = _topics_by_scene(store, space)
        return [{**t.model_dump(mode="json"), "scene_ids": by_topic.get(t.id, [])} for t in store.topics(space)]
    if section == "items":
        return [i.model_dump(mode="json") for i in store.items(space)]
    if section == "triggers":
        return [t.model_dump(mode="json") for t in _sorted_triggers(store.triggers(space))]
    return [p.model_dump(mode="json") for p in store.personas(space)]


_FAMILY_ORDER = {f: n for n, f in enumerate(TriggerFamily)}


def _sorted_triggers(triggers: list[Trigger]) -> list[Trigger]:
    first_seen: dict[tuple[str, str], int] = {}
    for t in triggers:
        first_seen.setdefault((t.host_kind, t.host_id), len(first_seen))
    return sorted(triggers, key=lambda t: (first_seen[(t.host_kind, t.host_id)], _FAMILY_ORDER[t.family], t.group))


# --------------------------------------------------------------------------------------------- show: text


def _wrap(text: str, indent: int = 4) -> str:
    pad = " " * indent
    return textwrap.fill(text, width=_WIDTH, initial_indent=pad, subsequent_indent=pad) if text else pad + "-"


def _short(text: str, limit: int = 80) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 3] + "..."


def _print_overview(data: dict[str, Any]) -> None:
    counts = data["counts"]
    triggers = ", ".join(f"{family} {n}" for family, n in counts["triggers"].items())
    build = data["build_state"] + (f" ({data['build_mode']})" if data["build_mode"] else "")
    dates = f"{data['first_date'] or '-'} .. {data['last_date'] or '-'}"
    click.echo(f"Space {data['space']}")
    click.echo(f"  speakers:  {', '.join(data['speakers']) or '-'}")
    click.echo(f"  sessions:  {data['sessions']}   turns: {data['turns']}   dates: {dates}")
    click.echo(f"  build:     {build}")
    click.echo(
        f"  nodes:     scenes {counts['scenes']}, topics {counts['topics']}, items {counts['items']} "
        f"({counts['items_atomic']} atomic, {counts['items_connected']} connected, "
        f"{counts['items_superseded']} superseded), personas {counts['personas']}"
    )
    click.echo(f"  triggers:  {triggers}")
    if data["note"]:
        click.echo(f"  note:      {data['note']}")


def _print_scenes(scenes: list[Scene], by_scene: dict[str, list[str]]) -> None:
    click.echo(f"Scenes ({len(scenes)})")
    for s in scenes:
        click.echo(f"  [{s.id}] {s.title}")
        click.echo(f"    {_date(s.start)} .. {_date(s.end)}   topics: {', '.join(by_scene.get(s.id, [])) or '-'}")
        click.echo(f"    turns ({len(s.turn_ids)}): {', '.join(s.turn_ids)}")
        click.echo(_wrap(s.summary))


def _print_topics(topics: list[Topic], by_topic: dict[str, list[str]], scenes: dict[str, Scene]) -> None:
    click.echo(f"Topics ({len(topics)})")
    for t in topics:
        click.echo(f"  [{t.id}] {t.label}" + (f": {t.description}" if t.description else ""))
        for scene_id in by_topic.get(t.id, []):
            title = scenes[scene_id].title if scene_id in scenes else "(missing scene)"
            click.echo(f"    - [{scene_id}] {title}")


def _print_items(items: list[Item]) -> None:
    click.echo(f"Items ({len(items)})")
    for i in items:
        facts = [i.kind.value, f"scenes {', '.join(i.scene_ids)}"]
        facts += [f"topic {i.topic_id}"] if i.topic_id else []
        facts += [i.date] if i.date else []
        facts += [i.speaker] if i.speaker else []
        click.echo(f"  [{i.id}] {' | '.join(facts)}")
        click.echo(_wrap(i.text))
        if i.supersedes:
            click.echo(f"    supersedes {i.supersedes}")
        if i.superseded_by:
            click.echo(f"    superseded by {i.superseded_by}")


def _print_triggers(triggers: list[Trigger], items: dict[str, Item], scenes: dict[str, Scene]) -> None:
    click.echo(f"Triggers ({len(triggers)})")
    host: tuple[str, str] | None = None
    for t in _sorted_triggers(triggers):
        if (t.host_kind, t.host_id) != host:
            host = (t.host_kind, t.host_id)
            if t.host_kind == "item":
                label = _short(items[t.host_id].text) if t.host_id in items else "(missing item)"
            else:
                label = scenes[t.host_id].title if t.host_id in scenes else "(missing scene)"
            click.echo(f"  {t.host_kind} [{t.host_id}] {label}")
        click.echo(f"    {t.family.value} #{t.group} [{t.id}]")
        for view in t.views:
            click.echo(_wrap(f"{view.name}: {view.text}", indent=6))


def _print_personas(personas: list[Persona]) -> None:
    click.echo(f"Persona ({len(personas)} speakers)")
    for p in personas:
        click.echo(f"  {p.speaker}")
        if p.summary:
            click.echo(_wrap(p.summary))
        for trait in p.traits:
            support = f"  [items: {', '.join(trait.item_ids)}]" if trait.item_ids else ""
            click.echo(f"    - {trait.category}: {trait.value}{support}")


def _print_section(store: Store, space: Scope, section: str) -> None:
    if section in ("scenes", "topics"):
        by_scene, by_topic = _topics_by_scene(store, space)
        if section == "scenes":
            _print_scenes(store.scenes(space), by_scene)
        else:
            _print_topics(store.topics(space), by_topic, {s.id: s for s in store.scenes(space)})
    elif section == "items":
        _print_items(store.items(space))
    elif section == "triggers":
        _print_triggers(
            store.triggers(space), {i.id: i for i in store.items(space)}, {s.id: s for s in store.scenes(space)}
        )
    else:
        _print_personas(store.personas(space))


@click.command("show")
@click.argument("space")
@click.option("--scenes", "show_scenes", is_flag=True, help="Scenes: title, dates, turn ids, topics, summary.")
@click.option("--topics", "show_topics", is_flag=True, help="Topics with their scenes.")
@click.option("--items", "show_items", is_flag=True, help="Items: kind, source scenes, date, supersedes.")
@click.option("--triggers", "show_triggers", is_flag=True, help="Triggers grouped by host and family, with views.")
@click.option("--persona", "show_persona", is_flag=True, help="Persona per speaker with supporting item ids.")
@click.option("--json", "as_json", is_flag=True, help="Print the overview and the chosen sections as JSON.")
@pass_app
def show_cmd(
    app: AppContext,
    space: str,
    show_scenes: bool,
    show_topics: bool,
    show_items: bool,
    show_triggers: bool,
    show_persona: bool,
    as_json: bool,
) -> None:
    """Show SPACE: an overview, or with flags the stored memory itself."""
    store = app.store()
    flags = (show_scenes, show_topics, show_items, show_triggers, show_persona)
    chosen = [name for name, on in zip(SECTIONS, flags, strict=True) if on]
    scope = Scope.local(space)
    overview = _overview(store, scope)
    if as_json:
        echo_json({**overview, **{name: _section_data(store, scope, name) for name in chosen}})
        return
    if not chosen:
        _print_overview(overview)
        return
    if overview["note"]:
        click.echo(f"{space}: {overview['note']}")
    for name in chosen:
        _print_section(store, scope, name)


@click.command("erasures")
@click.option("--pending", is_flag=True, help="Only erasures not finished yet.")
@pass_app
def erasures_cmd(app: AppContext, pending: bool) -> None:
    """The erasure ledger: one entry per forget or deleted space, and whether its bytes are erased yet (pending
    erasures are finished first when no other connection's read is in the way)."""
    memory = app.memory()
    memory.upkeep()
    echo_json([e.model_dump(mode="json") for e in memory.erasures(pending=pending)])


def register(cli: click.Group) -> None:
    """Attach this module's commands to the top-level group."""
    for command in (import_cmd, spaces_cmd, show_cmd, delete_cmd, erasures_cmd):
        cli.add_command(command)
