"""How agents reach the tool servers: through MCP clients only, never by importing them.

The composition root (`codeloop/wiring.py`) builds a `ToolProvider`; an agent asks it for the
servers of one root under the scopes the task's mode grants and talks to each through an MCP
client — `mcp.Client(target)` for direct calls (retriever, verifier) or pydantic-ai's
`MCPToolset(target)` for a model's tool loop (planner, coder). A target is whatever both accept:
an in-process `MCPServer` instance (fast, same process), a streamable-HTTP URL, or a stdio
transport (a remote worker). Keeping the choice in one object is what lets the same agent code run
in-process in tests and against remote servers in a cluster.
"""

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias

from pydantic import JsonValue

if TYPE_CHECKING:
    from fastmcp.client.transports import ClientTransport
    from mcp import Client
    from mcp.server.mcpserver import MCPServer
    from mcp_types import CallToolResult

ServerName = Literal["fs", "search", "exec", "git"]
ScopeName = Literal["read", "write", "execute"]

MODE_SCOPES: dict[str, frozenset[ScopeName]] = {
    "read": frozenset({"read"}),
    "write": frozenset({"read", "write"}),
    "execute": frozenset({"read", "write", "execute"}),
}
"""What each task mode grants the coder: read tools; plus write_file/apply_patch; plus run_*."""


ToolTarget: TypeAlias = "MCPServer[object] | ClientTransport | HttpTarget | str"
"""Where a tool server is reached (see the module docstring): an in-process server, a transport
for a server in its own process (pydantic-ai's `MCPToolset` only: the coder's `fs` and `git`
over stdio), a workspace service's server, or a streamable-HTTP URL."""


class ToolProvider(Protocol):
    """Opens the tool servers of one root with a grant; see the module docstring."""

    def servers(
        self, root: Path, scopes: frozenset[str], *, index_dir: Path | None = None
    ) -> dict[str, ToolTarget]:
        """MCP targets of the servers for `root`, each granted `scopes` (tools outside them are
        neither listed nor callable); `index_dir` is where `search` keeps its index (default: the
        server's own choice). The caller owns the sessions it opens on them."""
        ...


@dataclass(frozen=True)
class HttpTarget:
    """A server reached over streamable HTTP with a bearer token (a workspace service's)."""

    url: str
    token: str
    before_call: Callable[[], Awaitable[None]] | None = field(default=None, compare=False)
    """Run before each tool call by the callers that honour it (the verifier's exec and example
    runs: it brings the remote tree up to the verifier's own copy first)."""

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def __repr__(self) -> str:  # the token stays out of logs and tracebacks
        return f"HttpTarget({self.url!r})"


class NotingClient:
    """An open `mcp.Client` whose `call_tool` results are noted for the step running
    (`agents.runtime.environments.note_tool_result`: the environment a test run used); the
    client itself is `client`."""

    def __init__(self, client: "Client") -> None:
        self.client = client

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, JsonValue] | None = None,
        read_timeout_seconds: float | None = None,
    ) -> "CallToolResult":
        from agents.runtime.environments import note_tool_result

        result = await self.client.call_tool(name, arguments, read_timeout_seconds)
        if not getattr(result, "is_error", False):
            note_tool_result(name, getattr(result, "structured_content", None))
        return result


@asynccontextmanager
async def mcp_client(target: ToolTarget) -> AsyncIterator[NotingClient]:
    """An open `mcp.Client` on `target` (a `NotingClient`): an `HttpTarget` over streamable HTTP
    with its token, an in-process server or a URL as `mcp.Client` takes it.

    Raises:
        TypeError: `target` is a transport, which only pydantic-ai's `MCPToolset` takes.
    """
    # Here, not at the top: the MCP client takes about 2 s to import, which every process that
    # imports the role runtime but never opens a session (`codeloop status`, `roles`) would pay.
    from mcp import Client
    from mcp.server.mcpserver import MCPServer

    if not isinstance(target, HttpTarget):
        if not isinstance(target, MCPServer | str):
            raise TypeError(f"an MCP client cannot open {target!r}: only a model's tool loop takes it")
        async with Client(target) as client:
            yield NotingClient(client)
        return
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers=target.headers(), timeout=httpx2.Timeout(30, read=None)) as http:
        async with Client(streamable_http_client(target.url, http_client=http)) as client:
            yield NotingClient(client)
