"""Every tool call of a task as a `tool_call` event: server, tool, redacted arguments, outcome,
duration — never file contents or patches (those become their size and sha256).

Two routes, one event shape:

- the coder's model run gets `tool_call_observer(bus)`, a pydantic-ai `Hooks` capability
  around each tool execution — the run's own view of the call;
- the roles that call tools with a plain MCP client (planner, retriever, verifier) get their
  servers from `ObservedTools`, which wraps the composition root's `ToolProvider` and puts a
  middleware in front of each in-process server that times every `tools/call`.

`ObservedTools` also learns which server each tool name belongs to, which the hooks need (a
pydantic-ai tool definition does not name its MCP server).

Outcomes: `ok`; `refused` (the server said no: a missing scope, a path outside the root, a
person declined); `error` (anything else), with the error's type where the server named one.
"""

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import JsonValue
from pydantic_ai.capabilities import Hooks
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, SkipToolExecution

from agents.observe.events import StepInfo, cap, current_step, digest, publish_event
from agents.runtime.role import RunInfo
from agents.runtime.tools import ToolProvider, ToolTarget
from bus.connection import Bus

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from pydantic_ai import RunContext
    from pydantic_ai.capabilities.abstract import ValidatedToolArgs, WrapToolExecuteHandler
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.tools import ToolDefinition

EVENT = "tool_call"
CONTENT_KEYS = frozenset(
    {"content", "patch", "diff", "text", "data", "new_text", "old_text", "input", "stdin"}
)
"""Arguments that carry file contents or patches: always reported as size and sha256."""
MAX_ARGUMENT = 200
"""Longer string arguments are reported as size and sha256 too."""
_SECRET_KEY = re.compile(
    r"(?:secret|token|passw(?:or)?d|api[_-]?key|authorization|credentials?|private[_-]?key)$", re.I
)
"""Argument names whose values are masked (`token_budget` is not one of them; `api_token` is)."""
REFUSALS = frozenset({"permission_denied", "needs_confirmation"})
_ERROR_TYPES = (
    "permission_denied",
    "needs_confirmation",
    "invalid_arguments",
    "not_found",
    "conflict",
    "timeout",
    "sandbox_error",
    "unavailable",
    "internal_error",
)

_CONTROL_FLOW = (SkipToolExecution, CallDeferred, ApprovalRequired)
SERVER_OF: dict[str, str] = {}
"""Tool name -> server name, learnt by `ObservedTools` as the servers answer calls (the tool
names of codeloop's servers are unique across them)."""


def server_of(tool: str) -> str:
    """The server a tool of the coder's run belongs to: learnt, or the `NAME` of a user server's
    `NAME__TOOL`."""
    known = SERVER_OF.get(tool)
    if known is not None:
        return known
    name, sep, _ = tool.partition("__")
    return name if sep and name else "unknown"


def summarize_arguments(args: object) -> dict[str, JsonValue]:
    """The arguments as an event may show them: secrets masked, contents as size and sha256."""
    if not isinstance(args, dict):
        return {"_raw": cap(repr(args), limit=MAX_ARGUMENT)}
    out: dict[str, JsonValue] = {}
    for key, value in args.items():
        key = str(key)
        if _SECRET_KEY.search(key):
            out[key] = "[redacted]"
        elif isinstance(value, str) and (key in CONTENT_KEYS or len(value) > MAX_ARGUMENT):
            out[key] = digest(value)
        else:
            out[key] = cap(value, limit=MAX_ARGUMENT)
    return out


def outcome_of_error(text: str) -> tuple[str, str | None]:
    """(outcome, error type) of a failed call from its error text."""
    kind = next((t for t in _ERROR_TYPES if t in text), None)
    return ("refused" if kind in REFUSALS else "error"), kind


def tool_call_data(
    *,
    server: str,
    tool: str,
    args: object,
    outcome: str,
    duration_s: float,
    error_type: str | None = None,
    error: str | None = None,
    source: str,
) -> dict[str, JsonValue]:
    data: dict[str, JsonValue] = {
        "server": server,
        "tool": tool,
        "arguments": summarize_arguments(args),
        "outcome": outcome,
        "duration_ms": round(duration_s * 1000, 3),
        "source": source,
    }
    if error_type:
        data["error_type"] = error_type
    if error:
        data["error"] = cap(error, limit=300)
    return data


async def _emit(bus: Bus, step: StepInfo, data: dict[str, JsonValue]) -> None:
    kind = f" ({data['error_type']})" if data.get("error_type") else ""
    line = f"{data['server']}.{data['tool']} {data['outcome']}{kind} in {data['duration_ms']:.0f} ms"
    await publish_event(bus, EVENT, line, data, step=step)


