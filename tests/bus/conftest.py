"""Real nats-server fixtures for the bus tests: one server per test, on a port it picks itself.

An autouse check fails any test that leaves a nats-server (or a worker process) of ours running:
our promise.
"""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bus.config import BusConfig
from bus.connection import Bus, open_bus
from bus.server import NatsServer, open_nats_server
from bus.streams import ensure_streams
from tests.processes import processes_mentioning


@pytest.fixture(autouse=True)
def no_process_left_behind(tmp_path: Path):
    """After every test, no nats-server or worker process started for it is left."""
    yield
    assert processes_mentioning(tmp_path) == []


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
