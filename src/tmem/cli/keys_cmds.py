"""``tmem keys create|list|revoke``: API keys of the HTTP service's tenants (stored hashed)."""

from __future__ import annotations

from pathlib import Path

import click

from tmem.cli.context import AppContext, echo_json, pass_app
from tmem.store.control import ControlStore

_DIR = click.option(
    "--dir",
    "home",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Memory directory served by `tmem serve` (overrides the global --dir).",
)


def _control(app: AppContext, home: Path | None) -> ControlStore:
    if home is not None:
        app.close()
        app.settings = app.settings.model_copy(update={"home": home, "database_url": None})
    return app.memory().core.control()


@click.group("keys")
def keys() -> None:
    """API keys for `tmem serve`: one tenant per key, the key stored hashed."""


@keys.command("create")
@click.argument("tenant")
@_DIR
@pass_app
def create(app: AppContext, tenant: str, home: Path | None) -> None:
    """Create a key for TENANT (created with its first key). The key is printed once, as the last line."""
    control = _control(app, home)
    try:
        record, key = control.create_key(tenant)
    finally:
        control.close()
    click.echo(f"Created key {record.id} for tenant {record.tenant!r}. Store it now: it is not shown again.")
    click.echo(key)


@keys.command("list")
@click.option("--tenant", default=None, help="Only this tenant's keys.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_DIR
@pass_app
def list_keys(app: AppContext, tenant: str | None, as_json: bool, home: Path | None) -> None:
    """List keys (ids, tenants, times; never the keys)."""
    control = _control(app, home)
    try:
        rows = control.keys(tenant)
    finally:
        control.close()
    if as_json:
        echo_json([r.model_dump() for r in rows])
        return
    if not rows:
        click.echo("No keys yet: `tmem keys create TENANT`.")
    for r in rows:
        state = f"revoked {r.revoked_at}" if r.revoked_at else "active"
        click.echo(f"{r.id}  {r.tenant}  created {r.created_at}  {state}")


@keys.command("revoke")
@click.argument("key_id")
@_DIR
@pass_app
def revoke(app: AppContext, key_id: str, home: Path | None) -> None:
    """Revoke a key by its id (or the whole key); requests with it answer 401 from then on."""
    from tmem.store.control import key_id_of

    control = _control(app, home)
    try:
        record = control.revoke_key(key_id_of(key_id) or key_id)
    finally:
        control.close()
    click.echo(f"Revoked key {record.id} of tenant {record.tenant!r} ({record.revoked_at}).")


def register(cli: click.Group) -> None:
    cli.add_command(keys)
