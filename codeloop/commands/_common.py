"""Helpers the CLI command modules share."""

import typer


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print `error: MESSAGE` on stderr and return the exit to raise: `raise fail(...) from None`."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)
