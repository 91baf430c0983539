"""The tasks server's bus backend: the per-principal cap, a wait that times out, listing, and the
one submission check. A real nats-server with only the orchestrator running, so tasks stay
unfinished until cancelled; the client is the SDK's in-memory MCP session."""

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client import IncomingMessage
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import ResourceUpdatedNotification
from pydantic import JsonValue

from bus.config import BusConfig
from bus.connection import open_bus
from codeloop.config.serve_note import client_config_for
from codeloop.services.tasks_backend import BusTasks, check_submission
from codeloop.testing import make_repo
from codeloop.wiring.process import Hosting, Workers, serve
from tests.support.repos import CALC
from tool_servers.protocol.spec import ServerOptions
from tool_servers.tasks.backend import Submission, SubmissionRefused
from tool_servers.tasks.server import build_tasks_server

pytestmark = pytest.mark.anyio


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[MCPServer[object]]:
    make_repo(tmp_path / "root" / "calc", CALC)
    config = BusConfig(state_dir=tmp_path / "state")
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        note = await tg.start(
            lambda task_status: serve(
                config,
                stop=stop,
                workers=Workers(roles=("orchestrator",)),
                hosting=Hosting(metrics=None),
                task_status=task_status,
            )
        )
        async with open_bus(client_config_for(config, note)) as bus:
            backend = await BusTasks.open(bus, max_running=2)
            yield build_tasks_server(tmp_path / "root", ServerOptions(), backend)  # pyright: ignore[reportArgumentType] - BusTasks.changes is an async generator function, which the protocol's iterator describes
        stop.set()


@pytest.fixture
async def client(server: MCPServer[object]) -> AsyncIterator[Client]:
    async with Client(server) as mcp:
        yield mcp


async def call(client: Client, name: str, **arguments: JsonValue) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    return result.structured_content or {}


async def test_a_principal_past_its_cap_is_refused_until_one_of_its_tasks_ends(client: Client) -> None:
    first = (await call(client, "submit_task", task="what does add do?", repo="calc"))["task_id"]
    second = (await call(client, "submit_task", task="what does mul do?", repo="calc"))["task_id"]
    refused = await client.call_tool("submit_task", {"task": "a third", "repo": "calc"})
    assert refused.is_error
    body = refused.structured_content or {}
    assert body["type"] == "conflict" and body["details"]["cap"] == 2
    assert set(body["details"]["running"]) == {first, second} and "cancel one" in body["message"]

    # A wait that times out returns the view, not an error.
    with anyio.fail_after(30):
        waited = await call(client, "wait_task", task_id=second, timeout_s=0.5)
    assert waited["task_id"] == second and waited["result"] is None

    listed = await call(client, "list_tasks")
    assert [t["task_id"] for t in listed["tasks"]] == [second, first]  # newest first
    assert [t["task_id"] for t in (await call(client, "list_tasks", limit=1))["tasks"]] == [second]

    cancelled = await call(client, "cancel_task", task_id=first)
    assert cancelled["task_id"] == first
    with anyio.fail_after(30):
        ended = await call(client, "wait_task", task_id=first, timeout_s=25)
    assert ended["status"] == "cancelled" and ended["result"]["status"] == "cancelled"
    assert [t["task_id"] for t in (await call(client, "list_tasks", status="cancelled"))["tasks"]] == [first]
    assert not (await client.call_tool("submit_task", {"task": "a third", "repo": "calc"})).is_error


