"""The user's own MCP servers as a task carries them (`[mcp_servers.NAME]`, `--mcp-config FILE`).

The submitting client resolves them from the user's configuration (never the repository's: a
repository must not make your agent start programs) and the task carries them to the worker that
runs the coder, which starts each one for the step and offers its tools as `NAME__TOOL` behind
codeloop's tool gate. Values of `env` and `headers` may name environment variables as `${VAR}`:
they are expanded by the process that starts the server, so a secret kept in the environment never
travels on the bus.
"""

from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from bus.messages import Message

ServerName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$", max_length=40)]
"""Letters and digits, with single `-` or `_` between them (a double `_` separates the server from
the tool in `NAME__TOOL`)."""
TOOL_SEPARATOR = "__"

McpScope = Literal["read", "write", "execute"]
Confirm = Literal["always", "never"] | list[str]


class McpServer(Message):
    """One of the user's MCP servers: how to reach it and how far its tools are trusted."""

    name: ServerName
    """The server's name; its tools are offered as `NAME__TOOL`."""
    command: str | None = Field(default=None, min_length=1)
    """stdio: the program to start (looked up on PATH)."""
    args: list[str] = []
    """stdio: its arguments."""
    env: dict[str, str] = {}
    """stdio: variables added to the minimal environment it gets (`${VAR}` expanded where it starts)."""
    url: str | None = Field(default=None, pattern=r"^https?://")
    """Streamable HTTP: the server's URL."""
    headers: dict[str, str] = {}
    """Streamable HTTP: request headers (`${VAR}` expanded where it is reached)."""
    scope: McpScope = "execute"
    """The least mode that offers its tools: `read` (every mode), `write` (write and execute), or
    `execute` (execute mode only; the default for a server that does not say)."""
    confirm: Confirm | None = None
    """`always`: every call asks a person; `never`: none does; a list: calls of those tools ask.
    None: `never` for a server declared `read`, else `always`."""
    timeout_s: float = Field(default=60.0, gt=0, le=3600)
    """One call's deadline; a call past it is a `timeout` tool error."""
    max_output_chars: int = Field(default=20_000, ge=100, le=1_000_000)
    """A call's output is cut to this many characters (and says so)."""

    @model_validator(mode="after")
    def _one_transport(self) -> "McpServer":
        if (self.command is None) == (self.url is None):
            raise ValueError(
                f"mcp server {self.name!r}: give either command (stdio) or url (Streamable HTTP)"
            )
        return self

    def asks(self, tool: str) -> bool:
        """Whether a call of `tool` waits for a person's yes."""
        confirm = (
            self.confirm if self.confirm is not None else ("never" if self.scope == "read" else "always")
        )
        if isinstance(confirm, list):
            return tool in confirm
        return confirm == "always"
