"""State shared by CLI commands: the settings and one lazily opened :class:`tmem.Memory` (the composition root every
command goes through; ``store()`` is that memory's store)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click

from tmem.errors import ConfigError, TmemError
from tmem.memory import Memory
from tmem.settings import Settings
from tmem.store.base import Store

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class AppContext:
    settings: Settings
    _memory: Memory | None = field(default=None, repr=False)

    def memory(self) -> Memory:
        if self._memory is None:
            self._memory = Memory.open(settings=self.settings)
            try:  # an erasure left pending by an earlier command is finished now (tmem.edit.erasure)
                self._memory.upkeep()
            except TmemError as exc:
                log.warning("Pending erasures are left for later: %s", exc)
        return self._memory

    def store(self) -> Store:
        return self.memory().store

    def close(self) -> None:
        if self._memory is not None:
            self._memory.close()
            self._memory = None


pass_app = click.make_pass_decorator(AppContext)


def layout_option(owner: str = "the context") -> Callable[[F], F]:
    """``--layout`` on a command that lays out a budgeted context (read with :func:`tmem.retrieve.layout.read_layout`)."""
    return click.option(
        "--layout",
        "layout",
        multiple=True,
        help=f"How {owner} is laid out (repeatable, merged in order): date, rank or leadN (where its parts land), a "
        "JSON object of layout fields, or FIELD=VALUE, e.g. --layout rank --layout excerpt_neighbours=true "
        "(anchorless_routes takes names separated by commas; default: the recipe's; docs/context.md).",
    )


def batch_api_options(what: str) -> Callable[[F], F]:
    """``--batch-api`` and ``--poll-max`` (tmem.llm.batch_api) on a command whose LLM rounds are ``what``."""
    options = [
        click.option(
            "--batch-api",
            is_flag=True,
            help=f"Submit each round ({what}) to the OpenAI Batch API and wait for it (upload, poll, import, next "
            "round); a killed run started again waits for its submitted batches instead of paying twice.",
        ),
        click.option(
            "--poll-max",
            type=click.FloatRange(min=0.0),
            default=300.0,
            show_default=True,
            help="--batch-api: longest wait between two status checks of a batch, in seconds (starts at 10, doubles).",
        ),
    ]

    def apply(fn: F) -> F:
        for option in reversed(options):
            fn = option(fn)
        return fn

    return apply


def dir_option(purpose: str) -> Callable[[F], F]:
    """``--dir DIR`` on a subcommand (as ``tmem ui --dir DIR``), overriding the global ``--dir``; see :func:`use_home`."""
    return click.option(
        "--dir",
        "home",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help=f"{purpose} (overrides the global --dir).",
    )


def with_home(settings: Settings, home: Path | None) -> Settings:
    """``settings`` with the memory directory a command line's ``--dir`` named (global or after the command: the
    same rule for every command, docs/cli.md "Which store").

    ``--dir`` sets the memory directory (indices, caches; the store only when no URL is set); a database URL
    (``--database-url`` / ``TMEM_DATABASE_URL``) always names the store. A ``--dir`` that holds its own ``tmem.db``
    while a URL names another store is a conflict: a ConfigError saying which to drop, never a silent choice."""
    if home is None:
        return settings
    chosen = settings.model_copy(update={"home": home})
    own = home / "tmem.db"
    if chosen.database_url and own.exists() and chosen.database_url != f"sqlite:///{own}":
        raise ConfigError(
            f"--dir {home} holds its own store ({own}), but --database-url / TMEM_DATABASE_URL names another "
            f"(a {chosen.database_url.split(':', 1)[0]} store). Unset TMEM_DATABASE_URL (or drop --database-url) to use the "
            "directory's store, or drop --dir to use the URL's."
        )
    return chosen


def use_home(app: AppContext, home: Path | None) -> None:
    """Point ``app`` at the memory directory ``home`` when a subcommand's ``--dir`` gave one (:func:`with_home`)."""
    if home is not None:
        app.close()
        app.settings = with_home(app.settings, home)


def echo_json(payload: Any) -> None:
    """Stable JSON output: sorted keys, ISO dates, two-space indent."""
    click.echo(json.dumps(payload, indent=2, sort_keys=True, default=str, ensure_ascii=False))