def test_the_submission_check_names_what_is_wrong(tmp_path: Path) -> None:
    def submission(**changes: Any) -> Submission:
        return Submission(**{"principal": "p", "text": "t", "repo": tmp_path, "mode": "read", **changes})

    for changes, field in [
        ({"options": {"model": "nosuch:model"}}, "model"),
        ({"options": {"coder_model": "noprefix"}}, "coder_model"),
        ({"options": {"planner_model": f"function:{tmp_path}/missing.py:decide"}}, None),
        ({"options": {"max_revisions": -1}}, "max_revisions"),
        ({"options": {"timeout_s": 0}}, "timeout_s"),
        ({"options": {"token_budget": 0}}, "token_budget"),
        ({"options": {"pipeline": "nosuch"}}, "pipeline"),
    ]:
        with pytest.raises(SubmissionRefused) as refused:
            check_submission(submission(**changes))
        if field is not None:
            assert refused.value.details.get("field") == field and field in str(refused.value)
    names, budgets, pipeline, require = check_submission(
        submission(options={"max_steps": 3, "timeout_s": 60, "pipeline": "explain", "require_verified": True})
    )
    assert pipeline is not None
    assert (budgets.max_steps, budgets.deadline_s, pipeline.name, require) == (3, 60, "explain", True)
    # The repository's configuration gives what the client left out, and declares its pipelines.
    (tmp_path / "codeloop.toml").write_text('[budgets]\nmax_steps = 7\n[pipelines]\nquick = ["code:coder"]\n')
    names, budgets, pipeline, require = check_submission(
        submission(mode="write", options={"pipeline": "quick"})
    )
    assert pipeline is not None
    assert (budgets.max_steps, pipeline.stages, require) == (7, ["code:coder"], False)
    with pytest.raises(SubmissionRefused, match="no pipeline named 'quik'; known: .*quick") as refused:
        check_submission(submission(options={"pipeline": "quik"}))
    assert refused.value.details["field"] == "pipeline"


def test_model_keys_are_checked_here_unless_the_workers_hold_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tasks server without the provider's key refuses the submission naming the variable; one
    that leaves credentials to the workers (its own pod on a remote bus) accepts it, and still
    refuses a provider that does not exist."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)

    def submission(model: str) -> Submission:
        return Submission(principal="p", text="t", repo=tmp_path, mode="read", options={"model": model})

    with pytest.raises(SubmissionRefused, match="ANTHROPIC_API_KEY") as refused:
        check_submission(submission("anthropic:claude-sonnet-4-5"))
    assert refused.value.details.get("field") == "model"
    names, _, _, _ = check_submission(submission("anthropic:claude-sonnet-4-5"), credentials=False)
    assert names.default == "anthropic:claude-sonnet-4-5"
    with pytest.raises(SubmissionRefused, match="unknown provider 'nosuch'"):
        check_submission(submission("nosuch:model"), credentials=False)


async def test_a_configured_pipeline_is_carried_and_one_nothing_serves_is_refused(
    client: Client, tmp_path: Path
) -> None:
    (tmp_path / "root" / "calc" / "codeloop.toml").write_text(
        '[pipelines]\nquick = ["code:coder"]\nodd = ["code:coder", "review:nobody"]\n'
    )
    refused = await client.call_tool(
        "submit_task", {"task": "fix add", "repo": "calc", "mode": "write", "pipeline": "odd"}
    )
    assert refused.is_error
    body = refused.structured_content or {}
    assert body["details"]["field"] == "pipeline" and "review:nobody" in body["message"]
    assert (await call(client, "list_tasks"))["tasks"] == []  # nothing was submitted

    task_id = (
        await call(client, "submit_task", task="fix add", repo="calc", mode="write", pipeline="quick")
    )["task_id"]
    with anyio.fail_after(30):  # only an orchestrator runs: the task's one stage waits for a coder
        while (view := await call(client, "get_task", task_id=task_id))["waiting_for"] is None:  # noqa: ASYNC110 - get_task is what a polling client calls
            await anyio.sleep(0.2)
    assert (view["waiting_for"], view["stage"]) == (
        "coder",
        "code",
    )  # not the planner: the pipeline was carried
    await call(client, "cancel_task", task_id=task_id)


@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")  # still what 2025-11-25 clients send
async def test_a_2025_client_subscribed_to_a_task_hears_of_its_changes(server: MCPServer[object]) -> None:
    updated: list[str] = []

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            updated.append(message.params.uri)

    async with Client(server, mode="legacy", message_handler=on_message) as legacy:
        task_id = (await call(legacy, "submit_task", task="what does add do?", repo="calc"))["task_id"]
        uri = f"codeloop://tasks/{task_id}"
        with pytest.raises(MCPError, match="of yours"):
            await legacy.session.subscribe_resource("codeloop://tasks/someone-elses")
        await legacy.session.subscribe_resource(uri)
        await call(legacy, "cancel_task", task_id=task_id)
        with anyio.fail_after(30):
            assert (await call(legacy, "wait_task", task_id=task_id, timeout_s=25))["status"] == "cancelled"
            while not updated:  # noqa: ASYNC110 - the notification arrives on its own
                await anyio.sleep(0.05)
        assert set(updated) == {uri}
