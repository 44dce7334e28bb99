"""The ``tmem`` command line. Commands are grouped by noun; each group lives in its own module and registers here.

Errors derived from TmemError print one line (``Error: ...``) and exit 1, without a traceback.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import click

from tmem.cli.context import AppContext, with_home
from tmem.cli.terminal import protect
from tmem.errors import TmemError
from tmem.settings import Settings

# Where each command lives: a call imports only its own command module (a cold `tmem search` skips the other eleven;
# bench/results/cli_cold.md). `tmem --help` imports them all. tests/test_cli_lazy.py checks this table against what
# each module's register() adds.
COMMANDS: dict[str, str] = {
    "import": "ingest_cmds",
    "spaces": "ingest_cmds",
    "show": "ingest_cmds",
    "delete": "ingest_cmds",
    "erasures": "ingest_cmds",
    "messages": "item_cmds",
    "item": "item_cmds",
    "forget": "item_cmds",
    "llm": "llm_cmds",
    "build": "build_cmds",
    "check": "check_cmds",
    "search": "search_cmds",
    "ask": "eval_cmds",
    "demo": "eval_cmds",
    "eval": "eval_cmds",
    "ui": "ui_cmds",
    "keys": "keys_cmds",
    "serve": "serve_cmds",
    "mcp": "serve_cmds",
}


class _LazyGroup(click.Group):
    """Imports a command's module when the command is looked up (``COMMANDS``), not all of them at start."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            importlib.import_module(f"tmem.cli.{COMMANDS[cmd_name]}").register(self)
        return self.commands.get(cmd_name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--dir",
    "home",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="TMEM_HOME",
    default=None,
    help="Memory directory (env TMEM_HOME; default a per-user data dir).",
)
@click.option(
    "--database-url",
    envvar="TMEM_DATABASE_URL",
    default=None,
    help="Store URL: sqlite:///PATH or postgresql://USER:PASS@HOST/DB (env TMEM_DATABASE_URL; default tmem.db in --dir).",
)
@click.option(
    "--llm",
    type=click.Choice(["openai", "none"]),
    envvar="TMEM_LLM",
    default=None,
    help="'openai' for any OpenAI-compatible endpoint, 'none' for the extractive mode (env TMEM_LLM).",
)
@click.option("--llm-model", envvar="TMEM_LLM_MODEL", default=None, help="Construction model (env TMEM_LLM_MODEL).")
@click.version_option(package_name="tmem")
@click.pass_context
def cli(
    ctx: click.Context, home: Path | None, database_url: str | None, llm: str | None, llm_model: str | None
) -> None:
    """tmem: long-term conversational memory that anticipates, not archives."""
    overrides: dict[str, object] = {}
    typed_dir = ctx.get_parameter_source("home") is click.core.ParameterSource.COMMANDLINE
    if home is not None and not typed_dir:  # TMEM_HOME; a typed --dir goes through with_home (its conflict check)
        overrides["home"] = home
    if database_url is not None:
        overrides["database_url"] = database_url
    if llm is not None:
        overrides["llm"] = llm
    if llm_model is not None:
        overrides["llm_model"] = llm_model
        if llm is None:
            overrides.setdefault("llm", "openai")
    settings = Settings(**overrides)  # type: ignore[arg-type]
    app = AppContext(settings=with_home(settings, home) if typed_dir else settings)
    ctx.obj = app
    ctx.call_on_close(app.close)


def main() -> None:
    sys.stdout, sys.stderr = protect(sys.stdout), protect(sys.stderr)  # no escape sequence reaches a terminal
    try:
        rc = cli.main(standalone_mode=False)
        if isinstance(rc, int) and rc != 0:
            sys.exit(rc)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except TmemError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("Interrupted; rerun the same command to resume.", err=True)
        sys.exit(130)
