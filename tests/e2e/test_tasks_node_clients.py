"""Clients in another language: the official TypeScript SDK and the MCP Inspector CLI list the tasks
server's tools with their schemas and call `submit_task` and `get_task` over streamable HTTP.

The npm packages are installed by the set-up (pinned versions, into a directory of the test
session); without a reachable npm registry the test is skipped, saying so.
"""

import json
import os
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from codeloop.testing import make_repo
from tests.e2e.tasks_support import TOOLS, tasks_over_http
from tests.support.repos import CALC

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
PACKAGES = ("@modelcontextprotocol/sdk@1.32.2", "@modelcontextprotocol/inspector@2.12.0")
TOKEN = "ts-client-token-0123456789abcdef"
_OFFLINE = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ECONNRESET", "network")


@pytest.fixture(scope="session")
def node_clients(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with the pinned npm packages installed and the TypeScript client script beside them."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed")
    where = tmp_path_factory.mktemp("node-clients")
    (where / "package.json").write_text('{"private": true, "type": "module"}\n')
    npm = ["npm", "install", "--no-audit", "--no-fund", "--cache", str(where / ".npm-cache"), *PACKAGES]
    done = anyio.run(lambda: anyio.run_process(npm, cwd=where, check=False))
    if done.returncode != 0:
        output = (done.stdout + done.stderr).decode(errors="replace")
        if any(marker in output for marker in _OFFLINE):
            pytest.skip(f"npm cannot reach its registry to install {', '.join(PACKAGES)}")
        pytest.fail(f"npm install failed:\n{output[-2000:]}")
    shutil.copy(Path(__file__).with_name("node") / "tasks_client.mjs", where / "tasks_client.mjs")
    return where


async def node(*args: str, cwd: Path, home: Path) -> Any:
    env = {"PATH": os.environ["PATH"], "HOME": str(home)}  # the Inspector keeps its catalog under HOME
    done = await anyio.run_process(["node", *args], cwd=cwd, env=env, check=False)
    assert done.returncode == 0, (done.stdout + done.stderr).decode(errors="replace")[-2000:]
    return json.loads(done.stdout)


async def test_the_typescript_sdk_and_the_inspector_cli_list_and_call_the_tasks_tools(
    tmp_path: Path, node_clients: Path
) -> None:
    root, home = tmp_path / "root", tmp_path / "home"
    make_repo(root / "calc", CALC)
    token_file = tmp_path / "tokens"
    token_file.write_text(f"{TOKEN} ts-client read\n")
    token_file.chmod(0o600)
    with anyio.fail_after(240):
        async with tasks_over_http(home, root, token_file) as url:
            ts = await node("tasks_client.mjs", url, TOKEN, cwd=node_clients, home=tmp_path)
            assert {tool["name"] for tool in ts["tools"]} == TOOLS
            for tool in ts["tools"]:
                assert tool["input"]["type"] == "object" and tool["output"]["type"] == "object", tool["name"]
            assert not ts["submitted"]["isError"] and ts["submitted"]["structured"]["status"] == "submitted"
            task_id = ts["submitted"]["structured"]["task_id"]
            assert not ts["got"]["isError"] and ts["got"]["structured"]["task_id"] == task_id

            inspector = [
                str(node_clients / "node_modules/.bin/mcp-inspector"),
                "--cli",
                url,
                "--transport",
                "http",
                "--header",
                f"Authorization: Bearer {TOKEN}",
            ]
            listed = await node(*inspector, "--method", "tools/list", cwd=node_clients, home=tmp_path)
            schemas = {tool["name"]: tool for tool in listed["tools"]}
            assert set(schemas) == TOOLS
            assert "task_id" in schemas["wait_task"]["inputSchema"]["properties"]
            assert "pending_confirmation" in schemas["get_task"]["outputSchema"]["properties"]
            call = [*inspector, "--method", "tools/call"]
            submitted = await node(
                *call,
                "--tool-name",
                "submit_task",
                "--tool-arg",
                "task=What does mul do?",
                "repo=calc",
                cwd=node_clients,
                home=tmp_path,
            )
            assert not submitted.get("isError") and submitted["structuredContent"]["status"] == "submitted"
            second = submitted["structuredContent"]["task_id"]
            got = await node(
                *call,
                "--tool-name",
                "get_task",
                "--tool-arg",
                f"task_id={second}",
                cwd=node_clients,
                home=tmp_path,
            )
            assert not got.get("isError") and got["structuredContent"]["task_id"] == second
            # Both clients acted as the one principal of the token: its list holds both tasks.
            mine = await node(*call, "--tool-name", "list_tasks", cwd=node_clients, home=tmp_path)
            assert {t["task_id"] for t in mine["structuredContent"]["tasks"]} == {task_id, second}
