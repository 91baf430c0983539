"""Streamable HTTP for the tool servers: bearer tokens mapped to principals and scopes.

Token file: one token per line, `TOKEN PRINCIPAL SCOPES` separated by whitespace, SCOPES a
comma list (`read,write`); blank lines and `#` comments are ignored. A request without a
valid token gets HTTP 401 from the SDK's bearer middleware; a valid token's scopes are
intersected with the server's grant by the gate (`protocol.gate.Gate`).

The file is refused when anyone but its owner may write it (they could add a token of their
own), when a token is shorter than 16 characters (guessable) or appears twice (two principals
behind one secret), and when it is not UTF-8; a file others may read is served with a warning.
"""

import asyncio
import contextlib
import hmac
import logging
import os
import secrets
import socket
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import uvicorn
from anyio.abc import TaskStatus
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.types import ASGIApp

from tool_servers.protocol.scopes import Scope, format_scopes, parse_scopes

MCP_PATH = "/mcp"
MIN_TOKEN_CHARS = 16
log = logging.getLogger(__name__)


class TokenFileError(ValueError):
    """The token file is missing or malformed; the message names the line."""


@dataclass(frozen=True)
class TokenGrant:
    principal: str
    scopes: frozenset[Scope]


class TokenTable:
    """Bearer tokens → grants; implements the SDK's `TokenVerifier` protocol."""

    def __init__(self, grants: dict[str, TokenGrant]) -> None:
        self._grants = dict(grants)

    @classmethod
    def from_file(cls, path: Path) -> "TokenTable":
        """Read a token file.

        Raises:
            TokenFileError: The file cannot be read, a line is malformed, or it holds no token.
        """
        try:
            mode = os.stat(path).st_mode
            data = Path(path).read_bytes()
        except OSError as exc:
            raise TokenFileError(f"cannot read token file {path}: {exc.strerror}") from exc
        _check_mode(path, mode)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TokenFileError(
                f"token file {path} is not UTF-8 text (byte {exc.start}); write it as "
                "'TOKEN PRINCIPAL SCOPES' lines"
            ) from None
        grants: dict[str, TokenGrant] = {}
        first_line: dict[str, int] = {}
        for lineno, raw in enumerate(text.splitlines(), start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            fields = line.split()
            if len(fields) != 3:
                raise TokenFileError(
                    f"{path}:{lineno}: expected 'TOKEN PRINCIPAL SCOPES', got {len(fields)} fields"
                )
            token, principal, scopes = fields
            if len(token) < MIN_TOKEN_CHARS:
                raise TokenFileError(
                    f"{path}:{lineno}: the token is {len(token)} characters; use at least "
                    f"{MIN_TOKEN_CHARS} random ones (e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
                )
            if token in first_line:
                raise TokenFileError(
                    f"{path}:{lineno}: the same token as line {first_line[token]}; give every principal its own"
                )
            first_line[token] = lineno
            try:
                grants[token] = TokenGrant(principal, parse_scopes(scopes))
            except ValueError as exc:
                raise TokenFileError(f"{path}:{lineno}: {exc}") from exc
        if not grants:
            raise TokenFileError(f"token file {path} holds no token")
        return cls(grants)

    async def verify_token(self, token: str) -> AccessToken | None:
        # Compare against every entry in constant time so timing does not leak a prefix.
        found: TokenGrant | None = None
        for candidate, grant in self._grants.items():
            if hmac.compare_digest(candidate.encode(), token.encode()):
                found = grant
        if found is None:
            return None
        return AccessToken(token=token, client_id=found.principal, scopes=[s.value for s in found.scopes])

    def dump(self) -> str:
        """The table in token-file format (for `codeloop serve` writing generated tokens)."""
        return "".join(
            f"{token} {g.principal} {format_scopes(g.scopes)}\n" for token, g in self._grants.items()
        )

    def describe(self) -> str:
        return ", ".join(f"{g.principal}[{format_scopes(g.scopes)}]" for g in self._grants.values())


def _check_mode(path: Path, mode: int) -> None:
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise TokenFileError(
            f"token file {path} is writable by group or others (mode {stat.S_IMODE(mode):04o}), so "
            f"anyone who may write it can grant themselves access; run `chmod 600 {path}`"
        )
    if mode & stat.S_IROTH:
        log.warning(
            "token file %s is readable by every local user (mode %04o); `chmod 600 %s` keeps its tokens yours",
            path,
            stat.S_IMODE(mode),
            path,
        )


def new_token() -> str:
    """A fresh random bearer token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def http_app(server: MCPServer[object], *, host: str) -> Starlette:
    """The Starlette app serving `server` at `/mcp` (DNS-rebinding protection on loopback hosts)."""
    return server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)


class _CancelledAtShutdown(logging.Filter):
    """uvicorn logs a request its graceful shutdown cancelled (a tool call still running at
    Ctrl-C) as "Exception in ASGI application" with a 40-frame traceback; it is no fault, so say
    it in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError):
            record.msg, record.args, record.exc_info = (
                "a tool call still running at shutdown was cancelled",
                (),
                None,
            )
            record.exc_text = None  # the redacting record factory formatted the traceback already
        return True


def _quiet_shutdown_cancellations() -> None:
    error_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _CancelledAtShutdown) for f in error_log.filters):
        error_log.addFilter(_CancelledAtShutdown())


class _Server(uvicorn.Server):
    """uvicorn that reports its bound port once listening."""

    on_started: Callable[[int], None] = staticmethod(lambda port: None)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            port = self.servers[0].sockets[0].getsockname()[1]
            self.on_started(port)

    def install_signal_handlers(self) -> None:
        # Cancellation, not signals, stops us: the caller owns the task group.
        pass

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # uvicorn >= 0.29 swaps in its own SIGINT/SIGTERM handlers while serving and re-raises
        # the signal on exit: with several servers in one process, one Ctrl-C became two (the
        # second meaning "stop now"). The process's owner handles signals and cancels us.
        yield


async def serve_http(
    server: MCPServer[object],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `server` over streamable HTTP until cancelled; `task_status.started(url)` once listening.

    `port=0` picks a free port; the URL passed to `started` carries the real one.
    """
    url_host = f"[{host}]" if ":" in host else host
    await serve_asgi(
        http_app(server, host=host),
        host=host,
        port=port,
        on_started=lambda bound: task_status.started(f"http://{url_host}:{bound}{MCP_PATH}"),
    )


async def serve_asgi(
    app: ASGIApp,
    *,
    host: str,
    port: int,
    on_started: Callable[[int], None],
    lifespan: str = "on",
    access_log: bool = True,
) -> None:
    """Serve the ASGI `app` with uvicorn until cancelled; `on_started(port)` once listening.
    `access_log=False`: no request line is ever logged (an address may carry a secret).

    Raises:
        OSError: it cannot listen on `host:port`.
    """
    _quiet_shutdown_cancellations()
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan=lifespan,  # pyright: ignore[reportArgumentType] - callers pass "on" or "off", uvicorn's literals
        timeout_graceful_shutdown=2,
        interface="asgi3",
        access_log=access_log,
    )
    uv = _Server(config)
    uv.on_started = on_started

    async def run() -> None:
        # Shielded so that on cancellation uvicorn still runs its own shutdown (closing the
        # listening socket and open streams) once `should_exit` is set below.
        with anyio.CancelScope(shield=True):
            try:
                await uv.serve()
            except SystemExit as exc:  # uvicorn exits the process when it cannot bind
                raise OSError(f"cannot serve on {host}:{port} (see the log above)") from exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        try:
            await anyio.sleep_forever()
        finally:
            uv.should_exit = True
