"""The workspace service in its own process: a worker holding a model key codes and verifies through
it over HTTP MCP only, the service holds no key, and each workspace's token opens that workspace alone."""

import json
import os
import sys
from pathlib import Path

import anyio
import httpx2
import pytest

from agents.client import submit_task, watch_task
from agents.messages import ModelNames, TaskResult, TaskSubmitted
from agents.workspace import SnapshotRef, capture_snapshot
from agents.workspace.messages import (
    OPEN_SUBJECT,
    WorkspaceClose,
    WorkspaceClosed,
    WorkspaceOpen,
    WorkspaceOpened,
    service_subject,
)
from bus.config import BusConfig
from bus.connection import Bus, open_bus
from bus.requests import request
from codeloop.config.serve_note import client_config_for
from codeloop.testing import make_repo
from codeloop.wiring.process import Workers, serve
from tests.codeloop.serve_support import http_client
from tests.e2e.conftest import model
from tests.processes import stop_process
from tests.support.repos import CALC

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
ROLES_HERE = ("orchestrator", "planner", "retriever")
PLANTED = "sk-planted-0123456789abcdefghijklmnop"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}


async def _serve_json(args: list[str], env: dict[str, str], log: Path) -> tuple[anyio.abc.Process, dict]:
    with log.open("wb") as stderr:  # read when an assertion fails
        process = await anyio.open_process(
            [sys.executable, "-m", "codeloop", "serve", "--json", "--no-metrics", *args],
            env=env,
            stderr=stderr,
        )
    assert process.stdout is not None
    buffer = b""
    with anyio.fail_after(60):
        while b"\n" not in buffer:
            buffer += await process.stdout.receive()
    return process, json.loads(buffer.split(b"\n", 1)[0])


