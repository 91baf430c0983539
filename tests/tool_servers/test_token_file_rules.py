"""Token files that would let someone else in, or that cannot be read as meant, are refused."""

import logging
from pathlib import Path

import pytest

from tool_servers.protocol.http import TokenFileError, TokenTable

GOOD = "Zq8vN3kL0pR6tY2wX9cB5mHa"


def _file(tmp_path: Path, text: str | bytes, mode: int = 0o600) -> Path:
    path = tmp_path / "tokens"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666])
def test_a_token_file_others_may_write_is_refused(tmp_path: Path, mode: int) -> None:
    """Whoever may write the file may add a token of their own: group- or world-writable is refused."""
    with pytest.raises(TokenFileError, match="writable by group or others.*chmod 600"):
        TokenTable.from_file(_file(tmp_path, f"{GOOD} alice read\n", mode))


def test_a_world_readable_token_file_is_served_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Readable by every local user is a warning, not a refusal (the owner may mean it)."""
    with caplog.at_level(logging.WARNING, logger="tool_servers.protocol.http"):
        table = TokenTable.from_file(_file(tmp_path, f"{GOOD} alice read\n", 0o644))
    assert "readable by every local user" in caplog.text and table.describe() == "alice[read]"


def test_tokens_shorter_than_16_characters_are_refused(tmp_path: Path) -> None:
    """A short token can be guessed; the message says how to make a good one."""
    with pytest.raises(TokenFileError, match=r"tokens:2: the token is 6 characters; use at least 16"):
        TokenTable.from_file(_file(tmp_path, f"{GOOD} alice read\nabc123 bob read\n"))


def test_a_token_listed_twice_is_refused(tmp_path: Path) -> None:
    """One secret behind two principals makes the audit log's principal meaningless."""
    with pytest.raises(TokenFileError, match="tokens:3: the same token as line 1"):
        TokenTable.from_file(_file(tmp_path, f"{GOOD} alice read\n# c\n{GOOD} bob read,write\n"))


def test_a_token_file_that_is_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    """Latin-1 or binary content is named as such, not a UnicodeDecodeError traceback."""
    with pytest.raises(TokenFileError, match="is not UTF-8 text"):
        TokenTable.from_file(_file(tmp_path, b"\xff\xfe" + GOOD.encode() + b" alice read\n"))


def test_a_good_token_file_maps_tokens_to_principals(tmp_path: Path) -> None:
    """The rules leave an owner-only file of long distinct tokens working."""
    table = TokenTable.from_file(_file(tmp_path, f"{GOOD} alice read\n{GOOD[::-1]} bob read,write\n"))
    assert table.describe() == "alice[read], bob[read,write]"
