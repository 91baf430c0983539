"""The tool protocol on the MCP SDK: `build_server` turns `ToolSpec`s into an `MCPServer` behind the gate.

It registers only the tools the server's scopes grant, gives each the spec's own input schema, and
installs `gate.Gate` as the server's middleware. Each registered tool function runs the spec's
handler on the arguments the gate validated and returns a typed result (structured content plus
its JSON text) or an error result.

Adding a server is a module that builds its specs and calls `build_server` (see `fs/server.py`).
"""

import contextvars
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Hashable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Annotated, Any

from mcp.server.auth.settings import AuthSettings
from mcp.server.elicitation import AcceptedElicitation
from mcp.server.extension import Extension
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.subscriptions import SubscriptionBus
from mcp_types import CallToolResult, TextContent

from tool_servers.protocol.confirm import Confirm, ConfirmationParam, ReplyParam
from tool_servers.protocol.errors import TRACE_META_KEY, InternalError, ToolServerError, error_result
from tool_servers.protocol.gate import Gate, check_confirmation, current_call
from tool_servers.protocol.spec import ServerOptions, ToolSpec

logger = logging.getLogger(__name__)

CONFIRMATION_PARAM = "confirmation"
REQUEST_PARAM = "mcp_request"
REPLY_PARAM = "reply"
_RESERVED = (CONFIRMATION_PARAM, REQUEST_PARAM, REPLY_PARAM)

_REQUEST: contextvars.ContextVar[Context] = contextvars.ContextVar("codeloop_mcp_request")
_REPLY: contextvars.ContextVar[bool | None] = contextvars.ContextVar("codeloop_tool_reply", default=None)


def current_request() -> Context:
    """The MCP request of the running handler; only for specs with `uses_request`."""
    return _REQUEST.get()


def current_reply() -> bool | None:
    """The user's reply to the running call's `ToolSpec.ask`: True (approved), False (declined,
    cancelled, or approve unticked), None (nothing was asked, or the client cannot be asked)."""
    return _REPLY.get()


def build_server(
    name: str,
    specs: Sequence[ToolSpec],
    options: ServerOptions,
    *,
    instructions: str | None = None,
    lifespan: Callable[[MCPServer[object]], AbstractAsyncContextManager[object]] | None = None,
    subscriptions: SubscriptionBus | None = None,
    extensions: Sequence[Extension] = (),
) -> MCPServer[object]:
    """An `MCPServer` exposing the granted `specs` through the gate; `subscriptions` is the bus
    its `subscriptions/listen` streams are fed from (default: the SDK's in-memory one);
    `extensions` are MCP extensions (SEP-2133) it serves beside the tools."""
    catalog = {spec.name: spec for spec in specs}
    tools = [_tool(spec) for spec in specs if spec.scope in options.scopes]
    auth = None
    if options.token_verifier is not None:
        # Only the bearer check is used; no OAuth endpoints are served (resource_server_url=None).
        auth = AuthSettings(issuer_url="http://127.0.0.1", resource_server_url=None)  # pyright: ignore[reportArgumentType] - pydantic validates the string into its URL type
    server: MCPServer[object] = MCPServer(
        f"codeloop-{name}",
        instructions=instructions,
        tools=tools,
        token_verifier=options.token_verifier,
        auth=auth,
        lifespan=lifespan,
        log_level="WARNING",
        subscriptions=subscriptions,
        extensions=list(extensions),
    )
    server.middleware.append(Gate(name, catalog, options))
    return server


_TOOL_TEMPLATES: dict[tuple[Hashable, ...], Tool] = {}
"""Tool definitions by everything but their handler. Building one makes pydantic models and JSON
schemas from the signature (about 8 ms a tool), and a server is built for every root a task step
opens, each time with the same specs bound to another root: only the function differs."""


def _tool(spec: ToolSpec) -> Tool:
    for reserved in _RESERVED:
        if reserved in spec.input_model.model_fields:
            raise ValueError(f"tool {spec.name}: '{reserved}' is reserved")
    annotations = spec.annotations()
    key = (
        spec.name,
        spec.description,
        spec.input_model,
        spec.output_model,
        spec.may_need_confirmation,
        spec.scope,
        spec.risk,
        annotations.model_dump_json(),
        spec.uses_request,
        spec.ask is not None,
        json.dumps(spec.input_schema, sort_keys=True) if spec.input_schema is not None else None,
    )
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
        schema = spec.input_schema if spec.input_schema is not None else spec.input_model.model_json_schema()
        template = _TOOL_TEMPLATES[key] = tool.model_copy(update={"parameters": schema})
    # Everything else derives from the signature, which the key determines (`_tool_function`).
    return template.model_copy(update={"fn": function})


def _tool_function(spec: ToolSpec) -> Callable[..., Awaitable[CallToolResult]]:
    async def call_tool(**kwargs: object) -> CallToolResult:
        # The arguments themselves are ignored: the gate validated them into `call.args`.
        call = current_call()
        tokens = []
        if spec.uses_request:
            request = kwargs[REQUEST_PARAM]
            if not isinstance(request, Context):  # the SDK fills the parameter annotated `Context`
                raise TypeError(f"{spec.name}: the SDK passed {type(request).__name__} as the request")
            tokens.append((_REQUEST, _REQUEST.set(request)))
        if spec.ask is not None:
            tokens.append((_REPLY, _REPLY.set(_reply(kwargs[REPLY_PARAM]))))
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
        finally:
            for var, token in reversed(tokens):
                var.reset(token)
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
    if spec.uses_request:
        params.append(inspect.Parameter(REQUEST_PARAM, inspect.Parameter.KEYWORD_ONLY, annotation=Context))
    if spec.ask is not None:
        params.append(inspect.Parameter(REPLY_PARAM, inspect.Parameter.KEYWORD_ONLY, annotation=ReplyParam))
    returns = Annotated[CallToolResult, spec.output_model]
    call_tool.__signature__ = inspect.Signature(params, return_annotation=returns)
    call_tool.__annotations__ = {p.name: p.annotation for p in params} | {"return": returns}
    call_tool.__name__ = call_tool.__qualname__ = spec.name
    return call_tool


def _reply(outcome: object) -> bool | None:
    if isinstance(outcome, AcceptedElicitation):
        return outcome.data.approve if isinstance(outcome.data, Confirm) else None
    return False  # declined or cancelled