def _family(pid: int) -> list[int]:
    """`pid` and every live descendant of it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    family, todo = [], [pid]
    while todo:
        family.append(todo.pop())
        todo.extend(children.get(family[-1], []))
    return family


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _environ(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


def _files_mentioning(root: Path, needle: bytes) -> list[str]:
    return [
        str(p) for p in root.rglob("*") if p.is_file() and not p.is_symlink() and needle in p.read_bytes()
    ]


async def _status(url: str, token: str | None) -> int:
    headers = {"Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx2.AsyncClient() as http:
        return (await http.post(url, json=INITIALIZE, headers=headers)).status_code


async def _assert_each_token_opens_its_workspace_only(bus: Bus, snapshot: SnapshotRef, ws_home: Path) -> None:
    """Tokens: each workspace's opens that workspace only, and only for its grant; closing a
    workspace revokes its token."""

    async def open_one(label: str) -> WorkspaceOpened:
        ask = WorkspaceOpen(task_id="t-direct", label=label, snapshot=snapshot, scopes=["read"])
        opened = await request(bus, OPEN_SUBJECT, ask, timeout_s=60)
        assert isinstance(opened, WorkspaceOpened), opened
        return opened

    first, second = await open_one("a"), await open_one("b")
    assert first.token != second.token and first.urls["fs"] != second.urls["fs"]
    url = first.urls["fs"]
    assert await _status(url, None) == 401
    assert await _status(url, "not-a-token-of-anyone-here") == 401
    assert await _status(url, second.token) == 401
    assert await _status(url, first.token) == 200
    async with http_client(url, first.token) as fs:
        names = {t.name for t in (await fs.list_tools()).tools}
        assert "read_file" in names and "write_file" not in names  # read was granted
        read = await fs.call_tool("read_file", {"path": "calc/__init__.py"})
        assert "a - b" in json.dumps(read.structured_content)
    for opened in (first, second):
        closed = await request(
            bus,
            service_subject(opened.service, "close"),
            WorkspaceClose(workspace=opened.workspace),
            timeout_s=30,
        )
        assert isinstance(closed, WorkspaceClosed) and closed.existed
    assert await _status(url, first.token) == 404  # revoked with its workspace
    assert list((ws_home / "work").glob("*")) == []


async def test_a_coder_works_only_through_the_workspace_service_which_holds_no_key(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", CALC)
    ws_home, worker_home = tmp_path / "ws-home", tmp_path / "coder-home"
    config = BusConfig(state_dir=tmp_path / "state")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    env = {k: v for k, v in env.items() if not k.startswith("CODELOOP_")}
    # Both environments start with the key (a deployment that leaked it to the service too).
    env |= {"OPENAI_API_KEY": PLANTED, "ANTHROPIC_API_KEY": PLANTED}
    stop = anyio.Event()
    with anyio.fail_after(300):
        async with anyio.create_task_group() as tg:
            note = await tg.start(
                lambda task_status: serve(
                    config, stop=stop, workers=Workers(roles=ROLES_HERE), task_status=task_status
                )
            )
            client = client_config_for(config, note)
            if client.user:
                env |= {"CODELOOP_NATS_USER": client.user, "CODELOOP_NATS_PASSWORD": client.password or ""}
            service, service_note = await _serve_json(
                ["--nats", note.nats_url, "--workspaces", "--state-dir", str(ws_home)],
                {**env, "CODELOOP_HOME": str(ws_home)},
                tmp_path / "service.log",
            )
            coder, _ = await _serve_json(
                [
                    "--nats",
                    note.nats_url,
                    "--role",
                    "coder",
                    "--role",
                    "verifier",
                    "--no-mcp",
                    "--workspace-service",
                    "--state-dir",
                    str(worker_home),
                ],
                {**env, "CODELOOP_HOME": str(worker_home)},
                tmp_path / "coder.log",
            )
            try:
                async with open_bus(client) as bus:
                    snapshot = await capture_snapshot(bus, repo)
                    task = TaskSubmitted(
                        text="add(2, 3) returns -1",
                        repo=str(repo),
                        mode="execute",
                        models=ModelNames(default=model("fix")),
                        snapshot=snapshot,
                    )
                    envelope, _ = await submit_task(bus, task)
                    # One left open by a step that never closes it: the task's end must close it.
                    left = await request(
                        bus,
                        OPEN_SUBJECT,
                        WorkspaceOpen(
                            task_id=envelope.task_id, label="left", snapshot=snapshot, scopes=["read"]
                        ),
                        timeout_s=60,
                    )
                    assert isinstance(left, WorkspaceOpened), left
                    final = await watch_task(bus, envelope.task_id, lambda e: None)
                    result = TaskResult.model_validate(final.payload)
                    assert result.status == "done", result.report
                    assert result.files_changed == ["calc/__init__.py"]
                    assert "+    return a + b" in (result.patch or "")

                    # The coder's tool calls all went through the service, under its task's grant.
                    audit = _records(Path(service_note["workspaces"]["audit_log"]))
                    coder_calls = [r["tool"] for r in audit if r["principal"] == f"code:{envelope.task_id}"]
                    assert {"read_file", "write_file", "run_tests"} <= set(coder_calls), coder_calls
                    # The verifier's tests and static checks ran there too, on the patched tree.
                    verifier_calls = [
                        r["tool"] for r in audit if r["principal"] == f"verify:{envelope.task_id}"
                    ]
                    assert {"run_static_checks", "run_tests"} <= set(verifier_calls), verifier_calls
                    assert result.verification.verdict == "passed", result.verification
                    assert any(c["name"] == "targeted_tests" and c["ok"] for c in result.verification.checks)
                    # ... and none was served in the worker: no scratch workspace, no tool audit there.
                    assert list((worker_home / "work").glob("*")) == []
                    assert not list(worker_home.glob("mcp-audit*"))
                    with anyio.fail_after(30):  # the service closed what the steps and the task left
                        while list((ws_home / "work").glob("*")):  # noqa: ASYNC110 - another process deletes
                            await anyio.sleep(0.1)
                    assert await _status(left.urls["fs"], left.token) == 404

                    # The key: gone from the service's environment and its children's, and its files.
                    assert {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"} <= set(
                        service_note["workspaces"]["stripped_env"]
                    )
                    for pid in _family(service.pid):
                        assert PLANTED.encode() not in _environ(pid), pid
                    assert PLANTED.encode() in _environ(coder.pid)  # the test did plant it
                    assert _files_mentioning(ws_home, PLANTED.encode()) == []

                    await _assert_each_token_opens_its_workspace_only(bus, snapshot, ws_home)
            finally:
                for process in (coder, service):
                    await stop_process(process)
                    await process.aclose()
            stop.set()
