"""`codeloop` commands for the bus area."""

import typer


def register(app: typer.Typer) -> None:
    """Add this area's commands to the root app."""
