"""A client that declares the MCP tasks extension (`io.modelcontextprotocol/tasks`) runs
`submit_task` as a protocol task: the call returns a task stub, `tasks/get` follows it to its
result, `tasks/cancel` stops another one. The client side is written here against the SDK's
client extension API, the way any client of the extension would be."""

from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp_types import CallToolResult, Request, RequestParams, Result, TextContent
from pydantic import ConfigDict, Field, TypeAdapter

from tests.e2e.conftest import make_repo, model
from tests.e2e.tasks_support import call, tasks_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
EXTENSION = "io.modelcontextprotocol/tasks"


class TaskStub(Result):
    model_config = ConfigDict(populate_by_name=True, extra="allow")

    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str


class TaskIdParams(RequestParams):
    model_config = ConfigDict(populate_by_name=True)

    task_id: str = Field(alias="taskId")


class TaskRequest(Request[TaskIdParams, str]):
    name_param: ClassVar[str | None] = "taskId"  # SEP-2663: tasks/* carry the task id as Mcp-Name


class TasksClient(ClientExtension):
    """Resolves a task stub by polling `tasks/get`; with `cancel`, first sends `tasks/cancel`."""

    identifier = EXTENSION

    def __init__(self) -> None:
        self.cancel = False
        self.stubs: list[TaskStub] = []
        self.statuses: list[str] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskStub, resolve=self.resolve)]

    async def request(self, ctx: ClaimContext, method: str, task_id: str) -> dict[str, Any]:
        message = TaskRequest(method=method, params=TaskIdParams(task_id=task_id))
        return await ctx.session.send_request(
            message, TypeAdapter(dict[str, Any]), request_read_timeout_seconds=30
        )

    async def resolve(self, stub: TaskStub, ctx: ClaimContext) -> CallToolResult:
        import anyio

        self.stubs.append(stub)
        cancelled = False
        with anyio.fail_after(240):
            while True:
                got = await self.request(ctx, "tasks/get", stub.task_id)
                self.statuses.append(got["status"])
                if got["status"] == "completed":
                    return CallToolResult.model_validate(got["result"])
                if got["status"] == "cancelled":
                    return CallToolResult(content=[TextContent(type="text", text="cancelled")], is_error=True)
                if self.cancel and not cancelled and got["status"] == "working":
                    await self.request(ctx, "tasks/cancel", stub.task_id)
                    cancelled = True
                await anyio.sleep(got.get("pollIntervalMs", 1000) / 1000)


async def test_a_client_with_the_tasks_extension_runs_submit_task_as_a_task(tmp_path: Path) -> None:
    root, home = tmp_path / "root", tmp_path / "home"
    make_repo(root / "calc")
    tasks = TasksClient()
    async with Client(tasks_server(root, home, "read,write"), extensions=[tasks]) as client:
        finished = await client.call_tool(
            "submit_task", {"task": "add(2, 3) returns -1", "repo": "calc", "mode": "write", "model": model("fix")},
            read_timeout_seconds=300,
        )  # fmt: skip
        assert not finished.is_error, finished.content
        final = finished.structured_content or {}
        assert final["status"] == "done" and final["task"]["result"]["files_changed"] == ["calc/__init__.py"]
        assert tasks.stubs[0].task_id == final["task_id"] and tasks.stubs[0].status == "working"
        assert tasks.statuses[0] == "working" and tasks.statuses[-1] == "completed"

        tasks.cancel = True
        stopped = await client.call_tool(
            "submit_task", {"task": "look around", "repo": "calc", "mode": "write", "model": model("slow_forever"),
                            "max_steps": 6},
            read_timeout_seconds=300,
        )  # fmt: skip
        assert stopped.is_error and tasks.statuses[-1] == "cancelled"
        view = await call(client, "get_task", task_id=tasks.stubs[1].task_id)
        assert view["status"] == "cancelled"
        # The same task is the plain tools' too: list_tasks shows both.
        assert {t["task_id"] for t in (await call(client, "list_tasks"))["tasks"]} == {
            s.task_id for s in tasks.stubs
        }
