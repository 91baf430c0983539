"""The tasks server over streamable HTTP against a running `codeloop serve`: two principals who see
only their own tasks, a cancel followed through the task's resource, and a task that outlives a
SIGKILLed serve.

One serve runs the real pipeline (scripted models); `codeloop mcp tasks --transport http` with a
token file of two principals submits to its bus, and serve's own hosted tasks server (principal
`serve`, its generated token) carries the task across the restart.
"""

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from pydantic import JsonValue

from codeloop.testing import make_repo
from tests.codeloop.serve_support import running_serve
from tests.e2e.conftest import model
from tests.e2e.tasks_support import tasks_over_http
from tests.processes import processes_mentioning
from tests.support.repos import CALC

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
ALICE, BOB = "alice-token-0123456789abcdef", "bob-token-0123456789abcdef"
SERVE_ARGS = ("--pipeline", "auto", "--mcp-scopes", "read,write,execute", "--ack-wait", "2", "--no-metrics")


@asynccontextmanager
async def http_client(url: str, token: str) -> AsyncIterator[Client]:
    """The MCP client over streamable HTTP with the SDK's own timeouts (long reads: a wait, a listen)."""
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client


async def call(client: Client, name: str, **arguments: JsonValue) -> dict[str, Any]:
    result = await client.call_tool(name, arguments, read_timeout_seconds=120)
    assert not result.is_error, result.content
    return result.structured_content or {}


async def error_type(client: Client, name: str, **arguments: JsonValue) -> str:
    result = await client.call_tool(name, arguments)
    assert result.is_error
    return (result.structured_content or {}).get("type", "")


async def wait_until_ended(client: Client, task_id: str) -> dict[str, Any]:
    while True:
        view = await call(client, "wait_task", task_id=task_id, timeout_s=30)
        if view["result"] is not None:
            return view


def serve_token(note: dict[str, Any]) -> str:
    lines = Path(note["mcp"]["token_file"]).read_text().splitlines()
    return next(line.split()[0] for line in lines if line and not line.startswith("#"))


async def test_principals_are_apart_a_cancel_is_followed_and_a_task_outlives_a_killed_serve(
    tmp_path: Path,
) -> None:
    home, root = tmp_path / "home", tmp_path / "root"
    make_repo(root / "calc", CALC)
    token_file = tmp_path / "tokens"
    token_file.write_text(f"{ALICE} alice read,write,execute\n{BOB} bob read,write,execute\n")
    token_file.chmod(0o600)
    marker = tmp_path / "coder-started"
    with anyio.fail_after(420):
        async with running_serve(home, *SERVE_ARGS, "--mcp-root", str(root)) as (first_serve, note):
            assert "tasks" in note["mcp"]["urls"]
            async with (
                tasks_over_http(home, root, token_file) as url,
                http_client(url, ALICE) as alice,
                http_client(url, BOB) as bob,
            ):
                submitted = await call(
                    alice,
                    "submit_task",
                    task="look around",
                    repo="calc",
                    mode="write",
                    model=model("slow_forever"),
                    max_steps=6,
                )
                task_id = submitted["task_id"]
                uri = f"codeloop://tasks/{task_id}"

                # Bob cannot tell Alice's task from one that does not exist.
                assert await error_type(bob, "get_task", task_id=task_id) == "not_found"
                assert await error_type(bob, "wait_task", task_id=task_id, timeout_s=1) == "not_found"
                assert await error_type(bob, "cancel_task", task_id=task_id) == "not_found"
                assert (
                    await error_type(
                        bob, "answer_confirmation", task_id=task_id, request_id="r1", approve=True
                    )
                    == "not_found"
                )
                with pytest.raises(Exception, match="no task"):
                    await bob.read_resource(uri)
                with pytest.raises(Exception, match="of yours"):
                    async with bob.listen(resource_subscriptions=[uri]):
                        pass
                assert (await call(bob, "list_tasks"))["tasks"] == []
                assert [t["task_id"] for t in (await call(alice, "list_tasks"))["tasks"]] == [task_id]

                # Alice follows her task through its resource, and cancels it once it is coding.
                seen: list[str] = []
                coding = anyio.Event()
                async with (
                    alice.listen(resource_subscriptions=[uri]) as updates,
                    anyio.create_task_group() as tg,
                ):

                    async def follow() -> None:
                        async for _ in updates:
                            status = json.loads((await alice.read_resource(uri)).contents[0].text)["status"]  # type: ignore[union-attr] - a JSON resource is text contents
                            seen.append(status)
                            if status == "coding":
                                coding.set()
                            if status == "cancelled":
                                return

                    tg.start_soon(follow)
                    await coding.wait()
                    await call(alice, "cancel_task", task_id=task_id)
                    with anyio.fail_after(20):  # within seconds, not at the coder's end
                        ended = await wait_until_ended(alice, task_id)
                    assert ended["status"] == "cancelled" and ended["result"]["status"] == "cancelled"
                    with anyio.fail_after(20):
                        while not seen or seen[-1] != "cancelled":  # noqa: ASYNC110 - the listener appends
                            await anyio.sleep(0.05)
                    tg.cancel_scope.cancel()
                assert "planning" in seen and "coding" in seen and seen[-1] == "cancelled"
                assert len(seen) >= 5  # one update per event of the task, not one per poll

                # A task submitted through serve's own tasks server survives serve's SIGKILL.
                async with http_client(note["mcp"]["urls"]["tasks"], serve_token(note)) as hosted:
                    crash = await call(
                        hosted,
                        "submit_task",
                        task=f"add(2, 3) returns -1\nmarker: {marker}",
                        repo="calc",
                        mode="write",
                        model=model("hang_once"),
                    )
                    with anyio.fail_after(120):
                        while not marker.exists():  # noqa: ASYNC110 - the coder in serve writes it
                            await anyio.sleep(0.1)
                first_serve.kill()
                await first_serve.wait()
                async with running_serve(home, *SERVE_ARGS, "--mcp-root", str(root)) as (_, second):
                    async with http_client(second["mcp"]["urls"]["tasks"], serve_token(second)) as hosted:
                        assert (await call(hosted, "get_task", task_id=crash["task_id"]))["result"] is None
                        done = await wait_until_ended(hosted, crash["task_id"])
                    assert done["status"] == "done", done["result"]["report"]
                    assert done["result"]["files_changed"] == ["calc/__init__.py"]
                    # Alice's server rode out the restart on the same bus.
                    assert (await call(alice, "get_task", task_id=task_id))["status"] == "cancelled"
    assert processes_mentioning(tmp_path) == []
