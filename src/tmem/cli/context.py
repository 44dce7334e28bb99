"""State shared by CLI commands: the settings and a lazily opened store."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import click

from tmem.settings import Settings
from tmem.store.base import Store


@dataclass
class AppContext:
    settings: Settings
    _store: Store | None = field(default=None, repr=False)

    def store(self) -> Store:
        if self._store is None:
            from tmem.store import open_store

            self._store = open_store(self.settings.store_url)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


pass_app = click.make_pass_decorator(AppContext)


def echo_json(payload: Any) -> None:
    """Stable JSON output: sorted keys, ISO dates, two-space indent."""
    click.echo(json.dumps(payload, indent=2, sort_keys=True, default=str, ensure_ascii=False))
