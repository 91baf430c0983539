"""Helpers the CLI command modules share, among them the one way a command fails.

Exit codes (README "Exit codes"): 0 success; `EXIT_FAILURE` (1) the command could not do what
was asked (a task failed, NATS unreachable, storage broken, a check found a problem);
`EXIT_USAGE` (2) the command line or an input it names is wrong (a bad option value, a path that
is not a directory, an unreadable task file). A few commands add codes of their own, named where
they are defined: `run`, `watch` and `replay` 3 handed off and 4 cancelled
(`codeloop.cli.run.EXIT_CODES`), `sandbox exec` the command's own status, 124, 125 and 137;
130 after Ctrl-C.
"""

import errno
import getpass
import sys
from pathlib import Path
from typing import BinaryIO

import typer

EXIT_FAILURE = 1
EXIT_USAGE = 2


def fail(message: str, code: int = EXIT_FAILURE) -> typer.Exit:
    """Print `error: MESSAGE` on stderr and return the exit to raise: `raise fail(...) from None`.

    The message says what was wrong and what to do about it. It is redacted: it may quote a URL
    with a password or a token the user passed."""
    from redaction import redact_text

    typer.echo(f"error: {redact_text(message)}", err=True)
    return typer.Exit(code)


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """`1 file`, `2 files`, `0 files` (thousands separated): a count with its noun agreeing."""
    return f"{count:,} {noun if count == 1 else (plural_form or noun + 's')}"


def approver(how: str) -> str:
    """Who answers a confirmation from this process, for the task's record: `alice with codeloop
    approve`. The login name is what a person at this machine is known by; nothing secret."""

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's)
        user = "a person"
    return f"{user} {how}"


def usage_error(message: str) -> typer.Exit:
    """`fail` with `EXIT_USAGE`: the command line (or a file it names) is what must change."""
    return fail(message, EXIT_USAGE)


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
    oversized input is refused without being held whole; the refusal names its real size and the
    limit. `what` names the argument in messages ("task text").

    Raises:
        typer.Exit: (2) the file cannot be read, is over `max_bytes` or is not UTF-8, after
            printing why.
    """
    if value.startswith("@@"):
        return value[1:]
    if value == "-":
        source, data = "stdin", sys.stdin.buffer.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise _oversized(what, source, len(data) + _count_rest(sys.stdin.buffer), max_bytes)
    elif value.startswith("@"):
        path = Path(value[1:]).expanduser()
        source = str(path)
        try:
            with path.open("rb") as file:
                data = file.read(max_bytes + 1)
                if len(data) > max_bytes:
                    raise _oversized(what, source, len(data) + _count_rest(file), max_bytes)
        except OSError as exc:
            raise usage_error(f"cannot read the {what} from {path}: {exc.strerror or exc}") from None
    else:
        return value
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if len(data) > max_bytes and exc.start > max_bytes - 3:
            # Cut mid-character at the read limit: oversized anyway, let the size check say so.
            return data[: exc.start].decode("utf-8") + "\ufffd"
        raise usage_error(f"the {what} in {source} is not UTF-8 text (byte {exc.start})") from None


def _count_rest(stream: BinaryIO) -> int:
    """How many bytes are left in `stream`, read in pieces and dropped: the real size of an
    oversized input (a pipe has no size to ask for)."""
    total = 0
    while piece := stream.read(1 << 20):
        total += len(piece)
    return total


def _oversized(what: str, source: str, size: int, max_bytes: int) -> typer.Exit:
    return usage_error(
        f"the {what} in {source} is {size:,} bytes ({size / 1024:,.0f} KiB); the limit is {max_bytes:,} "
        f"bytes ({max_bytes // 1024} KiB): put large material in the repository and refer to it"
    )
