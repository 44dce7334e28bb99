"""``tmem ui``: the memory viewer in a browser, over the local memory directory, on a loopback address."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tmem.cli.context import AppContext, dir_option, pass_app, use_home
from tmem.errors import ConfigError
from tmem.util.extras import require_extra

if TYPE_CHECKING:
    from fastapi import FastAPI

    from tmem.memory import Memory

LOOPBACK_NAMES = ("localhost",)
DEFAULT_PORT = 8777  # not tmem mcp's 8765 nor tmem serve's 8080: all three can run side by side


def _is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@click.command("ui")
@click.option("--host", default="127.0.0.1", show_default=True, help="Loopback address to listen on.")
@click.option(
    "--port", type=click.IntRange(min=0, max=65535), default=DEFAULT_PORT, show_default=True, help="Port (0: any)."
)
@dir_option("Memory directory to show")
@pass_app
def ui_cmd(app: AppContext, host: str, port: int, home: Path | None) -> None:
    """Open the memory viewer at http://HOST:PORT/ui/ (no key: it answers on this machine only)."""
    use_home(app, home)
    if not _is_loopback(host):
        raise ConfigError(
            f"tmem ui serves the memory without a key, so it listens on a loopback address only, not {host!r}. "
            "To share a memory over the network, run `tmem serve` (API keys, viewer at /ui)."
        )
    require_extra("viewer", "tmem ui")
    import uvicorn

    from tmem.memory import Memory
    from tmem.viewer import PREFIX

    if port == 0:  # pick the free port here, so that the printed address is the real one
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((host.strip("[]"), 0))
            port = int(probe.getsockname()[1])
    memory = Memory(app.store(), app.settings)
    memory.core.start_upkeep(app.settings.upkeep_seconds)  # pending erasures finish while the viewer runs
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"tmem viewer on http://{shown}:{port}{PREFIX}/ over {app.settings.store_place} (Ctrl+C stops it)")
    uvicorn.run(local_viewer(memory, host), host=host, port=port, log_level="warning")


def local_viewer(memory: Memory, host: str) -> FastAPI:
    """The local viewer answering to the loopback names and to the address it listens on (``--host 127.0.0.2``:
    browsers send ``Host: 127.0.0.2``)."""
    from tmem.viewer import LOCAL_HOSTS, create_local_app

    bare = host.strip("[]")
    return create_local_app(memory, allowed_hosts=(*LOCAL_HOSTS, bare, f"[{bare}]" if ":" in bare else bare))


def register(cli: click.Group) -> None:
    """Attach this module's commands to the top-level group."""
    cli.add_command(ui_cmd)
