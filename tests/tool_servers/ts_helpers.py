"""Test helpers for the MCP servers: git repos, subprocess and HTTP clients, an elicitation responder."""

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

CODELOOP = str(Path(sys.executable).with_name("codeloop"))


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def server_env() -> dict[str, str]:
    """PATH finds git; the suite's private CODELOOP_HOME and this tree's PYTHONPATH carry over."""
    names = ("PATH", "CODELOOP_HOME", "CODELOOP_CACHE_DIR", "PYTHONPATH", "CODELOOP_SANDBOX")
    return {name: os.environ[name] for name in names if name in os.environ}


def stdio_params(server: str, root: Path, *extra: str) -> StdioServerParameters:
    # StdioServerParameters passes only a minimal environment.
    return StdioServerParameters(
        command=CODELOOP, args=["mcp", server, "--root", str(root), *extra], env=server_env()
    )


@asynccontextmanager
async def http_server(server: str, root: Path, token_file: Path, *extra: str) -> AsyncIterator[str]:
    """`codeloop mcp SERVER --transport http --port 0` as a subprocess; yields its URL, then stops it."""
    cmd = [CODELOOP, "mcp", server, "--root", str(root), "--transport", "http", "--port", "0"]
    process = await anyio.open_process([*cmd, "--token-file", str(token_file), *extra])
    try:
        buffer = b""
        with anyio.fail_after(30):
            while b"\n" not in buffer:
                chunk = await process.stdout.receive()  # type: ignore[union-attr] - stdout is piped, so never None here
                buffer += chunk
        yield buffer.decode().split("\n", 1)[0].strip()
    finally:
        process.terminate()
        with anyio.move_on_after(10) as scope, anyio.CancelScope(shield=True):
            await process.wait()
        if scope.cancelled_caught:
            process.kill()
            with anyio.CancelScope(shield=True):
                await process.wait()


@asynccontextmanager
async def http_client(url: str, token: str | None, **kwargs: object) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with httpx2.AsyncClient(headers=headers) as http:
        async with Client(streamable_http_client(url, http_client=http), **kwargs) as client:  # type: ignore[arg-type] - the client options of each test are Client's keyword arguments
            yield client


class Elicitor:
    """An elicitation callback that answers as told and records the questions it was asked."""

    def __init__(self, action: str = "accept", approve: bool = True) -> None:
        self.action = action
        self.approve = approve
        self.questions: list[str] = []

    async def __call__(self, context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.questions.append(params.message)
        content = {"approve": self.approve} if self.action == "accept" else None
        return types.ElicitResult(action=self.action, content=content)  # type: ignore[arg-type] - the scripted answer is a flat JSON object, as elicitation requires
