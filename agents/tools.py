"""How agents reach the tool servers: through MCP clients only, never by importing them.

The composition root (`codeloop/wiring.py`) builds a `ToolProvider`; an agent asks it for the
servers of one root under the scopes the task's mode grants and talks to each through an MCP
client — `mcp.Client(target)` for direct calls (retriever, verifier) or pydantic-ai's
`MCPToolset(target)` for a model's tool loop (planner, coder). A target is whatever both accept:
an in-process `MCPServer` instance (fast, same process), a streamable-HTTP URL, or a stdio
transport (a remote worker). Keeping the choice in one object is what lets the same agent code run
in-process in tests and against remote servers in a cluster.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

ServerName = Literal["fs", "search", "exec", "git"]
ScopeName = Literal["read", "write", "execute"]

MODE_SCOPES: dict[str, frozenset[ScopeName]] = {
    "read": frozenset({"read"}),
    "write": frozenset({"read", "write"}),
    "execute": frozenset({"read", "write", "execute"}),
}
"""What each task mode grants the coder: read tools; plus write_file/apply_patch; plus run_*."""


class ToolProvider(Protocol):
    """Opens the tool servers of one root with a grant; see the module docstring."""

    def servers(
        self, root: Path, scopes: frozenset[ScopeName], *, index_dir: Path | None = None
    ) -> dict[ServerName, Any]:
        """MCP targets of the servers for `root`, each granted `scopes` (tools outside them are
        neither listed nor callable); `index_dir` is where `search` keeps its index (default: the
        server's own choice). The caller owns the sessions it opens on them."""
        ...


@dataclass(frozen=True)
class HttpTarget:
    """A server reached over streamable HTTP with a bearer token (a workspace service's)."""

    url: str
    token: str

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def __repr__(self) -> str:  # the token stays out of logs and tracebacks
        return f"HttpTarget({self.url!r})"
