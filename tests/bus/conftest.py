"""Real nats-server fixtures for the bus tests: one server per test, on a port it picks itself.

An autouse check fails any test that leaves a nats-server (or a worker process) of ours running:
acceptance (f) of issue 2.
"""

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bus.config import BusConfig
from bus.connection import Bus, open_bus
from bus.server import NatsServer, open_nats_server
from bus.streams import ensure_streams


def processes_under(directory: Path) -> list[str]:
    """Command lines of live processes that mention `directory` (our servers and workers do)."""
    found = []
    marker = str(directory)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(f"{entry.name}: {cmdline.strip()}")
    return found


@pytest.fixture(autouse=True)
def no_process_left_behind(tmp_path: Path):
    """Issue 2 (f): after every test, no nats-server or worker process started for it is left."""
    yield
    assert processes_under(tmp_path) == []


@pytest.fixture
async def nats_server(tmp_path: Path) -> AsyncIterator[NatsServer]:
    async with open_nats_server(tmp_path / "nats") as server:
        yield server


@pytest.fixture
def bus_config(nats_server: NatsServer, tmp_path: Path) -> BusConfig:
    return BusConfig(servers=(nats_server.url,), state_dir=tmp_path / "state")


@pytest.fixture
async def bus(bus_config: BusConfig) -> AsyncIterator[Bus]:
    async with open_bus(bus_config) as connected:
        await ensure_streams(connected)
        yield connected
