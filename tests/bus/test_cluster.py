"""A three-node JetStream cluster on loopback with replicas 3 loses no task when a node dies."""

import signal
from pathlib import Path

import anyio
import pytest

from agents.client import submit_task
from agents.messages import TaskSubmitted
from agents.orchestrator import ECHO
from agents.orchestrator.records import TaskRecords
from bus.actor import DeliveryPolicy
from bus.config import BusConfig
from bus.connection import open_bus
from bus.errors import BusError
from bus.server import open_nats_cluster
from bus.streams import ensure_streams
from codeloop.wiring.process import Workers, serve

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
TASKS = 60


async def test_killing_a_node_while_tasks_flow_loses_no_task(tmp_path: Path) -> None:
    """With R3 streams, every task submitted before, during and after a node's SIGKILL completes."""
    with anyio.fail_after(120):
        async with open_nats_cluster(tmp_path / "cluster") as nodes:
            config = BusConfig(servers=tuple(n.url for n in nodes), replicas=3, state_dir=tmp_path / "state")
            stop = anyio.Event()
            async with anyio.create_task_group() as tg:
                # A short ack_wait so a message held by a worker on the dead node returns quickly.
                policy = DeliveryPolicy(ack_wait_s=2.0)
                await tg.start(
                    lambda task_status: serve(
                        config,
                        stop=stop,
                        workers=Workers(roles=("orchestrator", "echo"), policy=policy, pipeline=ECHO),
                        task_status=task_status,
                    )
                )
                async with open_bus(config) as client:
                    await ensure_streams(client)
                    info = await client.js.stream_info("CODELOOP_WORK")
                    assert info.config.num_replicas == 3
                    # The most disruptive node to lose: the one leading the work stream.
                    victim = next(n for n in nodes if n.name == info.cluster.leader)  # pyright: ignore[reportOptionalMemberAccess] - a cluster's stream always reports its cluster
                    records = await TaskRecords.open(client)
                    submitted = []
                    for i in range(TASKS):
                        if i == TASKS // 3:
                            victim.process.send_signal(signal.SIGKILL)
                        submitted.append(await _submit_retrying(client, f"task-{i}"))
                    finished: dict[str, str | None] = {}
                    with anyio.move_on_after(90):
                        while len(finished) < TASKS:
                            for task_id in set(submitted) - set(finished):
                                state = await _get_retrying(records, task_id)
                                if state is not None and state.result is not None:
                                    finished[task_id] = (
                                        state.result.answer if state.status == "done" else None
                                    )
                            await anyio.sleep(0.2)
                stop.set()
            assert not victim.running
            # Every task, each done with its own echo: none lost, none answered with another's text.
            assert finished == {f"task-{i}": f"task-{i}" for i in range(TASKS)}


async def _submit_retrying(client, task_id: str) -> str:
    """Resubmit on a failover timeout: the same task id makes the retry idempotent."""
    with anyio.fail_after(30):  # a failover takes seconds; longer means the cluster is gone
        while True:
            try:
                await submit_task(client, TaskSubmitted(text=task_id, repo="/repo"), task_id=task_id)
                return task_id
            except BusError:
                await anyio.sleep(0.2)


async def _get_retrying(records: TaskRecords, task_id: str):
    with anyio.fail_after(30):
        while True:
            try:
                return await records.get(task_id)
            except BusError:
                await anyio.sleep(0.2)
