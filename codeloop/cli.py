"""The `codeloop` command: one Typer app, each area's commands in `codeloop/commands/<area>.py`.

Command modules import their heavy dependencies (torch, lancedb, mcp) inside the command
functions, so `codeloop --help` and the light commands start in well under a second.
"""

import typer

from codeloop.commands import bus, doctor, eval, mcp, run, sandbox, search

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="codeloop: a coding agent as a distributed system (agents on NATS JetStream, "
    "tools as MCP servers, code in gVisor sandboxes).",
)


@app.callback()
def _root() -> None:
    """codeloop: a coding agent as a distributed system."""


@app.command()
def version() -> None:
    """Print codeloop's version."""
    from codeloop import __version__

    typer.echo(__version__)


for _area in (bus, run, eval, sandbox, search, mcp, doctor):
    _area.register(app)


def main() -> None:
    app()
