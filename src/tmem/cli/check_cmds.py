"""CLI commands (placeholder module: its owner fills in commands)."""

from __future__ import annotations

import click


def register(cli: click.Group) -> None:
    """Attach this module's commands to the top-level group."""
