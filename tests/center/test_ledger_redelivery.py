"""The quota ledger counts a redelivered step once: a coder worker SIGKILLed in the middle of its
model call, its step redelivered to another worker, and the principal's ledger still equals the
task's recorded usage exactly (issue acceptance: "also ... after a worker is SIGKILLed mid-task
and the task redelivered")."""

import os
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from agents.client import submit_task, watch_task
from agents.messages import TaskResult, TaskSubmitted
from agents.quotas import LOCAL_PRINCIPAL, Ledger, utc_day
from agents.workspace import capture_snapshot
from bus.actor import DeliveryPolicy
from bus.config import BusConfig
from bus.connection import open_bus
from codeloop.wiring.process import Hosting, Workers, serve
from tests.center.support import PLAN_AND_CODE, REPO, SCRIPTED, cli, nats, repo
from tests.processes import stop_process

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
CENTER = f'[models]\ndefault = "function:{SCRIPTED}:metered_hang_once"\n\n[quotas.default]\ntokens_per_day = 100000\n'


async def _coder(url: str, home: Path) -> anyio.abc.Process:
    command = [sys.executable, "-m", "codeloop", "serve", "--nats", url, "--role", "coder", "--no-mcp"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODELOOP_")}
    env |= {"PYTHONPATH": str(REPO), "CODELOOP_HOME": str(home)}
    return await anyio.open_process([*command, "--ack-wait", "2", "--state-dir", str(home)], env=env)


async def test_a_step_redelivered_after_a_sigkill_is_counted_once(tmp_path: Path) -> None:
    work = repo(tmp_path)
    marker = tmp_path / "marker"
    (tmp_path / "center.toml").write_text(CENTER)
    stop = anyio.Event()
    with anyio.fail_after(400):
        async with nats(tmp_path) as server, anyio.create_task_group() as tg:
            url = server.url
            assert (await cli("config", "push", str(tmp_path / "center.toml"), "--nats", url)).code == 0
            await tg.start(
                lambda task_status: serve(
                    BusConfig(servers=(url,), state_dir=tmp_path / "here"),
                    stop=stop,
                    workers=Workers(roles=("orchestrator", "planner"), policy=DeliveryPolicy(ack_wait_s=2)),
                    hosting=Hosting(metrics=None),
                    task_status=task_status,
                )
            )
            async with open_bus(BusConfig(servers=(url,))) as bus:
                first = await _coder(url, tmp_path / "w1")
                task = TaskSubmitted(
                    text=f"write the notes\nmarker: {marker}",
                    repo=str(work),
                    mode="write",
                    pipeline=PLAN_AND_CODE,
                    snapshot=await capture_snapshot(bus, work),
                )
                envelope, _ = await submit_task(bus, task)
                with anyio.fail_after(200):
                    while not marker.exists():  # noqa: ASYNC110 - another process writes it
                        await anyio.sleep(0.1)
                assert int(marker.read_text()) == first.pid
                first.send_signal(signal.SIGKILL)
                await first.wait()
                second = await _coder(url, tmp_path / "w2")
                try:
                    with anyio.fail_after(200):
                        final = await watch_task(bus, envelope.task_id, lambda e: None)
                finally:
                    await stop_process(second)
                day = await (await Ledger.open(bus)).day(LOCAL_PRINCIPAL, utc_day(datetime.now(UTC)))
            stop.set()
    assert final is not None
    result = TaskResult.model_validate(final.payload)
    assert result.status == "done", result.report
    recorded = result.usage["input_tokens"] + result.usage["output_tokens"]
    assert recorded == 4 * 150  # the killed call is not part of the task's usage
    assert {k: (v.tokens, v.running) for k, v in day.tasks.items()} == {envelope.task_id: (recorded, False)}
