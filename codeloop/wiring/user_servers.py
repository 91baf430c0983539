"""The user's own MCP servers for the roles of this process (`agents.runtime.user_servers`).

Each step that asks starts the task's servers as relays (`tool_servers.relay`) behind the same
gate as codeloop's servers: the step's scopes, the configured confirmations, one audit log in the
home (`USER_MCP_AUDIT`, outside every workspace), redaction, deadlines and output caps. A stdio
server's stderr goes to `USER_MCP_LOGS/NAME.log` in the home.
"""

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from agents.messages import McpServer
from layout import USER_MCP_AUDIT, USER_MCP_LOGS
from tool_servers.protocol.audit import AuditLog
from tool_servers.protocol.scopes import Scope
from tool_servers.protocol.spec import ServerOptions
from tool_servers.relay.server import open_relays
from tool_servers.relay.upstream import UpstreamSpec


def upstream_spec(server: McpServer) -> UpstreamSpec:
    """The relay's view of one configured server, its default confirmation resolved."""
    confirm = (
        server.confirm if server.confirm is not None else ("never" if server.scope == "read" else "always")
    )
    return UpstreamSpec(
        name=server.name,
        command=server.command,
        args=tuple(server.args),
        env=dict(server.env),
        url=server.url,
        headers=dict(server.headers),
        scope=Scope(server.scope),
        confirm=frozenset(confirm) if isinstance(confirm, list) else confirm,
        timeout_s=server.timeout_s,
        max_output_chars=server.max_output_chars,
    )


class RelayedUserServers:
    """`agents.runtime.user_servers.UserServers` over relays; records and logs under `home`."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.audit = AuditLog(home / USER_MCP_AUDIT)

    @asynccontextmanager
    async def open(
        self, servers: Sequence[McpServer], scopes: frozenset[str], *, cwd: Path | None
    ) -> AsyncIterator[dict[str, Any]]:
        options = ServerOptions(
            scopes=frozenset(Scope(s) for s in scopes), principal="agent", audit=self.audit
        )
        specs = [upstream_spec(s) for s in servers]
        async with open_relays(specs, options, cwd=cwd, log_dir=self.home / USER_MCP_LOGS) as relays:
            yield dict(relays)
