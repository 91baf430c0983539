"""The tool protocol every codeloop MCP server shares.

A server is a list of `ToolSpec`s handed to `build_server`. Each spec declares its input and
output models (→ `inputSchema`/`outputSchema`), scope, risk and MCP annotations. `build_server`
registers only the tools the server's scopes grant and installs `_Gate`, a middleware that runs
before the SDK touches a `tools/call`:

    trace id → caller (principal, scopes) → scope check → argument validation
             → [confirmation resolver] → handler → typed result → audit record

so nothing a handler does happens before its arguments are valid, its scope is granted and, for
a high-risk call, a human said yes. Failures are `ToolServerError`s, returned as MCP error
results whose structured content is an `ErrorBody`; every result carries the trace id in
`_meta["codeloop/trace_id"]` (a client may choose it by sending that key in the request `_meta`).

Adding a server is a module that builds its specs and calls `build_server` (see `fs.py`).
"""

import contextvars
import inspect
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.elicitation import AcceptedElicitation
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ValidationError

from tool_servers.protocol.audit import AuditLog, redact
from tool_servers.protocol.confirm import CannotAsk, Confirm, ConfirmationParam, NotNeeded
from tool_servers.protocol.errors import (
    TRACE_META_KEY,
    InternalError,
    InvalidArguments,
    NeedsConfirmation,
    NotFound,
    PermissionDenied,
    ToolServerError,
    error_result,
)
from tool_servers.protocol.scopes import ALL_SCOPES, Risk, Scope, format_scopes, parse_scopes
from tool_servers.secret_files import DEFAULT_RULES, SecretRules

logger = logging.getLogger(__name__)

_TRACE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
CONFIRMATION_PARAM = "confirmation"


@dataclass(frozen=True)
class CallContext:
    """What a handler knows about the call besides its arguments."""

    server: str
    principal: str
    scopes: frozenset[Scope]
    trace_id: str


