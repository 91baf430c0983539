"""The tool protocol's types: a tool's contract (`ToolSpec`), what its handler knows about a call
(`CallContext`), and how a server instance is exposed (`ServerOptions`).

A server is a list of `ToolSpec`s handed to `sdk.build_server`. Each spec declares its input and
output models (→ `inputSchema`/`outputSchema`), scope, risk and MCP annotations.
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from mcp.server.auth.provider import TokenVerifier
from mcp_types import ToolAnnotations
from pydantic import BaseModel, JsonValue

from tool_servers.protocol.audit import AuditLog
from tool_servers.protocol.scopes import ALL_SCOPES, Risk, Scope
from tool_servers.secret_files import DEFAULT_RULES, SecretRules


@dataclass(frozen=True)
class CallContext:
    """What a handler knows about the call besides its arguments."""

    server: str
    principal: str
    scopes: frozenset[Scope]
    trace_id: str


Args = TypeVar("Args", bound=BaseModel)
"""A tool's arguments model."""

Handler = Callable[[Args, CallContext], Awaitable[BaseModel]]


@dataclass(frozen=True)
class ToolSpec(Generic[Args]):
    """One tool: its contract (models, scope, risk, hints) and its handler. Generic in its arguments
    model, so `handler`, `confirm` and `ask` are checked against `input_model`."""

    name: str
    description: str
    scope: Scope
    input_model: type[Args]
    output_model: type[BaseModel]
    handler: Handler[Args]
    risk: Risk = Risk.LOW
    read_only: bool = True
    destructive: bool = False
    idempotent: bool = True
    confirm: Callable[[Args], str | None] | None = None
    """Given the validated arguments, what a high-risk call would do (asked to a human), or None."""
    uses_request: bool = False
    """The handler reaches the MCP request (progress notifications, the client's capabilities)
    through `sdk.current_request()`."""
    ask: Callable[[Args, CallContext], Awaitable[str | None]] | None = None
    """A question for the client's user before the handler runs, or None for none. Unlike
    `confirm` it is not a gate: the handler reads the reply through `sdk.current_reply()` and
    decides (used where the answer belongs to someone else, e.g. a task's pending confirmation)."""
    input_schema: dict[str, JsonValue] | None = None
    """The input schema clients see, when not `input_model`'s: a relayed tool's own (the gate then
    validates with `input_model`, which must accept what the schema allows)."""

    def confirmation_needed(self, args: Args) -> str | None:
        """The action a human must approve for this call, or None when the call may just run."""
        if self.confirm is not None:
            return self.confirm(args)
        if self.risk is Risk.HIGH:
            return f"call {self.name} (a high-risk tool)"
        return None

    @property
    def may_need_confirmation(self) -> bool:
        return self.confirm is not None or self.risk is Risk.HIGH

    def annotations(self) -> ToolAnnotations:
        return ToolAnnotations(
            read_only_hint=self.read_only,
            destructive_hint=self.destructive,
            idempotent_hint=self.idempotent,
            open_world_hint=False,
        )


def read_tool(
    name: str,
    description: str,
    input_model: type[Args],
    output_model: type[BaseModel],
    handler: Handler[Args],
) -> ToolSpec[Args]:
    """A read-scoped, low-risk, read-only tool: the shape most tools share."""
    return ToolSpec(
        name=name,
        description=description,
        scope=Scope.READ,
        input_model=input_model,
        output_model=output_model,
        handler=handler,
    )


@dataclass(frozen=True)
class ServerOptions:
    """How a server instance is exposed: grant, default principal, audit, HTTP auth."""

    scopes: frozenset[Scope] = ALL_SCOPES
    """Scopes granted to the server; over HTTP a token's scopes are intersected with these."""
    principal: str = "local"
    """Principal recorded for calls without a bearer token (stdio, in-memory)."""
    audit: AuditLog | None = None
    token_verifier: TokenVerifier | None = None
    """Set for streamable HTTP: requests without a valid bearer token get 401."""
    secrets: SecretRules = DEFAULT_RULES
    """Files no tool reads, lists, shows or indexes (`secret_files`)."""
