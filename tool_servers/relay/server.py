"""The relay server of one upstream (`build_relay_server`) and a set of them for one session
(`open_relays`); see the package docstring."""

import json
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent, Tool
from pydantic import BaseModel, ConfigDict, JsonValue

from redaction import redact, redact_text
from tool_servers.protocol.errors import ToolServerError
from tool_servers.protocol.scopes import Risk, Scope
from tool_servers.protocol.sdk import build_server
from tool_servers.protocol.spec import CallContext, ServerOptions, ToolSpec
from tool_servers.relay.upstream import Upstream, UpstreamSpec

log = logging.getLogger("codeloop.relay")
SEPARATOR = "__"
"""Between the server's name and the tool's: `memory__create_entities`."""
MAX_DESCRIPTION = 2000


class RelayedArguments(BaseModel):
    """Whatever the upstream tool takes: its own input schema is what clients see, and the
    upstream server validates what it receives."""

    model_config = ConfigDict(extra="allow")


class RelayedOutput(BaseModel):
    """What a relayed tool returned, secrets redacted and cut to the server's output cap."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    text: str
    """The tool's text content (other content noted by its type)."""
    structured: dict[str, JsonValue] | None = None
    """The tool's structured content, when it gave one and it fits under the cap."""
    truncated: bool = False
    """True when the output was cut to the cap."""


class RelayedToolError(ToolServerError):
    """The upstream tool answered with an error result; its text is the message."""

    type = "tool_error"


def relayed_name(server: str, tool: str) -> str:
    return f"{server}{SEPARATOR}{tool}"


def _output(spec: UpstreamSpec, result: CallToolResult) -> RelayedOutput:
    parts = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        else:
            parts.append(f"[{getattr(block, 'type', 'content')} content not shown]")
    text = redact_text("\n".join(parts))
    structured = redact(result.structured_content) if result.structured_content is not None else None
    cap = spec.max_output_chars
    truncated = len(text) > cap
    if truncated:
        text = f"{text[:cap]}\n[output cut at {cap} characters]"
    if structured is not None and len(json.dumps(structured, default=str)) > cap:
        structured, truncated = None, True
    return RelayedOutput(text=text, structured=structured, truncated=truncated)


def _spec(upstream: Upstream, tool: Tool) -> ToolSpec:
    server = upstream.spec

    async def handler(args: BaseModel, ctx: CallContext) -> BaseModel:
        del ctx
        result = await upstream.call(tool.name, args.model_dump(mode="json"))
        output = _output(server, result)
        if result.is_error:
            raise RelayedToolError(f"{relayed_name(server.name, tool.name)} failed: {output.text}")
        return output

    def confirm(args: BaseModel) -> str:
        shown = json.dumps(redact(args.model_dump(mode="json")), default=str)
        shown = shown if len(shown) <= 300 else f"{shown[:300]}…"
        return f"call {tool.name} on your MCP server {server.name} with {shown}"

    hints = tool.annotations
    read_only = server.scope is Scope.READ or bool(hints and hints.read_only_hint)
    description = f"[{server.name} MCP server] {tool.description or tool.name}"[:MAX_DESCRIPTION]
    return ToolSpec(
        name=relayed_name(server.name, tool.name),
        description=description,
        scope=server.scope,
        input_model=RelayedArguments,
        output_model=RelayedOutput,
        handler=handler,
        risk=Risk.LOW if server.scope is Scope.READ else Risk.MEDIUM,
        read_only=read_only,
        destructive=not read_only and not (hints and hints.destructive_hint is False),
        idempotent=bool(hints and hints.idempotent_hint),
        confirm=confirm if server.asks(tool.name) else None,
        input_schema=dict(tool.input_schema) if tool.input_schema else {"type": "object"},
    )


def build_relay_server(upstream: Upstream, options: ServerOptions) -> MCPServer[object]:
    """The relay of `upstream` (started: its tools listed), behind the gate with `options`."""
    specs = [_spec(upstream, tool) for tool in upstream.tools]
    return build_server(upstream.spec.name, specs, options)


@asynccontextmanager
async def open_relays(
    specs: Sequence[UpstreamSpec],
    options: ServerOptions,
    *,
    cwd: Path | None = None,
    log_dir: Path | None = None,
) -> AsyncIterator[dict[str, MCPServer[object]]]:
    """Start the servers of `specs` that `options.scopes` grant (the others are not started) and
    yield their relays by server name; stop them on exit. A server that fails to start gets a
    relay without tools (and a warning in the log naming why)."""
    granted = [spec for spec in specs if spec.scope in options.scopes]
    upstreams = [
        Upstream(spec, cwd=cwd, log_file=log_dir / f"{spec.name}.log" if log_dir else None)
        for spec in granted
    ]
    async with anyio.create_task_group() as tg:
        async with anyio.create_task_group() as starting:
            for upstream in upstreams:
                starting.start_soon(tg.start, upstream.run)
        for upstream in upstreams:
            if upstream.problem:
                log.warning("MCP server %s is not available: %s", upstream.spec.name, upstream.problem)
        try:
            yield {u.spec.name: build_relay_server(u, options) for u in upstreams}
        finally:
            for upstream in upstreams:
                upstream.stop()
