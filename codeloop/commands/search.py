"""`codeloop` commands for the search area."""

import typer


def register(app: typer.Typer) -> None:
    """Add this area's commands to the root app."""
