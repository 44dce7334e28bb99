"""``tmem messages add``, ``tmem item get|edit|delete|history`` and ``tmem forget``: the agent operations of
docs/agents.md from the command line, each one call of :class:`tmem.Memory`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from tmem.cli.context import AppContext, echo_json, pass_app
from tmem.errors import InputError


def _read_messages(path: Path) -> list[dict[str, Any]]:
    """A JSON list of messages, or JSON Lines (one message per line)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"Cannot read {path}: {exc}") from exc
    try:
        loaded = json.loads(text)
        messages = loaded if isinstance(loaded, list) else [loaded]
    except json.JSONDecodeError:
        messages = []
        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    messages.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise InputError(
                        f"{path}, line {n}: not JSON ({exc.msg}); write one message object per line."
                    ) from None
    if not all(isinstance(m, dict) for m in messages):
        raise InputError(f"{path}: every message must be an object with speaker, text and optional time and id.")
    return messages


@click.group("messages")
def messages_group() -> None:
    """Write a conversation as it arrives (docs/agents.md)."""


@messages_group.command("add")
@click.argument("space")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_app
def messages_add(app: AppContext, space: str, file: Path, as_json: bool) -> None:
    """Append the messages of FILE (JSON list or JSON Lines of {speaker, text, time?, id?}) to SPACE."""
    report = app.memory().add_messages(space, _read_messages(file))
    if as_json:
        echo_json(report.model_dump(mode="json"))
        return
    click.echo(
        f"{space}: {len(report.added)} added, {len(report.skipped)} already stored, {len(report.forgotten)} forgotten"
        f" earlier; open session {report.session_id}"
        + (f" (new: {', '.join(report.sessions_created)})" if report.sessions_created else "")
    )


@click.group("item")
def item_group() -> None:
    """One memory at a time: show, edit, delete an item, or see its history."""


@item_group.command("get")
@click.argument("space")
@click.argument("item_id")
@pass_app
def item_get(app: AppContext, space: str, item_id: str) -> None:
    """Print ITEM_ID of SPACE as JSON."""
    echo_json(app.memory().get_item(space, item_id).model_dump(mode="json"))


@item_group.command("edit")
@click.argument("space")
@click.argument("item_id")
@click.argument("text")
@pass_app
def item_edit(app: AppContext, space: str, item_id: str, text: str) -> None:
    """Give ITEM_ID a new TEXT (its triggers are regenerated; the old text stays in its history)."""
    echo_json(app.memory().update_item(space, item_id, text).model_dump(mode="json"))


@item_group.command("delete")
@click.argument("space")
@click.argument("item_id")
@pass_app
def item_delete(app: AppContext, space: str, item_id: str) -> None:
    """Forget ITEM_ID for good (no rebuild brings it back)."""
    echo_json(app.memory().delete_item(space, item_id).model_dump(mode="json"))


@item_group.command("history")
@click.argument("space")
@click.argument("item_id")
@pass_app
def item_history(app: AppContext, space: str, item_id: str) -> None:
    """The versions of ITEM_ID (extracted, then edits with times) and its supersession chain, as JSON."""
    echo_json(app.memory().history(space, item_id).model_dump(mode="json"))


@click.command("forget")
@click.argument("space")
@click.option("--turn", "turn_ids", multiple=True, help="A turn id to forget (repeatable).")
@click.option("--item", "item_ids", multiple=True, help="An item id to forget (repeatable).")
@pass_app
def forget_cmd(app: AppContext, space: str, turn_ids: tuple[str, ...], item_ids: tuple[str, ...]) -> None:
    """Forget turns and items of SPACE: removed everywhere, tombstoned and erased from disk."""
    echo_json(app.memory().forget(space, turn_ids=turn_ids, item_ids=item_ids).model_dump(mode="json"))


def register(cli: click.Group) -> None:
    """Attach this module's commands to the top-level group."""
    for command in (messages_group, item_group, forget_cmd):
        cli.add_command(command)
