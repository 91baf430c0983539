"""What the configuration center's tests share: a real nats-server, `codeloop serve` instances on
it, the `codeloop config` command as a subprocess, and a task of the plan → code pipeline."""

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskStatus

from agents.client import submit_task, watch_task
from agents.messages import PipelineChoice, TaskResult, TaskSubmitted
from agents.workspace import capture_snapshot
from bus.actor import DeliveryPolicy
from bus.config import BusConfig
from bus.connection import Bus
from bus.server import NatsServer, open_nats_server
from codeloop.config.serve_note import ServeNote
from codeloop.testing import make_repo
from codeloop.wiring.process import Hosting, Workers, serve
from tests.processes import stop_process

SCRIPTED = Path(__file__).with_name("scripted_center.py")
METERED = f"function:{SCRIPTED}:metered"
ROLES = ("orchestrator", "planner", "coder")
PLAN_AND_CODE = PipelineChoice(name="plan-and-code", stages=["plan:planner", "code:coder"])
REPO = Path(__file__).parents[2]


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


async def codeloop(*args: str, home: Path, env: dict[str, str] | None = None) -> CliResult:
    """`codeloop ARGS` as a subprocess with its own home (no user file, no serve note)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("CODELOOP_")}
    base |= {"CODELOOP_HOME": str(home), "PYTHONPATH": str(REPO), **(env or {})}
    with anyio.fail_after(240):  # a second interpreter starts slowly on a loaded machine
        done = await anyio.run_process([sys.executable, "-m", "codeloop", *args], env=base, check=False)
    return CliResult(done.returncode, done.stdout.decode(), done.stderr.decode())


async def cli(*args: str) -> CliResult:
    """`codeloop ARGS` in this process, on a thread of its own (the command runs its own event
    loop), as typer's runner invokes it: the same command, without a second interpreter's start.
    One at a time: the runner swaps this process's stdout."""
    from typer.testing import CliRunner

    from codeloop.cli import app

    def invoke() -> CliResult:
        done = CliRunner().invoke(app, list(args))
        if done.exception is not None and not isinstance(done.exception, SystemExit):
            raise done.exception
        return CliResult(done.exit_code, done.stdout, done.stderr)

    with anyio.fail_after(60):
        return await anyio.to_thread.run_sync(invoke)


@asynccontextmanager
async def nats(tmp_path: Path, *extra_args: str) -> AsyncIterator[NatsServer]:
    async with open_nats_server(tmp_path / "nats", extra_args=extra_args) as server:
        yield server


@asynccontextmanager
async def serves(url: str, homes: list[Path]) -> AsyncIterator[None]:
    """One `serve` (orchestrator, planner, coder) per home on the NATS at `url`, each with its own
    connection, center watch and orchestrator; stopped (drained) on exit."""
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        for home in homes:
            config = BusConfig(servers=(url,), state_dir=home, name=f"serve-{home.name}")

            async def run(task_status: TaskStatus[ServeNote], config: BusConfig = config) -> None:
                await serve(
                    config,
                    stop=stop,
                    workers=Workers(roles=ROLES, policy=DeliveryPolicy(ack_wait_s=10)),
                    hosting=Hosting(metrics=None),
                    task_status=task_status,
                )

            await tg.start(run)
        try:
            yield
        finally:
            stop.set()


@asynccontextmanager
async def serve_process(url: str, home: Path) -> AsyncIterator[dict[str, Any]]:
    """`codeloop serve --json` (orchestrator, planner, coder) as a process of its own on `url`;
    yields its ready note; its log goes to `HOME/serve.log` (a pipe nobody reads would fill and
    stop it); stopped and reaped on exit."""
    roles = [arg for role in ROLES for arg in ("--role", role)]
    command = [sys.executable, "-m", "codeloop", "serve", "--json", "--nats", url, *roles, "--no-mcp"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODELOOP_")}
    env |= {"PYTHONPATH": str(REPO), "CODELOOP_HOME": str(home)}
    await anyio.Path(home).mkdir(parents=True, exist_ok=True)
    with (home / "serve.log").open("wb") as log:
        process = await anyio.open_process([*command, "--state-dir", str(home)], env=env, stderr=log)
        try:
            assert process.stdout is not None
            buffer = b""
            with anyio.fail_after(240):
                while b"\n" not in buffer:
                    buffer += await process.stdout.receive()
            yield json.loads(buffer.split(b"\n", 1)[0])
        finally:
            with anyio.CancelScope(shield=True):
                await stop_process(process)
                await process.aclose()


def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"README.md": "# notes\n"})


async def run_task(bus: Bus, repo: Path, **changes: object) -> TaskResult:
    """Submit a write task of the plan → code pipeline (no model of its own: the center names one)
    and wait for its result."""
    task = TaskSubmitted(
        text="write the notes",
        repo=str(repo),
        mode="write",
        pipeline=PLAN_AND_CODE,
        snapshot=await capture_snapshot(bus, repo),
    ).model_copy(update=changes)
    envelope, _ = await submit_task(bus, task)
    with anyio.fail_after(300):
        final = await watch_task(bus, envelope.task_id, lambda e: None)
    return TaskResult.model_validate(final.payload)
