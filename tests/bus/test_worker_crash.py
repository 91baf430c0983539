"""A worker process killed with SIGKILL while it holds a message."""

import json
import os
import signal
import sys
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process

from agents.client import is_final, submit_task
from agents.messages import TaskSubmitted
from agents.orchestrator import ECHO, orchestrator_spec
from agents.orchestrator.records import TaskRecords
from bus import subjects
from bus.connection import Bus
from bus.server import NatsServer
from tests.bus._bus_support import collect_events, running, wait_stream_empty

pytestmark = pytest.mark.anyio
WORKER = Path(__file__).with_name("crash_worker.py")


async def _start_worker(server: NatsServer, mode: str, tag: Path):
    return await anyio.open_process(
        [sys.executable, str(WORKER), server.url, mode, str(tag)],
        start_new_session=True,
        stdout=None,
        stderr=None,
    )


async def _reap(*workers: Process | None) -> None:
    """Kill what is still running of `workers` and wait for each (shielded by the caller)."""
    for proc in workers:
        if proc is not None:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()


@pytest.mark.parametrize("stage", ["before-effect", "after-effect"])
async def test_task_completes_with_its_effect_once_after_its_worker_is_killed(
    bus: Bus, nats_server: NatsServer, tmp_path: Path, stage: str
) -> None:
    """The message goes to another worker process, the task completes, the effect counts once."""
    effects = await bus.js.create_key_value(bucket="test-effects")
    records = await TaskRecords.open(bus)
    holding = await bus.nc.subscribe("test.holding")
    first = await _start_worker(nats_server, f"hold-{stage}", tmp_path)
    second = None
    try:
        async with running(bus, orchestrator_spec(records, pipeline=ECHO)):
            envelope, _ = await submit_task(bus, TaskSubmitted(text="survive", repo="/repo"))
            with anyio.fail_after(30):
                announced = json.loads((await holding.next_msg(timeout=25)).data)
                assert announced == {"pid": first.pid, "stage": stage}
                second = await _start_worker(nats_server, "normal", tmp_path)
                os.kill(first.pid, signal.SIGKILL)
                events = await collect_events(bus, envelope.task_id, lambda evs: is_final(evs[-1]))
    finally:
        with anyio.CancelScope(shield=True):
            await _reap(first, second)
            await holding.unsubscribe()
    assert first.returncode == -signal.SIGKILL
    assert events[-1].payload["status"] == "done" and events[-1].payload["answer"] == "survive"
    effect = json.loads((await effects.get(f"count.{envelope.task_id}")).value)  # pyright: ignore[reportArgumentType] - the effect was written by the worker, with a value
    assert effect["count"] == 1


async def test_a_redelivery_of_a_handled_message_does_not_run_its_handler_again(
    bus: Bus, nats_server: NatsServer, tmp_path: Path
) -> None:
    """A worker dying after handling but before acking; the next one skips the handler."""
    effects = await bus.js.create_key_value(bucket="test-effects")
    records = await TaskRecords.open(bus)
    first = await _start_worker(nats_server, "die-before-ack", tmp_path)
    second = None
    try:
        async with running(bus, orchestrator_spec(records, pipeline=ECHO)):
            envelope, _ = await submit_task(bus, TaskSubmitted(text="once only", repo="/repo"))
            with anyio.fail_after(30):
                await first.wait()  # it killed itself between recording the message handled and acking
                second = await _start_worker(nats_server, "normal-unguarded", tmp_path)
                events = await collect_events(bus, envelope.task_id, lambda evs: is_final(evs[-1]))
                # The first worker's result already finished the task; the redelivered work
                # message is settled by the second worker after ack_wait.
                await wait_stream_empty(bus, subjects.WORK_STREAM)
    finally:
        with anyio.CancelScope(shield=True):
            await _reap(first, second)
    assert first.returncode == -signal.SIGKILL
    assert events[-1].payload["status"] == "done"
    effect = json.loads((await effects.get(f"count.{envelope.task_id}")).value)  # pyright: ignore[reportArgumentType] - the effect was written by the worker, with a value
    assert effect["count"] == 1  # unguarded: a second run of the handler would have made it 2
