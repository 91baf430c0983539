"""The tasks server under the configuration center's quotas: `submit_task` refuses a principal
over its quota as a tool error naming the limit and its key, and `get_usage` shows the quota
and the ledger (issue: "the tasks server's `submit_task` the same, as a tool error"; a `get_usage`
tool). A real nats-server with only the orchestrator, so tasks stay running."""

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from agents.quotas import Ledger, utc_day
from bus.center import CenterRecord, ensure_center, write
from bus.config import BusConfig
from bus.connection import Bus, open_bus
from codeloop.config.serve_note import client_config_for
from codeloop.services.tasks_backend import BusTasks
from codeloop.testing import eventually, make_repo
from codeloop.wiring.process import Hosting, Workers, serve
from tool_servers.protocol.spec import ServerOptions
from tool_servers.tasks.server import build_tasks_server

pytestmark = pytest.mark.anyio
CENTER = "[quotas.default]\nmax_running = 1\n\n[quotas.someone-else]\ntasks_per_day = 100\n"


@pytest.fixture
async def bus_and_client(tmp_path: Path) -> AsyncIterator[tuple[Bus, Client]]:
    make_repo(tmp_path / "root" / "notes", {"README.md": "# notes\n"})
    config = BusConfig(state_dir=tmp_path / "state")
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
            record = CenterRecord(
                document=CENTER, pushed_by="test", pushed_at=datetime.now(UTC), message="quotas"
            )
            await write(bus, await ensure_center(bus), record)
            backend = await BusTasks.open(bus, max_running=10)
            server = build_tasks_server(tmp_path / "root", ServerOptions(), backend)  # pyright: ignore[reportArgumentType] - BusTasks.changes is an async generator function, which the protocol's iterator describes
            async with Client(server) as client:
                yield bus, client
        stop.set()


async def test_submit_task_over_quota_is_a_tool_error_and_get_usage_shows_the_ledger(
    bus_and_client: tuple[Bus, Client],
) -> None:
    bus, client = bus_and_client
    principal = ServerOptions().principal
    first = await client.call_tool("submit_task", {"task": "what is in the notes?", "repo": "notes"})
    assert not first.is_error, first.content
    ledger = await Ledger.open(bus)
    today = utc_day(datetime.now(UTC))
    with anyio.fail_after(30):
        await eventually(lambda: _running(ledger, principal, today))  # the orchestrator admitted it

    refused = await client.call_tool("submit_task", {"task": "and again?", "repo": "notes"})
    assert refused.is_error
    text = str(refused.content)
    for expected in ("quota.exceeded", "max_running", "1 used of 1", "quotas.default.max_running"):
        assert expected in text, text

    usage = await client.call_tool("get_usage", {})
    assert not usage.is_error, usage.content
    body: dict[str, Any] = usage.structured_content or {}
    assert body["principal"] == principal and body["quota_key"] == "quotas.default"
    assert body["quota"] == {"max_running": 1} and body["config_revision"] == 1
    assert [(d["day"], d["tasks"], d["running"]) for d in body["days"]] == [(today, 1, 1)]


async def _running(ledger: Ledger, principal: str, day: str) -> bool:
    return len((await ledger.day(principal, day)).running) == 1
