"""A run shared through the bus (a real nats-server): the coordinator publishes, `codeloop serve
--role swebench` workers in other processes run the instances beside the coordinator's own, and a
worker SIGKILLed in the middle of an instance loses nothing: the instance comes back after the
ack wait and another worker runs it."""

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import nats.js.errors
import pytest

from bus.config import BusConfig
from bus.connection import Bus, open_bus
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


def _serve_worker(url: str, repos: Path, log: Path) -> subprocess.Popen[bytes]:
    """A `codeloop serve` running only a SWE-bench worker slot, on the given bus."""
    state = log.with_suffix(".state")
    return _start(
        "serve",
        "--nats",
        url,
        "--state-dir",
        state,
        "--role",
        "swebench",
        "--swebench-repos",
        repos,
        "--no-mcp",
        "--no-metrics",
        log=log,
    )


def _coordinator(
    inputs: dict[str, Path], url: str, out: Path, jobs: int, log: Path
) -> subprocess.Popen[bytes]:
    return _start(
        "swebench",
        inputs["instances"],
        "--repos",
        inputs["repos"],
        "--specs",
        inputs["specs"],
        "--predictions",
        "gold",
        "--jobs",
        str(jobs),
        "--out",
        out,
        "--json",
        "--nats",
        url,
        log=log,
    )


def _workers(out: Path) -> dict[str, str]:
    return {
        d.name: json.loads((d / "outcome.json").read_text())["worker"]
        for d in sorted((out / "instances").iterdir())
    }


async def _until(check: Callable[[], Awaitable[bool]], *, seconds: float) -> None:
    with anyio.fail_after(seconds):
        # Polling the server's consumer state: no event exists for it.
        while not await check():  # noqa: ASYNC110
            await anyio.sleep(0.2)


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


async def test_serve_workers_share_a_run_and_one_killed_mid_instance_loses_nothing(
    synthetic_inputs: dict[str, Path], tmp_path: Path
) -> None:
    """Run 1: the submitting process (`--jobs 1`) and a `serve --role swebench` worker each run
    one of the two instances. Run 2 (`--jobs 0`): a second serve worker is SIGKILLed while it
    holds an instance; the instance comes back after the ack wait and the first worker runs it."""
    host = socket.gethostname()
    async with open_nats_server(tmp_path / "nats") as server:
        config = BusConfig(servers=(server.url,), state_dir=tmp_path / "state")
        async with open_bus(config) as bus:
            # A short ack wait, so the killed worker's instance comes back within seconds.
            await ensure_swebench_streams(bus, ack_wait_s=6.0)

            async def held(n: int) -> bool:
                return (await bus.js.consumer_info(WORK_STREAM, WORKERS)).num_ack_pending == n

            async def delivered() -> int:
                info = await bus.js.consumer_info(WORK_STREAM, WORKERS)
                assert info.delivered is not None  # a consumer's info always carries its delivered sequence
                return info.delivered.consumer_seq

            stays = _serve_worker(server.url, synthetic_inputs["repos"], tmp_path / "stays.log")
            processes = [stays]
            try:
                # The worker's slot consumes once the durable has a waiting pull.
                await _until(lambda: _has_waiting(bus), seconds=120)
                shared = _coordinator(
                    synthetic_inputs, server.url, tmp_path / "shared", 1, tmp_path / "c1.log"
                )
                processes.append(shared)
                with anyio.fail_after(600):
                    await anyio.to_thread.run_sync(shared.wait, abandon_on_cancel=True)
                before = await delivered()

                killed = _serve_worker(server.url, synthetic_inputs["repos"], tmp_path / "killed.log")
                processes.append(killed)
                await _until(lambda: _waiting_at_least(bus, 2), seconds=120)
                second = _coordinator(
                    synthetic_inputs, server.url, tmp_path / "killed-run", 0, tmp_path / "c2.log"
                )
                processes.append(second)
                await _until(lambda: held(2), seconds=300)  # each worker holds one
                os.killpg(killed.pid, signal.SIGKILL)
                killed.wait()
                with anyio.fail_after(600):
                    await anyio.to_thread.run_sync(second.wait, abandon_on_cancel=True)
                redeliveries = await delivered() - before - 2
                stays.send_signal(signal.SIGTERM)
                with anyio.fail_after(60):
                    await anyio.to_thread.run_sync(stays.wait, abandon_on_cancel=True)
            finally:
                _stop(processes)
    for run, log in ((tmp_path / "shared", "c1.log"), (tmp_path / "killed-run", "c2.log")):
        assert json.loads((run / "report.json").read_text())["resolved_ids"] == ["synthetic__calc-1"], (
            tmp_path / log
        ).read_text()[-3000:]
        assert sorted(_workers(run)) == ["synthetic__calc-1", "synthetic__calc-2"]
    assert shared.returncode == 0 and second.returncode == 0
    assert sorted(_workers(tmp_path / "shared").values()) == sorted(
        [f"{host}:{shared.pid}", f"{host}:{stays.pid}"]
    )
    assert set(_workers(tmp_path / "killed-run").values()) == {f"{host}:{stays.pid}"}
    assert redeliveries == 1
    assert (
        (tmp_path / "killed-run" / "instances" / "synthetic__calc-1" / "test_output.txt")
        .read_text()
        .count(">>>>> Start Test Output")
    )
    assert stays.returncode == 0, (tmp_path / "stays.log").read_text()[-3000:]


async def _has_waiting(bus: Bus) -> bool:
    return await _waiting_at_least(bus, 1)


async def _waiting_at_least(bus: Bus, n: int) -> bool:
    try:
        return ((await bus.js.consumer_info(WORK_STREAM, WORKERS)).num_waiting or 0) >= n
    except nats.js.errors.NotFoundError:
        return False
