"""Helpers for the composition-root tests: `running_serve` starts `codeloop serve --json` the way
tests/bus/test_cli.py does and always stops and reaps it."""

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
from anyio.abc import Process
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.processes import READY_S, ready_process

CODELOOP = [sys.executable, "-m", "codeloop"]


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def codeloop_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODELOOP_")}
    env["CODELOOP_HOME"] = str(home)
    return env


@asynccontextmanager
async def running_serve(
    home: Path, *args: str, ready_s: float = READY_S
) -> AsyncIterator[tuple[Process, dict[str, Any]]]:
    """`codeloop serve --json ARGS` as a subprocess; yields it and its ready note (waited for up
    to `ready_s`), kills it if still running.

    Tasks go through the `echo` pipeline unless ARGS name one: these tests are about the bus and
    the serve process, not about what the agents do."""
    if "--pipeline" not in args:
        args = ("--pipeline", "echo", *args)
    command = [*CODELOOP, "serve", "--json", *args]
    async with ready_process(command, env=codeloop_env(home), ready_s=ready_s) as ready:
        yield ready


@asynccontextmanager
async def http_client(url: str, token: str | None) -> AsyncIterator[Client]:
    """The real MCP client over streamable HTTP, sending `token` as a bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with httpx2.AsyncClient(headers=headers) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client
