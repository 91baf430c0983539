"""Starting `codeloop serve` processes for the role tests: each on its own home, optionally joining
another serve's bus, always stopped and reaped."""

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

from tests.processes import stop_process
from tests.roles.conftest import ROOT


def env_for(home: Path, auth: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODELOOP_")}
    return {**env, "CODELOOP_HOME": str(home), **(auth or {})}


def auth_of(home: Path) -> dict[str, str]:
    """The embedded server's generated credentials (in its home) as client environment variables."""
    creds = json.loads((home / "nats-credentials.json").read_text())
    return {"CODELOOP_NATS_USER": creds["user"], "CODELOOP_NATS_PASSWORD": creds["password"]}


@asynccontextmanager
async def serving(home: Path, *args: str, auth: dict[str, str] | None = None) -> AsyncIterator[tuple[Process, dict[str, Any]]]:
    """`codeloop serve --json --no-mcp --no-metrics ARGS` until its ready line; yields it and its note."""
    process = await anyio.open_process(
        [sys.executable, "-m", "codeloop", "serve", "--json", "--no-mcp", "--no-metrics", *args],
        env=env_for(home, auth), cwd=ROOT,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        buffer = b""
        with anyio.fail_after(60):
            while b"\n" not in buffer:
                buffer += await process.stdout.receive()
        yield process, json.loads(buffer.split(b"\n", 1)[0])
    finally:
        with anyio.CancelScope(shield=True):
            await stop_process(process)
            await process.aclose()


@asynccontextmanager
async def client_bus(home: Path, note: dict[str, Any]) -> AsyncIterator[Any]:
    from bus.config import BusConfig
    from bus.connection import open_bus
    from codeloop.config import ServeNote, client_config_for

    config = client_config_for(BusConfig(state_dir=home), ServeNote.model_validate(note))
    async with open_bus(config) as bus:
        yield bus
