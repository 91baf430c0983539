"""The tasks server's `verify_patch` through a real MCP client session: a correct, a wrong and an
untested patch of a repository made in the test are `passed`, `failed` and `unverified`; the
tool needs the `execute` scope; the repository under the root is never written. A real
nats-server behind the server (its backend), the process sandbox behind the verifier."""

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from bus.config import BusConfig
from bus.connection import open_bus
from codeloop.config.serve_note import client_config_for
from codeloop.services.tasks_backend import BusTasks
from codeloop.wiring.judge import patch_verifier
from codeloop.wiring.process import Hosting, Workers, serve
from codeloop.wiring.tools import InProcessTools
from tests.codeloop.judging import MEAN_TEST, TASK, TOP_TEST, ops_repo, patches
from tool_servers.protocol.scopes import Scope
from tool_servers.protocol.spec import ServerOptions
from tool_servers.tasks.server import build_tasks_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[dict[str, object]]:
    """Two tasks servers on one bus and root: one granted read and execute, one read only."""
    ops_repo(tmp_path / "root" / "ops")
    config = BusConfig(state_dir=tmp_path / "state")
    verifier = patch_verifier(tmp_path / "home", tools=InProcessTools(sandbox_backend="process"))
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
            backend = await BusTasks.open(bus)

            def build(scopes: frozenset[Scope]) -> Any:
                options = ServerOptions(scopes=scopes)
                return build_tasks_server(tmp_path / "root", options, backend, verifier=verifier)  # pyright: ignore[reportArgumentType] - BusTasks.changes is an async generator function, which the protocol's iterator describes

            yield {
                "execute": build(frozenset({Scope.READ, Scope.EXECUTE})),
                "read": build(frozenset({Scope.READ})),
            }
        stop.set()


def _status(repo: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain", "--ignored"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


async def test_verify_patch_judges_correct_wrong_and_untested_patches(
    servers: dict[str, Any], tmp_path: Path
) -> None:
    """Our contract: `verify_patch(repo, task, patch, mode?)` returns the report `codeloop verify
    --json` prints; other agents may use codeloop as their verifier."""
    repo = tmp_path / "root" / "ops"
    made = patches(repo)
    before = _status(repo)
    verdicts: dict[str, dict[str, Any]] = {}
    with anyio.fail_after(600):
        async with Client(servers["execute"]) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert "verify_patch" in listed and listed["verify_patch"].output_schema is not None
            progress: list[str] = []

            async def on_progress(_done: float, _total: float | None, message: str | None) -> None:
                progress.append(message or "")

            for name, patch in made.items():
                result = await client.call_tool(
                    "verify_patch",
                    {"repo": "ops", "task": TASK, "patch": patch},
                    progress_callback=on_progress,  # pyright: ignore[reportArgumentType] - the callback matches the SDK's progress signature
                )
                assert not result.is_error, result.content
                verdicts[name] = result.structured_content or {}
    # Each call said at once that it started: a client's request timeout keeps being reset.
    assert progress[:1] == ["judging the patch on a copy of ops"] and len(progress) >= 3
    assert verdicts["correct"]["verdict"] == "passed" and verdicts["correct"]["evidence"] == [MEAN_TEST]
    assert verdicts["correct"]["evidence_kind"] == "flip"
    assert verdicts["wrong"]["verdict"] == "failed"
    assert TOP_TEST in {f["test_id"] for f in verdicts["wrong"]["failures"]}
    assert verdicts["untested"]["verdict"] == "unverified" and verdicts["untested"]["evidence"] == []
    assert {"checks", "failures", "summary", "evidence_kind"} <= set(verdicts["correct"])
    assert _status(repo) == before


async def test_verify_patch_needs_the_execute_scope_and_a_repository_under_the_root(
    servers: dict[str, Any], tmp_path: Path
) -> None:
    """Our tool protocol: a tool outside the grant is not listed and calling it names the scope;
    a repository outside the root is refused before anything runs."""
    patch = patches(tmp_path / "root" / "ops")["correct"]
    with anyio.fail_after(60):
        async with Client(servers["read"]) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            refused = await client.call_tool("verify_patch", {"repo": "ops", "task": TASK, "patch": patch})
        async with Client(servers["execute"]) as client:
            outside = await client.call_tool("verify_patch", {"repo": "../..", "task": TASK, "patch": patch})
            blank = await client.call_tool("verify_patch", {"repo": "ops", "task": "  ", "patch": patch})
    assert "verify_patch" not in listed and "submit_task" in listed
    assert refused.is_error and "execute" in str(refused.content[0])
    assert outside.is_error and blank.is_error
    assert "blank" in str(blank.content[0])
    assert not (tmp_path / "home" / "work").exists() or not any((tmp_path / "home" / "work").iterdir())
