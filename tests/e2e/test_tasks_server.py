"""`codeloop mcp tasks` over stdio, driven by the real MCP client: submit, follow with progress,
confirm through elicitation or `answer_confirmation`, bad input, and the grant bounding the mode.

The first server process starts the embedded bus with every role (no serve is running); the
other two find it through the state directory's serve note, as a desktop client's second server
would. All three share one principal (stdio), so they see the same tasks.
"""

import json
import shutil
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from agents.messages import TaskResult
from codeloop.testing import make_repo
from tests.e2e.conftest import model, tree_digest
from tests.e2e.tasks_support import TASKS_MODEL, TOOLS, call, refused, tasks_server, wait_until_ended
from tests.support.repos import CALC
from tests.tool_servers.ts_helpers import Elicitor

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_a_stdio_client_runs_a_task_to_a_patch_it_can_apply(tmp_path: Path) -> None:
    root, home = tmp_path / "root", tmp_path / "home"
    repo = make_repo(root / "calc", CALC)
    # Its tests pass as it is: the tasks that write `.env` need no fix to be verified.
    make_repo(root / "ok", {**CALC, "calc/__init__.py": CALC["calc/__init__.py"].replace("a - b", "a + b")})
    before = tree_digest(root)
    declining = Elicitor(action="decline")
    async with Client(
        tasks_server(root, home, "read,write,execute"), elicitation_callback=declining
    ) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) == TOOLS | {"verify_patch"}  # an execute grant
        assert all(
            tool.input_schema.get("properties") is not None and tool.output_schema for tool in listed.values()
        )
        assert set(listed["submit_task"].input_schema["properties"]) >= {
            "task",
            "repo",
            "mode",
            "model",
            "pipeline",
        }

        # Bad input: each a tool error saying what is wrong, and nothing submitted.
        assert (await refused(client, "get_task", task_id="no-such-task"))["type"] == "not_found"
        outside = await refused(client, "submit_task", task="fix add", repo="../elsewhere")
        assert outside["type"] == "permission_denied" and "'..'" in outside["message"]
        assert (await refused(client, "submit_task", task=""))["type"] == "invalid_arguments"
        assert (await refused(client, "submit_task", task="   "))["type"] == "invalid_arguments"
        assert (await refused(client, "submit_task", task="x" * 200_000))["type"] == "invalid_arguments"
        unknown = await refused(client, "submit_task", task="fix add", repo="calc", model="nosuch:model")
        assert unknown["type"] == "invalid_arguments" and "nosuch" in unknown["message"]
        negative = await refused(client, "submit_task", task="fix add", repo="calc", max_steps=-1)
        assert negative["type"] == "invalid_arguments" and "max_steps" in negative["message"]
        pipeline = await refused(client, "submit_task", task="fix add", repo="calc", pipeline="nosuch")
        assert pipeline["type"] == "invalid_arguments" and "fix" in pipeline["message"]
        assert (await call(client, "list_tasks"))["tasks"] == []

        # A task to its end: progress on the way, the result is the `run --json` object.
        submitted = await call(
            client,
            "submit_task",
            task="add(2, 3) returns -1",
            repo="calc",
            mode="execute",
            model=model("fix"),
        )
        assert submitted["status"] == "submitted"
        progress: list[str] = []
        view = await wait_until_ended(client, submitted["task_id"], progress)
        result = TaskResult.model_validate(view["result"])
        assert result.status == "done" and view["status"] == "done", result.report
        assert result.files_changed == ["calc/__init__.py"]
        assert set(view["result"]) == set(TaskResult.model_fields)
        assert any("coding" in line for line in progress) and any("verifying" in line for line in progress)
        assert await call(client, "get_task", task_id=submitted["task_id"]) == view
        resource = await client.read_resource(f"codeloop://tasks/{submitted['task_id']}")
        assert json.loads(resource.contents[0].text) == view  # type: ignore[union-attr] - a JSON resource is text contents

        # The patch is the client's to apply: it applies to a copy of the repository and its tests pass.
        copy = tmp_path / "copy"
        shutil.copytree(repo, copy)
        await anyio.run_process(["git", "apply"], input=(result.patch or "").encode(), cwd=copy)
        tests = await anyio.run_process(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=copy, check=False
        )
        assert tests.returncode == 0, tests.stdout

        # A high-risk write inside a task reaches this client as an elicitation; it declines.
        asked = await call(
            client,
            "submit_task",
            task="add a .env",
            repo="ok",
            mode="write",
            model=f"{TASKS_MODEL}:env_write",
        )
        declined = await wait_until_ended(client, asked["task_id"])
        assert declining.questions and ".env" in declining.questions[0]
        assert ".env" not in declined["result"]["files_changed"]

        # A client that cannot elicit sees the confirmation in the view and answers it.
        async with Client(tasks_server(root, home, "read,write")) as plain:
            task = await call(
                plain,
                "submit_task",
                task="add a .env",
                repo="ok",
                mode="write",
                model=f"{TASKS_MODEL}:env_write",
            )
            with anyio.fail_after(120):
                view = await call(plain, "wait_task", task_id=task["task_id"], timeout_s=100)
            pending = view["pending_confirmation"]
            assert pending is not None and ".env" in pending["question"] and view["result"] is None
            answered = await call(
                plain,
                "answer_confirmation",
                task_id=task["task_id"],
                request_id=pending["request_id"],
                approve=True,
            )
            assert answered["approved"] is True
            again = await refused(
                plain,
                "answer_confirmation",
                task_id=task["task_id"],
                request_id=pending["request_id"],
                approve=False,
            )
            assert again["type"] == "conflict"
            approved = await wait_until_ended(plain, task["task_id"])
            assert approved["result"]["files_changed"] == [".env"]

        # A read grant answers questions only: an execute-mode task is refused, naming the scope.
        async with Client(tasks_server(root, home, "read")) as reader:
            denied = await refused(reader, "submit_task", task="fix add", repo="calc", mode="execute")
            assert denied["type"] == "permission_denied" and denied["details"]["missing_scope"] == "execute"
            assert len((await call(reader, "list_tasks"))["tasks"]) == 3
    assert tree_digest(root) == before  # the served root itself was never written
