"""The gate of the tool protocol: what every tool call passes before and after its handler.

`sdk.build_server` installs `Gate`, a middleware that runs before the SDK touches a `tools/call`:

    trace id → caller (principal, scopes) → scope check → argument validation
             → [confirmation resolver] → handler → typed result → audit record

so nothing a handler does happens before its arguments are valid, its scope is granted and, for
a high-risk call, a human said yes. Failures are `ToolServerError`s, returned as MCP error
results whose structured content is an `ErrorBody`; every result carries the trace id in
`_meta["codeloop/trace_id"]` (a client may choose it by sending that key in the request `_meta`).
"""

import contextvars
import re
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.elicitation import AcceptedElicitation, CancelledElicitation, DeclinedElicitation
from mcp_types import ListToolsResult
from pydantic import BaseModel, JsonValue, ValidationError

from tool_servers.protocol.audit import redact
from tool_servers.protocol.confirm import CannotAsk, Confirm, NotNeeded
from tool_servers.protocol.errors import (
    TRACE_META_KEY,
    InvalidArguments,
    NeedsConfirmation,
    NotFound,
    PermissionDenied,
    error_result,
)
from tool_servers.protocol.scopes import Scope, format_scopes, parse_scopes
from tool_servers.protocol.spec import CallContext, ServerOptions, ToolSpec

_TRACE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


@dataclass(frozen=True)
class _CallState:
    spec: ToolSpec
    args: BaseModel
    context: CallContext


_CURRENT: contextvars.ContextVar[_CallState] = contextvars.ContextVar("codeloop_tool_call")


def current_call() -> _CallState:
    """The call the gate admitted; set for the handler and the confirmation resolver."""
    return _CURRENT.get()


def check_confirmation(outcome: object, call: _CallState) -> None:
    """Raise unless the call may proceed: not high-risk, or approved by the user. `outcome` is
    what the SDK filled the confirmation parameter with: an elicitation result, accepted with
    the user's `Confirm` or with what `confirmation_resolver` decided without asking."""
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
    if isinstance(outcome, DeclinedElicitation | CancelledElicitation):
        raise PermissionDenied(
            f"the user {outcome.action}d the confirmation: {action}; nothing was done", action=action
        )
    raise TypeError(
        f"{call.spec.name}: the confirmation parameter holds {outcome!r}, not an elicitation result"
    )


def caller(options: ServerOptions) -> tuple[str, frozenset[Scope]]:
    """Who is calling and with which scopes: the bearer token's principal and its scopes within
    the server's grant, or the server's own principal and grant without a token (stdio)."""
    token = get_access_token()
    if token is None:
        return options.principal, options.scopes
    return token.client_id, options.scopes & parse_scopes(token.scopes)


class Gate:
    """Middleware: scopes, validation, trace id and audit around every `tools/call`."""

    def __init__(self, server: str, catalog: dict[str, ToolSpec], options: ServerOptions) -> None:
        self.server = server
        self.catalog = catalog
        self.options = options

    async def __call__(self, ctx: ServerRequestContext[object, object], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/list":
            return self._filter_listing(await call_next(ctx))
        if ctx.method == "tools/call" and ctx.request_id is not None:
            return await self._call(ctx, call_next)
        return await call_next(ctx)

    def _caller(self) -> tuple[str, frozenset[Scope]]:
        return caller(self.options)

    def _filter_listing(self, result: HandlerResult) -> HandlerResult:
        _, scopes = self._caller()
        allowed = {name for name, spec in self.catalog.items() if spec.scope in scopes}
        if isinstance(result, dict):
            return {**result, "tools": [t for t in result.get("tools", []) if t.get("name") in allowed]}
        if isinstance(result, ListToolsResult):
            return result.model_copy(update={"tools": [t for t in result.tools if t.name in allowed]})
        return result

    async def _call(self, ctx: ServerRequestContext[object, object], call_next: CallNext) -> HandlerResult:
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
                result: HandlerResult = error_result(missing, trace_id)
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
        ctx: ServerRequestContext[object, object],
        call_next: CallNext,
        spec: ToolSpec,
        raw_args: object,
        call: CallContext,
    ) -> HandlerResult:
        if spec.scope not in call.scopes:
            return error_result(
                PermissionDenied(
                    f"{spec.name} needs the '{spec.scope.value}' scope; {call.principal} was granted "
                    f"{format_scopes(call.scopes)}",
                    missing_scope=spec.scope.value,
                    granted=[s.value for s in sorted(call.scopes)],
                ),
                call.trace_id,
            )
        try:
            if not isinstance(raw_args, dict):
                raise InvalidArguments("arguments must be a JSON object")
            args = spec.input_model.model_validate(raw_args)
        except ValidationError as exc:
            problems = [
                (".".join(str(p) for p in e["loc"]) or "(arguments)", e["msg"])
                for e in exc.errors(include_url=False, include_input=False)
            ]
            summary = "; ".join(f"{field}: {problem}" for field, problem in problems)
            errors: list[JsonValue] = [{"field": field, "problem": problem} for field, problem in problems]
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


def _field(result: HandlerResult, alias: str, attr: str) -> object:
    return result.get(alias) if isinstance(result, dict) else getattr(result, attr, None)


def _outcome(result: HandlerResult) -> str:
    if _field(result, "resultType", "result_type") == "input_required" or _field(
        result, "inputRequests", "input_requests"
    ):
        return "input_required"
    if _field(result, "isError", "is_error"):
        body = _field(result, "structuredContent", "structured_content") or {}
        return str(body.get("type", "error")) if isinstance(body, dict) else "error"
    return "ok"


def _with_trace(result: HandlerResult, trace_id: str) -> HandlerResult:
    if isinstance(result, dict):
        return {**result, "_meta": {**(result.get("_meta") or {}), TRACE_META_KEY: trace_id}}
    if isinstance(result, BaseModel) and hasattr(result, "meta"):
        return result.model_copy(update={"meta": {**(result.meta or {}), TRACE_META_KEY: trace_id}})  # pyright: ignore[reportAttributeAccessIssue] - every MCP result model has meta
    return result
