"""A coder worker SIGKILLed in the middle of its run: the task still finishes, its effect once."""

import os
import signal
import sys
from pathlib import Path

import anyio
import pytest

from agents.client import submit_task, watch_task
from agents.messages import ModelNames, TaskResult, TaskSubmitted
from agents.orchestrator.records import TaskRecords
from agents.workspace import capture_snapshot
from bus.actor import DeliveryPolicy
from bus.config import BusConfig
from bus.connection import open_bus
from codeloop.config.serve_note import client_config_for
from codeloop.testing import make_repo
from codeloop.wiring.process import Workers, serve
from tests.e2e.conftest import model
from tests.processes import stop_process
from tests.support.repos import CALC

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
ROLES_HERE = ("orchestrator", "planner", "retriever", "verifier")


async def _coder_worker(nats_url: str, home: Path, env: dict) -> anyio.abc.Process:
    command = [
        sys.executable,
        "-m",
        "codeloop",
        "serve",
        "--nats",
        nats_url,
        "--role",
        "coder",
        "--no-mcp",
        "--ack-wait",
        "2",
        "--state-dir",
        str(home),
    ]
    return await anyio.open_process(command, env=env)


async def test_a_coder_killed_mid_run_is_replaced_and_the_task_finishes_once(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", CALC)
    marker = tmp_path / "marker"
    config = BusConfig(state_dir=tmp_path / "state")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    stop = anyio.Event()
    with anyio.fail_after(240):
        async with anyio.create_task_group() as tg:
            note = await tg.start(
                lambda task_status: serve(
                    config,
                    stop=stop,
                    workers=Workers(roles=ROLES_HERE, policy=DeliveryPolicy(ack_wait_s=2)),
                    task_status=task_status,
                )
            )
            client = client_config_for(config, note)
            if client.user:  # the embedded server's generated credentials, as `serve` finds them
                env |= {"CODELOOP_NATS_USER": client.user, "CODELOOP_NATS_PASSWORD": client.password or ""}
            async with open_bus(client) as bus:
                first = await _coder_worker(note.nats_url, tmp_path / "w1", env)
                task = TaskSubmitted(
                    text=f"add(2, 3) returns -1\nmarker: {marker}",
                    repo=str(repo),
                    mode="write",
                    models=ModelNames(default=model("hang_once")),
                    snapshot=await capture_snapshot(bus, repo),
                )
                envelope, _ = await submit_task(bus, task)
                with anyio.fail_after(120):  # the coder's worker reaches the model call
                    while not marker.exists():  # noqa: ASYNC110 - another process writes it
                        await anyio.sleep(0.1)
                assert int(marker.read_text()) == first.pid  # the worker process itself is in the model call
                first.send_signal(signal.SIGKILL)
                await first.wait()
                second = await _coder_worker(note.nats_url, tmp_path / "w2", env)
                results: list[TaskResult] = []
                try:
                    final = await watch_task(bus, envelope.task_id, lambda e: None)
                finally:
                    await stop_process(second)
                record = await (await TaskRecords.open(bus)).get(envelope.task_id)

                async def count(e) -> None:
                    if e.kind == "task_result":
                        results.append(TaskResult.model_validate(e.payload))

                with anyio.move_on_after(2):
                    await watch_task(bus, envelope.task_id, count, until_final=False)
            stop.set()
    result = TaskResult.model_validate(final.payload)
    assert result.status == "done" and result.files_changed == ["calc/__init__.py"], result.report
    assert len(results) == 1  # one result published
    assert [s for s in record.steps_done if s.endswith("-code")] == ["03-code"]  # one coder result applied  # pyright: ignore[reportOptionalMemberAccess] - the record exists: the task ended
