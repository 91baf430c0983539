"""Typed failures of a tool call, and their wire form.

    ToolServerError                  base: `type`, `message`, `details`
    ├── PermissionDenied             permission_denied: missing scope, confinement, user declined
    ├── InvalidArguments             invalid_arguments: schema or semantic validation failed
    ├── NotFound                     not_found
    ├── Conflict                     conflict: a patch hunk does not apply, a ref moved
    ├── ToolTimeout                  timeout (also a `TimeoutError`)
    ├── SandboxError                 sandbox_error: the sandbox itself failed
    ├── NeedsConfirmation            needs_confirmation: high-risk call, client cannot elicit
    ├── ServerUnavailable            unavailable: a server this one relays to is down or died
    ├── (relay) RelayedToolError     tool_error: a relayed tool answered with an error
    └── InternalError                internal_error: a bug in the server; details hidden

These are for the *model*: they become MCP error results (`is_error=True`) whose structured
content is an `ErrorBody`, so a client acts on `type` instead of parsing prose. Protocol
violations stay `MCPError` (the SDK's other plane).
"""

from typing import ClassVar, Literal

from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict, JsonValue

ErrorType = Literal[
    "permission_denied",
    "invalid_arguments",
    "not_found",
    "conflict",
    "timeout",
    "sandbox_error",
    "needs_confirmation",
    "unavailable",
    "tool_error",
    "internal_error",
]

TRACE_META_KEY = "codeloop/trace_id"
"""Key of the trace id in every result's `_meta` (and accepted in a request's `_meta`)."""


class ErrorBody(BaseModel):
    """The structured content of every error result."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    type: ErrorType
    """Machine-readable failure class; stable across versions."""
    message: str
    """What went wrong and what to do about it, for the model or a person."""
    details: dict[str, JsonValue] = {}
    """Facts the caller can act on (missing scope, failing hunk, offending path...)."""
    trace_id: str
    """The call's trace id, also in the result's `_meta`."""


class ToolServerError(Exception):
    """Base of every expected tool-call failure."""

    type: ClassVar[ErrorType] = "internal_error"

    def __init__(self, message: str, **details: JsonValue) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def body(self, trace_id: str) -> ErrorBody:
        return ErrorBody(type=self.type, message=self.message, details=self.details, trace_id=trace_id)


class PermissionDenied(ToolServerError):
    type = "permission_denied"


class InvalidArguments(ToolServerError):
    type = "invalid_arguments"


class NotFound(ToolServerError):
    type = "not_found"


class Conflict(ToolServerError):
    type = "conflict"


class ToolTimeout(ToolServerError, TimeoutError):
    type = "timeout"


class SandboxError(ToolServerError):
    type = "sandbox_error"


class NeedsConfirmation(ToolServerError):
    type = "needs_confirmation"


class ServerUnavailable(ToolServerError):
    type = "unavailable"


class InternalError(ToolServerError):
    type = "internal_error"


def error_result(error: ToolServerError, trace_id: str) -> CallToolResult:
    """The MCP error result for `error`: text for plain clients, `ErrorBody` as structured content."""
    body = error.body(trace_id)
    return CallToolResult(
        content=[TextContent(type="text", text=f"{body.type}: {body.message}")],
        structured_content=body.model_dump(mode="json"),
        is_error=True,
        _meta={TRACE_META_KEY: trace_id},
    )
