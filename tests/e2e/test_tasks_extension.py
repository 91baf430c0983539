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
from pydantic import ConfigDict, Field, JsonValue, TypeAdapter

from codeloop.testing import make_repo
from tests.e2e.conftest import model
from tests.e2e.tasks_support import TASKS_MODEL, call, tasks_server
from tests.support.repos import CALC

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


class UpdateParams(TaskIdParams):
    input_responses: dict[str, JsonValue] = Field(alias="inputResponses")


class TaskRequest(Request[UpdateParams | TaskIdParams, str]):
    name_param: ClassVar[str | None] = "taskId"  # SEP-2663: tasks/* carry the task id as Mcp-Name


async def task_request(session: Any, method: str, params: UpdateParams | TaskIdParams) -> dict[str, Any]:
    message = TaskRequest(method=method, params=params)
    return await session.send_request(message, TypeAdapter(dict[str, Any]), request_read_timeout_seconds=60)


class TasksClient(ClientExtension):
    """Resolves a task stub by polling `tasks/get`; approves what the task asks (`input_required`)
    through `tasks/update`; with `cancel`, sends `tasks/cancel` once the task is working."""

    identifier = EXTENSION

    def __init__(self) -> None:
        self.cancel = False
        self.stubs: list[TaskStub] = []
        self.statuses: list[str] = []
        self.questions: list[str] = []

    def claims(self) -> list[ResultClaim[TaskStub]]:
        return [ResultClaim(result_type="task", model=TaskStub, resolve=self.resolve)]

    async def resolve(self, stub: TaskStub, ctx: ClaimContext) -> CallToolResult:
        import anyio

        self.stubs.append(stub)
        task = TaskIdParams(task_id=stub.task_id)  # pyright: ignore[reportCallIssue] - the model populates by field name too; pyright sees only the alias
        cancelled = False
        with anyio.fail_after(240):
            while True:
                got = await task_request(ctx.session, "tasks/get", task)
                self.statuses.append(got["status"])
                if got["status"] == "completed":
                    return CallToolResult.model_validate(got["result"])
                if got["status"] == "cancelled":
                    return CallToolResult(content=[TextContent(type="text", text="cancelled")], is_error=True)
                if got["status"] == "input_required":
                    asks = got["inputRequests"]
                    self.questions += [ask["params"]["message"] for ask in asks.values()]
                    approval = {"action": "accept", "content": {"approve": True}}
                    update = UpdateParams(  # pyright: ignore[reportCallIssue] - the model populates by field name too; pyright sees only the alias
                        task_id=stub.task_id,  # pyright: ignore[reportCallIssue] - the model populates by field name too; pyright sees only the alias
                        input_responses={key: approval for key in asks},  # pyright: ignore[reportCallIssue] - the model populates by field name too; pyright sees only the alias
                    )
                    await task_request(ctx.session, "tasks/update", update)
                if self.cancel and not cancelled and got["status"] == "working":
                    await task_request(ctx.session, "tasks/cancel", task)
                    cancelled = True
                await anyio.sleep(got.get("pollIntervalMs", 1000) / 1000)


async def submit(client: Client, **arguments: JsonValue) -> CallToolResult:
    return await client.call_tool("submit_task", arguments, read_timeout_seconds=300)


async def test_a_client_with_the_tasks_extension_runs_submit_task_as_a_task(tmp_path: Path) -> None:
    root, home = tmp_path / "root", tmp_path / "home"
    make_repo(root / "calc", CALC)
    make_repo(root / "ok", {**CALC, "calc/__init__.py": CALC["calc/__init__.py"].replace("a - b", "a + b")})
    tasks = TasksClient()
    async with Client(tasks_server(root, home, "read,write"), extensions=[tasks]) as client:
        finished = await submit(
            client, task="add(2, 3) returns -1", repo="calc", mode="write", model=model("fix")
        )
        assert not finished.is_error, finished.content
        final = finished.structured_content or {}
        assert final["status"] == "done" and final["task"]["result"]["files_changed"] == ["calc/__init__.py"]
        assert tasks.stubs[0].task_id == final["task_id"] and tasks.stubs[0].status == "working"
        assert tasks.statuses[0] == "working" and tasks.statuses[-1] == "completed"
        # The earlier draft's tasks/result gives the same result for the finished task.
        again = await task_request(client.session, "tasks/result", TaskIdParams(task_id=final["task_id"]))  # pyright: ignore[reportCallIssue] - the model populates by field name too; pyright sees only the alias
        assert again["structuredContent"]["task"]["result"] == final["task"]["result"]

        # A confirmation inside the task is input_required; tasks/update answers it.
        confirmed = await submit(
            client, task="add a .env", repo="ok", mode="write", model=f"{TASKS_MODEL}:env_write"
        )
        assert not confirmed.is_error, confirmed.content
        assert "input_required" in tasks.statuses and ".env" in tasks.questions[0]
        assert (confirmed.structured_content or {})["task"]["result"]["files_changed"] == [".env"]

        tasks.cancel = True
        stopped = await submit(
            client, task="look around", repo="calc", mode="write", model=model("slow_forever"), max_steps=6
        )
        assert stopped.is_error and tasks.statuses[-1] == "cancelled"
        view = await call(client, "get_task", task_id=tasks.stubs[-1].task_id)
        assert view["status"] == "cancelled"
        # The protocol's tasks are the plain tools' tasks too: list_tasks shows them all.
        listed = {t["task_id"] for t in (await call(client, "list_tasks"))["tasks"]}
        assert listed == {stub.task_id for stub in tasks.stubs}
