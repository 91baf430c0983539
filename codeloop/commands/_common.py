"""Helpers the CLI command modules share."""

import typer


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print `error: MESSAGE` on stderr and return the exit to raise: `raise fail(...) from None`.

    The message is redacted: it may quote a URL with a password or a token the user passed."""
    from redaction import redact_text

    typer.echo(f"error: {redact_text(message)}", err=True)
    return typer.Exit(code)
