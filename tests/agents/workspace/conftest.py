"""A real nats-server with the project's streams and buckets for each workspace test, and real git repositories."""

import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bus.config import BusConfig
from bus.connection import Bus, open_bus
from bus.server import open_nats_server
from bus.streams import ensure_streams
from tests.processes import processes_mentioning

GIT_ENV = {
    **{key: value for key, value in os.environ.items() if not key.startswith("GIT_")},
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_SYSTEM": "/dev/null",
    "GIT_AUTHOR_NAME": "User",
    "GIT_AUTHOR_EMAIL": "user@example.com",
    "GIT_COMMITTER_NAME": "User",
    "GIT_COMMITTER_EMAIL": "user@example.com",
}


def git(repo: Path, *args: str) -> str:
    """Run git as the user would in their checkout."""
    done = subprocess.run(["git", "-C", str(repo), *args], env=GIT_ENV, capture_output=True, check=True)
    return done.stdout.decode()


@pytest.fixture(autouse=True)
def no_process_left_behind(tmp_path: Path):
    yield
    assert processes_mentioning(tmp_path) == []


@pytest.fixture
async def bus(tmp_path: Path) -> AsyncIterator[Bus]:
    async with open_nats_server(tmp_path / "nats") as server:
        config = BusConfig(servers=(server.url,), state_dir=tmp_path / "state")
        async with open_bus(config) as connected:
            await ensure_streams(connected)
            yield connected
