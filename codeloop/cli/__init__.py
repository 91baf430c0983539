"""The `codeloop` command: one Typer app; each area's commands in a module of this package.

Adding a command is one module and one line: write `codeloop/cli/AREA.py` with the command
functions and a `register(app)` that adds them (`app.command()(fn)`, or `app.add_typer(...)` for
a group such as `codeloop config ...`), then add `"AREA"` to `AREAS` below: its place there is
its place in `codeloop --help`. Options that belong together are typed groups
(`codeloop.cli.option_groups`); a task's options are `TaskOptions` (`codeloop.cli.task_options`),
the NATS options `Connection` (`codeloop.cli.connection`).

Command modules import their heavy dependencies (torch, lancedb, mcp, nats, the agents) inside
the command functions, so `codeloop --help` and the light commands start in well under a second.
"""

import importlib
import os
from typing import Annotated

import typer

from codeloop import __version__

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    help="codeloop: a coding agent as a distributed system (agents on NATS JetStream, "
    "tools as MCP servers, code in gVisor sandboxes).",
)


def _print_version(requested: bool) -> None:
    if requested:
        typer.echo(__version__)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """codeloop: a coding agent as a distributed system."""

    from redaction import install_log_redaction

    # Before any command logs: no record of this process, from any library, carries a secret.
    install_log_redaction()
    # No library prints into codeloop's interface: pydantic-ai's first-run banner would land in the
    # live view of every terminal run with a model, here and in every worker process started from
    # here (the agents also turn it off in-process: `agents.models.adapter.silence_library_banner`).
    os.environ.setdefault("PYDANTIC_AI_NO_BANNER", "1")


@app.command()
def version() -> None:
    """Print codeloop's version."""
    typer.echo(__version__)


AREAS = (
    "serve",
    "console",
    "tasks",
    "run",
    "continuing",
    "control",
    "replay",
    "trace",
    "eval",
    "swebench",
    "verify",
    "sandbox",
    "env",
    "search",
    "mcp",
    "audit",
    "doctor",
    "config",
    "usage",
    "roles",
)
"""Every command module of this package, by name, in the order `codeloop --help` lists their
commands (typer lists the command groups, `sandbox`, `audit`, `config`, after the single ones)."""

for _area in AREAS:
    importlib.import_module(f"codeloop.cli.{_area}").register(app)


def main() -> None:
    """The `codeloop` entry point."""
    app()
