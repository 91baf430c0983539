"""The tool protocol on the MCP SDK: `build_server` turns `ToolSpec`s into an `MCPServer` behind the gate.

It registers only the tools the server's scopes grant, gives each the spec's own input schema, and
installs `gate.Gate` as the server's middleware. Each registered tool function runs the spec's
handler on the arguments the gate validated and returns a typed result (structured content plus
its JSON text) or an error result.

Adding a server is a module that builds its specs and calls `build_server` (see `fs/server.py`).
"""

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Annotated, Any

from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, TextContent

from tool_servers.protocol.confirm import ConfirmationParam
from tool_servers.protocol.errors import TRACE_META_KEY, InternalError, ToolServerError, error_result
from tool_servers.protocol.gate import Gate, check_confirmation, current_call
from tool_servers.protocol.spec import ServerOptions, ToolSpec

logger = logging.getLogger(__name__)

CONFIRMATION_PARAM = "confirmation"


def build_server(
    name: str,
    specs: Sequence[ToolSpec],
    options: ServerOptions,
    *,
    instructions: str | None = None,
    lifespan: Callable[[MCPServer[Any]], AbstractAsyncContextManager[Any]] | None = None,
) -> MCPServer[Any]:
    """An `MCPServer` exposing the granted `specs` through the gate."""
    catalog = {spec.name: spec for spec in specs}
    tools = [_tool(spec) for spec in specs if spec.scope in options.scopes]
    auth = None
    if options.token_verifier is not None:
        # Only the bearer check is used; no OAuth endpoints are served (resource_server_url=None).
        auth = AuthSettings(issuer_url="http://127.0.0.1", resource_server_url=None)
    server: MCPServer[Any] = MCPServer(
        f"codeloop-{name}",
        instructions=instructions,
        tools=tools,
        token_verifier=options.token_verifier,
        auth=auth,
        lifespan=lifespan,
        log_level="WARNING",
    )
    server.middleware.append(Gate(name, catalog, options))
    return server


_TOOL_TEMPLATES: dict[tuple[Any, ...], Tool] = {}
"""Tool definitions by everything but their handler. Building one makes pydantic models and JSON
schemas from the signature (about 8 ms a tool), and a server is built for every root a task step
opens, each time with the same specs bound to another root: only the function differs."""


def _tool(spec: ToolSpec) -> Tool:
    if CONFIRMATION_PARAM in spec.input_model.model_fields:
        raise ValueError(f"tool {spec.name}: '{CONFIRMATION_PARAM}' is reserved")
    annotations = spec.annotations()
    key = (
        spec.name, spec.description, spec.input_model, spec.output_model, spec.may_need_confirmation,
        spec.scope, spec.risk, annotations.model_dump_json(),
    )  # fmt: skip
    function = _tool_function(spec)
    template = _TOOL_TEMPLATES.get(key)
    if template is None:
        tool = Tool.from_function(
            function,
            name=spec.name,
            description=spec.description,
            annotations=annotations,
            meta={"codeloop/scope": spec.scope.value, "codeloop/risk": spec.risk.value},
            structured_output=True,
        )
        # The gate validates against the spec's own model (field docstrings, constraints,
        # extra="forbid"), so that model's schema is the one clients see.
        template = _TOOL_TEMPLATES[key] = tool.model_copy(
            update={"parameters": spec.input_model.model_json_schema()}
        )
    # Everything else derives from the signature, which the key determines (`_tool_function`).
    return template.model_copy(update={"fn": function})


def _tool_function(spec: ToolSpec) -> Callable[..., Awaitable[CallToolResult]]:
    async def call_tool(**kwargs: Any) -> CallToolResult:
        call = current_call()
        try:
            if spec.may_need_confirmation:
                check_confirmation(kwargs[CONFIRMATION_PARAM], call)
            output = await spec.handler(call.args, call.context)
        except ToolServerError as exc:
            return error_result(exc, call.context.trace_id)
        except Exception as exc:
            logger.exception("tool %s crashed (trace %s)", spec.name, call.context.trace_id)
            crash = InternalError(
                f"{spec.name} failed unexpectedly ({type(exc).__name__}); see the server log"
            )
            return error_result(crash, call.context.trace_id)
        return CallToolResult(
            content=[TextContent(type="text", text=output.model_dump_json())],
            structured_content=output.model_dump(mode="json"),
            _meta={TRACE_META_KEY: call.context.trace_id},
        )

    # The SDK builds its argument model from the signature; it gets permissive placeholders
    # because the gate has already validated against spec.input_model.
    params = [
        inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=Any, default=None)
        for n in spec.input_model.model_fields
    ]
    if spec.may_need_confirmation:
        params.append(
            inspect.Parameter(
                CONFIRMATION_PARAM, inspect.Parameter.KEYWORD_ONLY, annotation=ConfirmationParam
            )
        )
    returns = Annotated[CallToolResult, spec.output_model]
    call_tool.__signature__ = inspect.Signature(params, return_annotation=returns)  # type: ignore[attr-defined]
    call_tool.__annotations__ = {p.name: p.annotation for p in params} | {"return": returns}
    call_tool.__name__ = call_tool.__qualname__ = spec.name
    return call_tool
