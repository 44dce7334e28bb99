"""The CLI imports a command's module only when that command runs (issue 19 part 5: a cold ``tmem search`` pays for
nothing else); the table that says where each command lives must match what the modules register."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import click

from tmem.cli.main import COMMANDS

SRC = str(Path(__file__).resolve().parents[1] / "src")


def test_the_command_table_is_what_the_modules_register() -> None:
    registered: dict[str, str] = {}
    for module in sorted(set(COMMANDS.values())):
        group = click.Group()
        importlib.import_module(f"tmem.cli.{module}").register(group)
        registered.update(dict.fromkeys(group.commands, module))
    assert registered == COMMANDS


def test_a_command_imports_only_its_own_module() -> None:
    code = (
        "import json, sys; from tmem.cli.main import cli; import click; "
        "ctx = click.Context(cli); cmd = cli.get_command(ctx, 'search'); "
        "print(json.dumps([cmd.name, sorted(m for m in sys.modules if m.startswith('tmem.cli.') and m.endswith('_cmds')), "
        "cli.list_commands(ctx)]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": SRC}, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    name, loaded, listed = json.loads(done.stdout)
    assert name == "search" and loaded == ["tmem.cli.search_cmds"]
    assert listed == list(COMMANDS)
