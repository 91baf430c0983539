"""The address that opens the console: its URL with the generated token, for `serve` and `codeloop console`."""

from pathlib import Path
from urllib.parse import quote

from codeloop.config.serve_note import ConsoleNote


def generated_token(note: ConsoleNote) -> str | None:
    """The token serve generated (read from its 0600 file), or None when tokens come from the user's file."""
    if not note.generated:
        return None
    try:
        return Path(note.token_file).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def console_link(note: ConsoleNote) -> str:
    """`http://HOST:PORT/?token=TOKEN` with the generated token, else the bare URL."""
    token = generated_token(note)
    return f"{note.url}?token={quote(token)}" if token else note.url
