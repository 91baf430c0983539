"""Who may use the console: access tokens, the principal and grant each maps to, and browser sessions.

A token is a secret a person pastes once (the URL `codeloop console` prints carries it as
`?token=`, as Jupyter's does); the console answers with a session cookie and sends the browser
on to the same page without the token, so it stays out of history, bookmarks and `Referer`.

- The generated token (written 0600 to the state directory at every start) maps to principal
  `serve`, an operator: whoever started the serve sees every task, as `codeloop status` shows
  them; its scopes are the serve's `--mcp-scopes`, so it submits what the hosted tasks server
  would let it.
- `--console-token-file FILE` replaces it: one `TOKEN PRINCIPAL SCOPES` line per person, the
  tool servers' token-file format, where SCOPES may also name `operator` (sees and touches every
  principal's tasks). Anyone else sees and touches only the tasks they submitted.

The session cookie is not the token: it is an HMAC of the token under a key made at start, so it
dies with the process (or when its token leaves the file's table) and leaks no token. The CSRF
token of a session is another HMAC of it; a page carries it, a cross-site page cannot read it.
"""

import hashlib
import hmac
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from bus.credentials import write_private
from layout import CONSOLE_TOKEN
from tool_servers.protocol.scopes import Scope, format_scopes, parse_scopes

OPERATOR = "operator"
"""The pseudo-scope of a token whose principal sees and touches every task."""
GENERATED_PRINCIPAL = "serve"
"""The generated token's principal: the hosted tasks server's own, so its tasks show too."""
MIN_TOKEN_CHARS = 16


class AccessFileError(ValueError):
    """The console's token file is unreadable or malformed; the message names the line."""


@dataclass(frozen=True)
class Grant:
    """What a token lets its holder do."""

    principal: str
    scopes: frozenset[Scope]
    """Bound the mode of the tasks it submits: write needs `write`, execute needs `execute`."""
    operator: bool = False
    """Sees and touches every principal's tasks."""

    def describe(self) -> str:
        extra = ",operator" if self.operator else ""
        return f"{self.principal} [{format_scopes(self.scopes)}{extra}]"


class AccessTable:
    """Tokens -> grants, and the sessions and CSRF tokens derived from them."""

    def __init__(self, grants: dict[str, Grant], *, key: bytes | None = None) -> None:
        if not grants:
            raise AccessFileError("the console needs at least one token")
        self._grants = dict(grants)
        self._key = key or secrets.token_bytes(32)

    @classmethod
    def generated(cls, scopes: frozenset[Scope]) -> tuple["AccessTable", str]:
        """A fresh random token for the operator `serve` with `scopes`: (table, token)."""
        token = secrets.token_urlsafe(32)
        return cls({token: Grant(GENERATED_PRINCIPAL, scopes, operator=True)}), token

    @classmethod
    def from_file(cls, path: Path) -> "AccessTable":
        """Read `TOKEN PRINCIPAL SCOPES` lines (SCOPES may include `operator`).

        Raises:
            AccessFileError: unreadable, writable by others, a line malformed, a short or repeated
                token, or no token at all.
        """
        try:
            mode = os.stat(path).st_mode
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise AccessFileError(f"cannot read the console's token file {path}: {exc}") from None
        if mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise AccessFileError(
                f"{path} is writable by group or others (mode {stat.S_IMODE(mode):04o}): anyone who may "
                f"write it can grant themselves access; run `chmod 600 {path}`"
            )
        grants: dict[str, Grant] = {}
        for lineno, raw in enumerate(text.splitlines(), start=1):
            line = raw.split("#", 1)[0].strip()
            if line:
                token, grant = _parse_line(path, lineno, line)
                if token in grants:
                    raise AccessFileError(f"{path}:{lineno}: a token repeated; give every principal its own")
                grants[token] = grant
        if not grants:
            raise AccessFileError(f"{path} holds no token: add a line 'TOKEN PRINCIPAL SCOPES'")
        return cls(grants)

    def grant_of_token(self, token: str) -> Grant | None:
        # Every entry is compared, in constant time, so timing tells nothing of a prefix.
        found = None
        for candidate, grant in self._grants.items():
            if hmac.compare_digest(candidate.encode(), token.encode()):
                found = grant
        return found

    def session_of(self, token: str) -> str:
        """The cookie value for a browser that showed `token`."""
        return hmac.new(self._key, b"session:" + token.encode(), hashlib.sha256).hexdigest()

    def grant_of_session(self, session: str) -> Grant | None:
        found = None
        for candidate, grant in self._grants.items():
            if hmac.compare_digest(self.session_of(candidate), session):
                found = grant
        return found

    def csrf_of(self, session: str) -> str:
        """The CSRF token of `session` (pages carry it; every action must send it back)."""
        return hmac.new(self._key, b"csrf:" + session.encode(), hashlib.sha256).hexdigest()

    def check_csrf(self, session: str, token: str) -> bool:
        return hmac.compare_digest(self.csrf_of(session), token)

    def describe(self) -> str:
        return ", ".join(g.describe() for g in self._grants.values())


def _parse_line(path: Path, lineno: int, line: str) -> tuple[str, Grant]:
    fields = line.split()
    if len(fields) != 3:
        raise AccessFileError(f"{path}:{lineno}: expected 'TOKEN PRINCIPAL SCOPES', got {len(fields)} fields")
    token, principal, scope_list = fields
    if len(token) < MIN_TOKEN_CHARS:
        raise AccessFileError(
            f"{path}:{lineno}: the token is {len(token)} characters; use at least {MIN_TOKEN_CHARS} "
            "random ones (`python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
        )
    names = [s.strip() for s in scope_list.split(",") if s.strip()]
    operator = OPERATOR in names
    try:
        scopes = parse_scopes(",".join(n for n in names if n != OPERATOR))
    except ValueError as exc:
        raise AccessFileError(f"{path}:{lineno}: {exc} (or {OPERATOR})") from None
    return token, Grant(principal, scopes, operator=operator)


def write_generated_token(state_dir: Path, token: str) -> Path:
    """`STATE_DIR/console-token` holding `token` alone, 0600 from the first byte; its path."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / CONSOLE_TOKEN
    write_private(path, token + "\n")
    return path


def remove_generated_token(path: Path, token: str) -> None:
    # A newer serve may have written its own token there since: leave that one.
    try:
        if path.read_text(encoding="utf-8").strip() == token:
            path.unlink()
    except OSError:
        pass
