"""Helpers the CLI command modules share."""

import errno
import sys
from pathlib import Path

import typer


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print `error: MESSAGE` on stderr and return the exit to raise: `raise fail(...) from None`.

    The message is redacted: it may quote a URL with a password or a token the user passed."""
    from redaction import redact_text

    typer.echo(f"error: {redact_text(message)}", err=True)
    return typer.Exit(code)


def os_error_message(exc: OSError, *, with_path: bool = True) -> str:
    """One line naming what failed on which path: `PATH: a file is where a directory must be`
    (without the path when the caller names it better)."""
    why = exc.strerror or str(exc)
    if exc.errno in (errno.EEXIST, errno.ENOTDIR):
        why = "a file is where a directory must be"
    return f"{exc.filename}: {why}" if exc.filename and with_path else why


def read_text_argument(value: str, *, what: str, max_bytes: int) -> str:
    """The text a command argument stands for: `-` reads stdin, `@FILE` reads FILE (UTF-8),
    `@@...` is the literal text `@...`; anything else is the text itself.

    A file or stdin (argv caps at 128 KiB) is read to at most `max_bytes` + 1 bytes, so an
    oversized input is refused without being read whole; the caller's own size check then names
    the limit. `what` names the argument in messages ("task text").

    Raises:
        typer.Exit: (2) the file cannot be read or is not UTF-8, after printing why.
    """
    if value.startswith("@@"):
        return value[1:]
    if value == "-":
        source, data = "stdin", sys.stdin.buffer.read(max_bytes + 1)
    elif value.startswith("@"):
        path = Path(value[1:]).expanduser()
        source = str(path)
        try:
            with path.open("rb") as file:
                data = file.read(max_bytes + 1)
        except OSError as exc:
            raise fail(f"cannot read the {what} from {path}: {exc.strerror or exc}", 2) from None
    else:
        return value
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if len(data) > max_bytes and exc.start > max_bytes - 3:
            # Cut mid-character at the read limit: oversized anyway, let the size check say so.
            return data[: exc.start].decode("utf-8") + "\ufffd"
        raise fail(f"the {what} in {source} is not UTF-8 text (byte {exc.start})", 2) from None
