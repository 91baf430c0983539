"""The user's own MCP servers for one step: started by the composition root, used through MCP.

A task carries the servers (`TaskSubmitted.mcp_servers`); the coder asks for `USER_SERVERS` in its
definition and opens them for its step with `open_user_servers`, which yields an MCP target per
server (a relay behind codeloop's tool gate: scopes, confirmation, audit, redaction, deadline and
output cap), to be given to the model as toolsets beside codeloop's own. Servers the step's grant
does not cover are not started. Without the capability (a worker whose composition root supplies
none), the servers are left out and a warning says so.
"""

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Protocol

from agents.messages import McpServer, TaskSubmitted
from agents.runtime.role import Capability, RoleDeps
from agents.runtime.tools import ToolTarget

log = logging.getLogger("codeloop.agents")


class UserServers(Protocol):
    def open(
        self, servers: Sequence[McpServer], scopes: frozenset[str], *, cwd: Path | None
    ) -> AbstractAsyncContextManager[dict[str, ToolTarget]]:
        """Start the `servers` that `scopes` cover (working directory `cwd`) and yield an MCP
        target of each by name; stop them on exit."""
        ...


USER_SERVERS: Capability[UserServers] = Capability("user_mcp_servers")


@asynccontextmanager
async def open_user_servers(
    deps: RoleDeps, task: TaskSubmitted, scopes: frozenset[str], *, cwd: Path | None
) -> AsyncIterator[dict[str, ToolTarget]]:
    """The task's MCP servers for this step, by name (empty when it has none or nothing here
    can start them)."""
    opener = deps.get(USER_SERVERS)
    if not task.mcp_servers:
        yield {}
        return
    if opener is None:
        names = ", ".join(s.name for s in task.mcp_servers)
        log.warning("the task's MCP servers (%s) are left out: this worker cannot start them", names)
        yield {}
        return
    async with opener.open(task.mcp_servers, scopes, cwd=cwd) as targets:
        yield targets
