"""Helpers for the tasks-server tests: `codeloop mcp tasks` over stdio, and calls that must succeed or fail."""

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from tests.codeloop.serve_support import CODELOOP as CODELOOP_MODULE
from tests.codeloop.serve_support import codeloop_env
from tests.processes import stop_process
from tests.tool_servers.ts_helpers import CODELOOP

TASKS_MODEL = f"function:{Path(__file__).with_name('tasks_scripted.py')}"
TOOLS = {
    "submit_task",
    "continue_task",
    "get_task",
    "wait_task",
    "cancel_task",
    "list_tasks",
    "answer_confirmation",
    "get_usage",
}
"""The tools any grant lists; an `execute` grant also lists `verify_patch`."""


def tasks_server(root: Path, home: Path, scopes: str) -> StdioServerParameters:
    env = {name: os.environ[name] for name in ("PATH", "CODELOOP_CACHE_DIR") if name in os.environ}
    env["PYTHONPATH"] = str(Path(__file__).parents[2])  # the scripted models import tests.e2e.scripted
    return StdioServerParameters(
        command=CODELOOP,
        args=["mcp", "tasks", "--root", str(root), "--scopes", scopes],
        env={
            **env,
            "CODELOOP_HOME": str(home),
            "CODELOOP_SANDBOX": os.environ.get("CODELOOP_SANDBOX", "auto"),
        },
    )


async def call(client: Client, name: str, **arguments: object) -> dict[str, Any]:
    result = await client.call_tool(name, arguments, read_timeout_seconds=240)
    assert not result.is_error, result.content
    return result.structured_content or {}


async def refused(client: Client, name: str, **arguments: object) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert result.is_error, result.structured_content
    return result.structured_content or {}


async def wait_until_ended(client: Client, task_id: str, progress: list[str] | None = None) -> dict[str, Any]:
    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        if progress is not None:
            progress.append(message or "")

    with anyio.fail_after(240):
        while True:
            result = await client.call_tool(
                "wait_task",
                {"task_id": task_id, "timeout_s": 60},
                read_timeout_seconds=120,
                progress_callback=on_progress,  # pyright: ignore[reportArgumentType] - the callback matches the SDK's progress signature
            )
            assert not result.is_error, result.content
            view = result.structured_content or {}
            if view["result"] is not None:
                return view


@asynccontextmanager
async def tasks_over_http(home: Path, root: Path, token_file: Path) -> AsyncIterator[str]:
    """`codeloop mcp tasks --transport http` (on the local serve's bus, else its own); yields its URL."""
    args = ["mcp", "tasks", "--root", str(root), "--scopes", "read,write,execute", "--transport", "http"]
    process = await anyio.open_process(
        [*CODELOOP_MODULE, *args, "--port", "0", "--token-file", str(token_file)], env=codeloop_env(home)
    )
    try:
        assert process.stdout is not None
        buffer = b""
        with anyio.fail_after(60):
            while b"\n" not in buffer:
                buffer += await process.stdout.receive()
        yield buffer.decode().split("\n", 1)[0].strip()
    finally:
        await stop_process(process)
        await process.aclose()
