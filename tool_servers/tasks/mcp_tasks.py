"""The MCP tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) for the tasks server.

Most clients call `submit_task` and then `wait_task`; their limit is their own tool-call timeout,
which `wait_task`'s progress notifications keep resetting. A client that declares this extension
on a `tools/call` of `submit_task` gets the protocol's own task instead: the call returns at
once a task stub (`resultType: "task"`, its `taskId` being the codeloop task id), and the client
follows it with

    tasks/get     status `working`, `input_required` (a confirmation waits: its `inputRequests`
                  hold one form elicitation per pending request), `completed` (its `result` is the
                  `submit_task` result with the final view under `task`) or `cancelled`
    tasks/update  `inputResponses` answer those elicitations (accept with approve=true approves;
                  anything else refuses)
    tasks/cancel  the codeloop task is cancelled
    tasks/result  blocks until the task ended, then the same result (the earlier draft's method)

The server decides: only `submit_task` becomes a task, only for a client that declared the
extension on a 2026-07-28 session. The plain tools stay as they are for everyone else. Every
method answers for the caller's own tasks only; another principal's task id is "not found".
"""

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    RequestParams,
    TextContent,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict, Field, JsonValue

from tool_servers.protocol.confirm import Confirm
from tool_servers.protocol.gate import caller
from tool_servers.protocol.spec import ServerOptions
from tool_servers.tasks.backend import TasksBackend
from tool_servers.tasks.views import MAX_WAIT_S, Submitted, TaskView

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TASK_TOOLS = frozenset({"submit_task"})
"""The tools whose calls become MCP tasks for a client that declared the extension."""
POLL_INTERVAL_MS = 2000


class TaskParams(RequestParams):
    model_config = ConfigDict(populate_by_name=True)

    task_id: str = Field(alias="taskId")


class UpdateTaskParams(TaskParams):
    input_responses: dict[str, JsonValue] = Field(alias="inputResponses")


def declared(ctx: ServerRequestContext[object, object]) -> bool:
    """The client declared the tasks extension on this (2026-07-28) request."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    return bool(capabilities and capabilities.extensions and TASKS_EXTENSION in capabilities.extensions)


class TasksExtension(Extension):
    identifier = TASKS_EXTENSION

    def __init__(self, backend: TasksBackend, options: ServerOptions) -> None:
        self.backend = backend
        self.options = options

    def methods(self) -> Sequence[MethodBinding]:
        versions = frozenset(MODERN_PROTOCOL_VERSIONS)
        return [
            MethodBinding("tasks/get", TaskParams, self._get, protocol_versions=versions),
            MethodBinding("tasks/update", UpdateTaskParams, self._update, protocol_versions=versions),
            MethodBinding("tasks/cancel", TaskParams, self._cancel, protocol_versions=versions),
            MethodBinding("tasks/result", TaskParams, self._result, protocol_versions=versions),
        ]

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[object, object], call_next: CallNext
    ) -> HandlerResult:
        if params.name not in TASK_TOOLS or not declared(ctx):
            return await call_next(ctx)
        # The gate (middleware, above this) has checked scope and arguments; the tool submits.
        result = await call_next(ctx)
        body = getattr(result, "structured_content", None)
        if getattr(result, "is_error", False) or not isinstance(body, dict) or "task_id" not in body:
            return result
        view = await self._view(body["task_id"])
        return {"resultType": "task", **_task_fields(view)}

    async def _get(self, ctx: ServerRequestContext[object, object], params: TaskParams) -> dict[str, object]:
        _require(ctx)
        view = await self._view(params.task_id)
        fields = _task_fields(view)
        if fields["status"] == "completed":
            fields["result"] = _final_result(view)
        elif fields["status"] == "input_required" and view.pending_confirmation is not None:
            pending = view.pending_confirmation
            ask = ElicitRequest(
                params=ElicitRequestFormParams(
                    message=f"codeloop task {view.task_id} wants to: {pending.question}. Allow?",
                    requested_schema=Confirm.model_json_schema(),
                )
            )
            fields["inputRequests"] = {
                pending.request_id: ask.model_dump(by_alias=True, mode="json", exclude_none=True)
            }
        return {"resultType": "complete", **fields}

    async def _update(
        self, ctx: ServerRequestContext[object, object], params: UpdateTaskParams
    ) -> dict[str, object]:
        _require(ctx)
        await self._view(params.task_id)  # not found for another principal's task
        principal, _ = caller(self.options)
        for request_id, response in params.input_responses.items():
            content = response.get("content") if isinstance(response, dict) else None
            approve = (
                isinstance(response, dict)
                and response.get("action") == "accept"
                and isinstance(content, dict)
                and content.get("approve") is True
            )
            await self.backend.answer(principal, params.task_id, request_id, approve=approve)
        return {"resultType": "complete"}

    async def _cancel(
        self, ctx: ServerRequestContext[object, object], params: TaskParams
    ) -> dict[str, object]:
        _require(ctx)
        principal, _ = caller(self.options)
        if await self.backend.cancel(principal, params.task_id) is None:
            raise _not_found(params.task_id)
        return {"resultType": "complete"}

    async def _result(
        self, ctx: ServerRequestContext[object, object], params: TaskParams
    ) -> dict[str, object]:
        """Blocks until the task ended, then its `submit_task` result (for clients of the earlier
        draft, SEP-1686, which fetch the result apart from the status)."""
        _require(ctx)
        principal, _ = caller(self.options)

        async def quiet(view: TaskView, message: str) -> None:
            pass

        view = await self._view(params.task_id)
        while not view.ended:
            waited = await self.backend.wait(
                principal, params.task_id, timeout_s=MAX_WAIT_S, on_progress=quiet, until_question=False
            )
            view = waited if waited is not None else view
        return {"resultType": "complete", **_final_result(view)}

    async def _view(self, task_id: str) -> TaskView:
        principal, _ = caller(self.options)
        view = await self.backend.get(principal, task_id)
        if view is None:
            raise _not_found(task_id)
        return view


def _require(ctx: ServerRequestContext[object, object]) -> None:
    if not declared(ctx):
        raise MCPError(
            code=-32021,  # missing required client capability (SEP-2133)
            message=f"tasks/* belong to the {TASKS_EXTENSION} extension; declare it on the request",
            data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
        )


def _not_found(task_id: str) -> MCPError:
    return MCPError(code=INVALID_PARAMS, message=f"Task not found: {task_id!r}")


def _final_result(view: TaskView) -> dict[str, object]:
    final = Submitted(task_id=view.task_id, status=view.status, task=view)
    return CallToolResult(
        content=[TextContent(type="text", text=final.model_dump_json())],
        structured_content=final.model_dump(mode="json"),
    ).model_dump(by_alias=True, mode="json", exclude_none=True)


def _task_fields(view: TaskView) -> dict[str, object]:
    if view.status == "cancelled":
        status = "cancelled"
    elif view.ended:
        status = "completed"  # how it ended (done, handed off, failed) is in the result's view
    elif view.pending_confirmation is not None:
        status = "input_required"
    else:
        status = "working"
    now = datetime.now(UTC)
    created = now - timedelta(seconds=view.elapsed_s)
    message = view.status + (f" ({view.stage})" if view.stage else "") + f", step {view.step}"
    return {
        "taskId": view.task_id,
        "status": status,
        "statusMessage": message,
        "createdAt": created.isoformat(),
        "lastUpdatedAt": now.isoformat(),
        "ttlMs": None,  # the task's record stays on the bus; nothing expires it
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
