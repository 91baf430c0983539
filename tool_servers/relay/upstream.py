"""The connection to one of the user's MCP servers, owned by a task of its own.

`Upstream.run` starts the server (a program over stdio, or a Streamable HTTP URL), lists its tools
and holds the session open until `stop()`. The session lives in that task, not the caller's: when
the server dies, what breaks is that task's session, never the run that uses the tools (a
transport's task group failing would otherwise cancel whatever runs inside it). A call after that
— or to a server that never started — is a `ServerUnavailable` tool error naming the server.

Values of `env` and `headers` may name environment variables as `${VAR}`, expanded here, in the
process that starts the server: a secret kept in the environment never travels in a task.
"""

import math
import os
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import anyio
from anyio.abc import TaskStatus
from mcp_types import CallToolResult, Tool
from pydantic import JsonValue

from tool_servers.protocol.errors import InvalidArguments, ServerUnavailable, ToolTimeout
from tool_servers.protocol.scopes import Scope

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client._transport import Transport, TransportStreams

START_TIMEOUT_S = 60.0
"""A server gets this long to start and list its tools (`npx` may first fetch a package)."""
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class UpstreamSpec:
    """One of the user's servers as the relay needs it (the composition root builds it from the
    task's `McpServer`)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    scope: Scope = Scope.EXECUTE
    confirm: Literal["always", "never"] | frozenset[str] = "always"
    """`always`, `never`, or the tools whose calls ask a person."""
    timeout_s: float = 60.0
    max_output_chars: int = 20_000

    def asks(self, tool: str) -> bool:
        if isinstance(self.confirm, frozenset):
            return tool in self.confirm
        return self.confirm == "always"


def expand(value: str, environ: Mapping[str, str]) -> str:
    """`value` with each `${VAR}` replaced by the variable's value.

    Raises:
        InvalidArguments: a named variable is not set.
    """

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise InvalidArguments(f"${{{name}}} is not set in the environment of the process starting it")
        return environ[name]

    return _VARIABLE.sub(one, value)


class Upstream:
    """One server's session: `run` in a task group (`await tg.start(upstream.run)`), `call` from
    anywhere, `stop` to end it."""

    def __init__(
        self,
        spec: UpstreamSpec,
        *,
        cwd: Path | None = None,
        log_file: Path | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.spec = spec
        self.cwd = cwd
        self.log_file = log_file
        """Where a stdio server's stderr goes (None: discarded)."""
        self.environ = os.environ if environ is None else environ
        self.tools: list[Tool] = []
        self.problem: str | None = None
        """Why the server is not available (never started, or ended), for its tool errors."""
        self._client: Client | None = None
        self._stop = anyio.Event()

    def stop(self) -> None:
        self._stop.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Start the server and hold its session until `stop()`; reports started once its tools
        are listed, or once it failed to start (then `problem` says why). Never raises."""
        started = False
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + START_TIMEOUT_S) as starting:
                async with self._connected() as client:
                    self.tools = await _list_tools(client)
                    starting.deadline = math.inf
                    self._client = client
                    started = True
                    task_status.started()
                    await self._stop.wait()
            if starting.cancelled_caught:
                self.problem = f"it did not start and list its tools within {START_TIMEOUT_S:.0f} s"
        except InvalidArguments as exc:
            self.problem = exc.message
        except Exception as exc:  # the server's failure is reported by its tools, never raised
            self.problem = _describe(exc)
        finally:
            self._client = None
            if self.problem is None and not self._stop.is_set():
                self.problem = "it stopped"
            if not started:
                task_status.started()

    def _connected(self) -> "Client":
        # Here, not at the top: the MCP client is heavy and only runs with user servers.
        from mcp import Client

        return Client(self._target(), mode="legacy")

    def _target(self) -> "Transport":
        spec = self.spec
        if spec.url is not None:
            headers = {k: expand(v, self.environ) for k, v in spec.headers.items()}
            return _http_transport(spec.url, headers)
        assert spec.command is not None  # a spec has a url or a command (McpServer checks it)
        env = {k: expand(v, self.environ) for k, v in spec.env.items()}
        return _stdio_transport(spec.command, spec.args, env, cwd=self.cwd, log_file=self.log_file)

    async def call(self, tool: str, arguments: dict[str, JsonValue]) -> CallToolResult:
        """Call `tool` with `arguments` under the server's deadline.

        Raises:
            ServerUnavailable: the server is not running, or the call failed in transport.
            ToolTimeout: no answer within the deadline.
        """
        client = self._client
        if client is None:
            raise ServerUnavailable(
                f"the {self.spec.name} MCP server is not available: {self.problem or 'it stopped'}",
                server=self.spec.name,
            )
        try:
            with anyio.fail_after(self.spec.timeout_s):
                result = await client.call_tool(tool, arguments)
        except TimeoutError:
            raise ToolTimeout(
                f"{self.spec.name}__{tool} did not answer within {self.spec.timeout_s:g} s",
                server=self.spec.name,
            ) from None
        except Exception as exc:
            raise ServerUnavailable(
                f"the {self.spec.name} MCP server failed during the call ({_describe(exc)}); "
                "it may have stopped",
                server=self.spec.name,
            ) from None
        if not isinstance(result, CallToolResult):
            raise ServerUnavailable(f"the {self.spec.name} MCP server answered {type(result).__name__}")
        return result


async def _list_tools(client: "Client") -> list[Tool]:
    tools: list[Tool] = []
    cursor = None
    while True:
        page = await client.list_tools(cursor=cursor) if cursor else await client.list_tools()
        tools.extend(page.tools)
        cursor = getattr(page, "next_cursor", None)
        if not cursor:
            return tools


@asynccontextmanager
async def _stdio_transport(
    command: str, args: tuple[str, ...], env: dict[str, str], *, cwd: Path | None, log_file: Path | None
) -> AsyncIterator["TransportStreams"]:
    """The streams of a stdio server, its stderr appended to `log_file` (or discarded)."""
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=command, args=list(args), env=env, cwd=cwd)
    target = log_file if log_file is not None else Path(os.devnull)
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as streams:
            yield streams


@asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> AsyncIterator["TransportStreams"]:
    """The streams of a Streamable HTTP server, every request carrying `headers`."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=None)) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            yield streams


def _describe(exc: BaseException) -> str:
    """The innermost error of `exc` (transports wrap theirs in exception groups), in a line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__