def tool_call_observer(bus: Bus) -> Callable[[RunInfo], Hooks]:
    """A `RunObserver`: hooks that publish each tool call of one model run as a `tool_call` event.

    It is a wrap hook (`tool_execute`), not the error hook: a tool's error result reaches
    pydantic-ai as `ModelRetry`, which skips `tool_execute_error` hooks but passes through the wrap.
    """

    def observe(info: RunInfo) -> Hooks:
        step = StepInfo(task_id=info.task_id, role=info.role, step_id=info.step_id, trace_id=info.trace_id)

        async def timed(
            ctx: "RunContext[object]",
            *,
            call: "ToolCallPart",
            tool_def: "ToolDefinition",
            args: "ValidatedToolArgs",
            handler: "WrapToolExecuteHandler",
        ) -> object:
            t0 = time.perf_counter()
            try:
                result = await handler(args)
            except _CONTROL_FLOW:
                raise  # a skipped or deferred call is not a call the tool answered
            except Exception as exc:
                outcome, kind = outcome_of_error(str(exc))
                data = tool_call_data(
                    server=server_of(call.tool_name),
                    tool=call.tool_name,
                    args=args,
                    outcome=outcome,
                    duration_s=time.perf_counter() - t0,
                    error_type=kind,
                    error=f"{type(exc).__name__}: {exc}",
                    source="hooks",
                )
                await _emit(bus, step, data)
                raise
            data = tool_call_data(
                server=server_of(call.tool_name),
                tool=call.tool_name,
                args=args,
                outcome="ok",
                duration_s=time.perf_counter() - t0,
                source="hooks",
            )
            await _emit(bus, step, data)
            return result

        return Hooks(tool_execute=timed)

    return observe


def _field(result: "HandlerResult", alias: str, attr: str) -> object:
    """A result's field: by its wire name in a dict, by its attribute on a model (never the
    model's deprecated camelCase aliases)."""
    return result.get(alias) if isinstance(result, dict) else getattr(result, attr, None)


class _ToolCallTimer:
    """Server middleware: times each `tools/call` and, for `step`, publishes it."""

    def __init__(self, bus: Bus, server: str, step: StepInfo | None) -> None:
        self.bus, self.server, self.step = bus, server, step

    async def __call__(
        self, ctx: "ServerRequestContext[object, object]", call_next: "CallNext"
    ) -> "HandlerResult":
        if ctx.method != "tools/call" or ctx.request_id is None:
            return await call_next(ctx)
        params = dict(ctx.params or {})
        tool = str(params.get("name"))
        SERVER_OF.setdefault(tool, self.server)
        t0 = time.perf_counter()
        try:
            result = await call_next(ctx)
        except Exception as exc:
            await self._publish(
                tool, params, "error", time.perf_counter() - t0, None, f"{type(exc).__name__}: {exc}"
            )
            raise
        if _field(result, "resultType", "result_type") == "input_required":
            return result  # a confirmation round; the repeated call is the one that counts
        outcome, kind, message = "ok", None, None
        if _field(result, "isError", "is_error"):
            body = _field(result, "structuredContent", "structured_content") or {}
            kind = str(body.get("type", "")) or None if isinstance(body, dict) else None
            message = str(body.get("message", "")) if isinstance(body, dict) else None
            outcome = "refused" if kind in REFUSALS else "error"
        await self._publish(tool, params, outcome, time.perf_counter() - t0, kind, message)
        return result

    async def _publish(
        self,
        tool: str,
        params: dict[str, object],
        outcome: str,
        duration_s: float,
        kind: str | None,
        error: str | None,
    ) -> None:
        if self.step is None:
            return
        data = tool_call_data(
            server=self.server,
            tool=tool,
            args=params.get("arguments") or {},
            outcome=outcome,
            duration_s=duration_s,
            error_type=kind,
            error=error,
            source="client",
        )
        await _emit(self.bus, self.step, data)


class ObservedTools:
    """A `ToolProvider` whose in-process servers report their tool calls as events of the step
    that asked for them (`current_step`), except for roles whose runs report their own (the
    coder's hooks) — there it only learns the servers' tool names."""

    def __init__(
        self, inner: ToolProvider, bus: Bus, *, hooked_roles: frozenset[str] = frozenset({"coder"})
    ) -> None:
        self.inner = inner
        self.bus = bus
        self.hooked_roles = hooked_roles

    def servers(
        self, root: Path, scopes: frozenset[str], *, index_dir: Path | None = None
    ) -> dict[str, ToolTarget]:
        servers = self.inner.servers(root, scopes, index_dir=index_dir)
        step = current_step.get()
        publish_for = step if step is not None and step.role not in self.hooked_roles else None
        for name, target in servers.items():
            chain = getattr(target, "middleware", None)
            if isinstance(chain, list):
                # Outermost: it sees the gate's refusals as well as the tools' answers.
                chain.insert(0, _ToolCallTimer(self.bus, name, publish_for))
        return servers

    def adopt(self, target: ToolTarget) -> None:
        """Report the calls of `target` (a server of `servers()` made outside any step, such as a
        verifier's spare) as calls of the step running now."""
        step = current_step.get()
        for timer in getattr(target, "middleware", None) or []:
            if isinstance(timer, _ToolCallTimer):
                timer.step = step if step is not None and step.role not in self.hooked_roles else None