Handler = Callable[[Any, CallContext], Awaitable[BaseModel]]


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its contract (models, scope, risk, hints) and its handler."""

    name: str
    description: str
    scope: Scope
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    handler: Handler
    risk: Risk = Risk.LOW
    read_only: bool = True
    destructive: bool = False
    idempotent: bool = True
    confirm: Callable[[Any], str | None] | None = None
    """Given the validated arguments, what a high-risk call would do (asked to a human), or None."""

    def confirmation_needed(self, args: BaseModel) -> str | None:
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
    name: str, description: str, input_model: type[BaseModel], output_model: type[BaseModel], handler: Handler
) -> ToolSpec:
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


@dataclass(frozen=True)
class _CallState:
    spec: ToolSpec
    args: BaseModel
    context: CallContext


_CURRENT: contextvars.ContextVar[_CallState] = contextvars.ContextVar("codeloop_tool_call")


def current_call() -> _CallState:
    """The call the gate admitted; set for the handler and the confirmation resolver."""
    return _CURRENT.get()


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
    server.middleware.append(_Gate(name, catalog, options))
    return server


def _tool(spec: ToolSpec) -> Tool:
    if CONFIRMATION_PARAM in spec.input_model.model_fields:
        raise ValueError(f"tool {spec.name}: '{CONFIRMATION_PARAM}' is reserved")
    tool = Tool.from_function(
        _tool_function(spec),
        name=spec.name,
        description=spec.description,
        annotations=spec.annotations(),
        meta={"codeloop/scope": spec.scope.value, "codeloop/risk": spec.risk.value},
        structured_output=True,
    )
    # The gate validates against the spec's own model (field docstrings, constraints,
    # extra="forbid"), so that model's schema is the one clients see.
    return tool.model_copy(update={"parameters": spec.input_model.model_json_schema()})


def _tool_function(spec: ToolSpec) -> Callable[..., Awaitable[CallToolResult]]:
    async def call_tool(**kwargs: Any) -> CallToolResult:
        call = current_call()
        try:
            if spec.may_need_confirmation:
                _check_confirmation(kwargs[CONFIRMATION_PARAM], call)
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


def _check_confirmation(outcome: Any, call: _CallState) -> None:
    """Raise unless the call may proceed: not high-risk, or approved by the user."""
    action = call.spec.confirmation_needed(call.args) or call.spec.name
    if isinstance(outcome, AcceptedElicitation):
        data = outcome.data
        if isinstance(data, NotNeeded) or (isinstance(data, Confirm) and data.approve):
            return
        if isinstance(data, CannotAsk):
            raise NeedsConfirmation(
                f"{call.spec.name} needs a human to confirm: {data.action}. This client cannot ask "
                "(it did not declare the elicitation capability); nothing was done. Ask the user, "
                "then repeat the call from a client that can elicit.",
                action=data.action,
                tool=call.spec.name,
                arguments=redact(call.args.model_dump(mode="json")),
            )
        raise PermissionDenied(f"the user did not approve: {action}; nothing was done", action=action)
    raise PermissionDenied(
        f"the user {outcome.action}d the confirmation: {action}; nothing was done", action=action
    )


class _Gate:
    """Middleware: scopes, validation, trace id and audit around every `tools/call`."""

    def __init__(self, server: str, catalog: dict[str, ToolSpec], options: ServerOptions) -> None:
        self.server = server
        self.catalog = catalog
        self.options = options

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        if ctx.method == "tools/list":
            return self._filter_listing(await call_next(ctx))
        if ctx.method == "tools/call" and ctx.request_id is not None:
            return await self._call(ctx, call_next)
        return await call_next(ctx)

    def _caller(self) -> tuple[str, frozenset[Scope]]:
        token = get_access_token()
        if token is None:
            return self.options.principal, self.options.scopes
        return token.client_id, self.options.scopes & parse_scopes(token.scopes)

    def _filter_listing(self, result: Any) -> Any:
        _, scopes = self._caller()
        allowed = {name for name, spec in self.catalog.items() if spec.scope in scopes}
        if isinstance(result, dict):
            return {**result, "tools": [t for t in result.get("tools", []) if t.get("name") in allowed]}
        return result.model_copy(update={"tools": [t for t in result.tools if t.name in allowed]})

    async def _call(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        params = dict(ctx.params or {})
        name = params.get("name")
        spec = self.catalog.get(name) if isinstance(name, str) else None
        meta = params.get("_meta") or {}
        supplied = meta.get(TRACE_META_KEY) if isinstance(meta, dict) else None
        trace_id = supplied if isinstance(supplied, str) and _TRACE_ID.match(supplied) else uuid.uuid4().hex
        raw_args = params.get("arguments") or {}
        principal, scopes = self._caller()
        call = CallContext(self.server, principal, scopes, trace_id)
        started, t0 = datetime.now(UTC), time.perf_counter()
        outcome = "cancelled"
        try:
            if spec is None:
                missing = NotFound(
                    f"no tool named {name!r} on the {self.server} server; see tools/list", tool=str(name)
                )
                result: Any = error_result(missing, trace_id)
            else:
                result = await self._admit(ctx, call_next, spec, raw_args, call)
            outcome = _outcome(result)
            return _with_trace(result, trace_id)
        except Exception as exc:
            outcome = f"protocol_error:{type(exc).__name__}"
            raise
        finally:
            if self.options.audit is not None:
                with anyio.CancelScope(shield=True):
                    await self.options.audit.append(
                        principal=principal,
                        server=self.server,
                        tool=str(name),
                        arguments=raw_args if isinstance(raw_args, dict) else {"_raw": repr(raw_args)},
                        outcome=outcome,
                        duration_ms=(time.perf_counter() - t0) * 1000,
                        trace_id=trace_id,
                        started=started,
                    )

    async def _admit(
        self,
        ctx: Any,
        call_next: Callable[[Any], Awaitable[Any]],
        spec: ToolSpec,
        raw_args: Any,
        call: CallContext,
    ) -> Any:
        if spec.scope not in call.scopes:
            return error_result(
                PermissionDenied(
                    f"{spec.name} needs the '{spec.scope.value}' scope; {call.principal} was granted "
                    f"{format_scopes(call.scopes)}",
                    missing_scope=spec.scope.value,
                    granted=sorted(s.value for s in call.scopes),
                ),
                call.trace_id,
            )
        try:
            if not isinstance(raw_args, dict):
                raise InvalidArguments("arguments must be a JSON object")
            args = spec.input_model.model_validate(raw_args)
        except ValidationError as exc:
            errors = [
                {"field": ".".join(str(p) for p in e["loc"]) or "(arguments)", "problem": e["msg"]}
                for e in exc.errors(include_url=False, include_input=False)
            ]
            summary = "; ".join(f"{e['field']}: {e['problem']}" for e in errors)
            return error_result(
                InvalidArguments(f"invalid arguments for {spec.name}: {summary}", errors=errors),
                call.trace_id,
            )
        except InvalidArguments as exc:
            return error_result(exc, call.trace_id)
        token = _CURRENT.set(_CallState(spec, args, call))
        try:
            return await call_next(ctx)
        finally:
            _CURRENT.reset(token)


def _field(result: Any, alias: str, attr: str) -> Any:
    return result.get(alias) if isinstance(result, dict) else getattr(result, attr, None)


def _outcome(result: Any) -> str:
    if _field(result, "resultType", "result_type") == "input_required" or _field(
        result, "inputRequests", "input_requests"
    ):
        return "input_required"
    if _field(result, "isError", "is_error"):
        body = _field(result, "structuredContent", "structured_content") or {}
        return str(body.get("type", "error")) if isinstance(body, dict) else "error"
    return "ok"


def _with_trace(result: Any, trace_id: str) -> Any:
    if isinstance(result, dict):
        return {**result, "_meta": {**(result.get("_meta") or {}), TRACE_META_KEY: trace_id}}
    if isinstance(result, BaseModel) and hasattr(result, "meta"):
        return result.model_copy(update={"meta": {**(result.meta or {}), TRACE_META_KEY: trace_id}})
    return result
