"""A run shared through the bus (a real nats-server): the coordinator publishes, workers in other
processes run the instances, and a worker SIGKILLed in the middle of an instance loses nothing:
the instance comes back after the ack wait and another worker runs it."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from bus.config import BusConfig
from bus.connection import open_bus
from bus.server import open_nats_server
from codeloop.swebench.distribution import WORK_STREAM, WORKERS, ensure_swebench_streams

pytestmark = [pytest.mark.slow, pytest.mark.gvisor, pytest.mark.anyio, pytest.mark.usefixtures("gvisor")]


def _start(*args: str | Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "codeloop", *map(str, args)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


async def test_a_worker_killed_mid_instance_loses_nothing(
    synthetic_inputs: dict[str, Path], tmp_path: Path
) -> None:
    async with open_nats_server(tmp_path / "nats") as server:
        config = BusConfig(servers=(server.url,), state_dir=tmp_path / "state")
        async with open_bus(config) as bus:
            # A short ack wait, so the killed worker's instance comes back within seconds.
            await ensure_swebench_streams(bus, ack_wait_s=6.0)
            out = tmp_path / "run"
            common = ["--nats", server.url]
            coordinator = _start(
                "swebench",
                synthetic_inputs["instances"],
                "--repos",
                synthetic_inputs["repos"],
                "--specs",
                synthetic_inputs["specs"],
                "--predictions",
                "gold",
                "--jobs",
                "0",
                "--out",
                out,
                "--json",
                *common,
                log=tmp_path / "coordinator.log",
            )
            first = _start(
                "swebench-worker", "--repos", synthetic_inputs["repos"], *common, log=tmp_path / "a.log"
            )
            processes = [coordinator, first]
            try:
                with anyio.fail_after(300):  # until the first worker holds an instance
                    while True:
                        if (await bus.js.consumer_info(WORK_STREAM, WORKERS)).num_ack_pending:
                            break
                        await anyio.sleep(0.2)
                os.killpg(first.pid, signal.SIGKILL)
                first.wait()
                second = _start(
                    "swebench-worker",
                    "--repos",
                    synthetic_inputs["repos"],
                    "--idle-exit",
                    "5",
                    *common,
                    log=tmp_path / "b.log",
                )
                processes.append(second)
                with anyio.fail_after(600):
                    await anyio.to_thread.run_sync(coordinator.wait, abandon_on_cancel=True)
                    await anyio.to_thread.run_sync(second.wait, abandon_on_cancel=True)
            finally:
                for process in processes:
                    if process.poll() is None:
                        os.killpg(process.pid, signal.SIGKILL)
                        process.wait()
    assert coordinator.returncode == 0, (tmp_path / "coordinator.log").read_text()[-3000:]
    summary = json.loads((out / "report.json").read_text())
    assert summary["completed_ids"] == ["synthetic__calc-1", "synthetic__calc-2"]
    assert summary["resolved_ids"] == ["synthetic__calc-1"]
    assert (
        (out / "instances" / "synthetic__calc-1" / "test_output.txt")
        .read_text()
        .count(">>>>> Start Test Output")
    )
    assert second.returncode == 0
