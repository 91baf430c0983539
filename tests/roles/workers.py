"""Starting `codeloop serve` processes for the role tests: each on its own home, optionally joining
another serve's bus, always stopped and reaped."""

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anyio.abc import Process

from tests.processes import ready_process
from tests.roles.conftest import ROOT

if TYPE_CHECKING:
    from bus.connection import Bus


def env_for(home: Path, auth: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODELOOP_")}
    return {**env, "CODELOOP_HOME": str(home), **(auth or {})}


def auth_of(home: Path) -> dict[str, str]:
    """The embedded server's generated credentials (in its home) as client environment variables."""
    creds = json.loads((home / "nats-credentials.json").read_text())
    return {"CODELOOP_NATS_USER": creds["user"], "CODELOOP_NATS_PASSWORD": creds["password"]}


@asynccontextmanager
async def serving(
    home: Path, *args: str, auth: dict[str, str] | None = None
) -> AsyncIterator[tuple[Process, dict[str, Any]]]:
    """`codeloop serve --json --no-mcp --no-metrics ARGS` until its ready line; yields it and its note."""
    command = [sys.executable, "-m", "codeloop", "serve", "--json", "--no-mcp", "--no-metrics", *args]
    async with ready_process(command, env=env_for(home, auth), cwd=ROOT) as ready:
        yield ready


@asynccontextmanager
async def client_bus(home: Path, note: dict[str, object]) -> AsyncIterator["Bus"]:
    from bus.config import BusConfig
    from bus.connection import open_bus
    from codeloop.config.serve_note import ServeNote, client_config_for

    config = client_config_for(BusConfig(state_dir=home), ServeNote.model_validate(note))
    async with open_bus(config) as bus:
        yield bus
