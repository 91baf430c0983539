"""The `codeloop` command: one Typer app, each area's commands in `codeloop/commands/<area>.py`.

Command modules import their heavy dependencies (torch, lancedb, mcp) inside the command
functions, so `codeloop --help` and the light commands start in well under a second.
"""

from typing import Annotated

import typer

from codeloop.commands import (
    config,
    doctor,
    env,
    eval,
    mcp,
    replay,
    roles,
    run,
    sandbox,
    search,
    serve,
    swebench,
    tasks,
    trace,
)

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="codeloop: a coding agent as a distributed system (agents on NATS JetStream, "
    "tools as MCP servers, code in gVisor sandboxes).",
)


def _print_version(requested: bool) -> None:
    if requested:
        from codeloop import __version__

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


@app.command()
def version() -> None:
    """Print codeloop's version."""
    from codeloop import __version__

    typer.echo(__version__)


for _area in (
    serve,
    tasks,
    run,
    replay,
    trace,
    eval,
    swebench,
    sandbox,
    env,
    search,
    mcp,
    doctor,
    config,
    roles,
):
    _area.register(app)


def main() -> None:
    app()
