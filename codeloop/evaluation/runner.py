"""Running a task set through the real pipeline: one bus for the whole run, N tasks at once.

The bus is given (`codeloop eval` opens it with `codeloop.wiring.embedded.embedded_serve`: the
local `codeloop serve` when one runs, or `--nats URL`, else an embedded one with every role in
this process, started once for all tasks). Each task runs on its own git copy of its repository;
the copy is also what the checks patch and test, so the task set never changes.
"""

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from agents.client import submit_task, watch_task
from agents.messages import TaskResult, TaskSubmitted
from bus.config import BusConfig
from bus.connection import Bus, open_bus
from codeloop.evaluation.taskset import EvalTask, materialise
from codeloop.snapshots import capture_repository


@dataclass
class Outcome:
    """What running one task gave: the pipeline's result, or why there is none."""

    task: EvalTask
    result: TaskResult | None
    """The `TaskResult`, None when the run itself broke."""
    error: str | None
    wall_s: float
    repo: Path
    """The task's pristine copy (the checks patch a copy of it)."""


async def run_tasks(
    tasks: list[EvalTask],
    *,
    config: BusConfig,
    submit: Callable[[EvalTask, Path], TaskSubmitted],
    scratch: Path,
    jobs: int,
    on_done: Callable[[Outcome], Awaitable[None]],
) -> None:
    """Run every task on the bus of `config`, `jobs` at once, calling `on_done` as each ends (in
    completion order). `submit(task, repo_copy)` builds the `TaskSubmitted`."""
    limiter = anyio.CapacityLimiter(jobs)
    async with open_bus(config) as bus:

        async def one(task: EvalTask) -> None:
            async with limiter:
                outcome = await _run_one(bus, task, submit=submit, scratch=scratch)
            await on_done(outcome)

        async with anyio.create_task_group() as tg:
            for task in tasks:
                tg.start_soon(one, task)


async def _run_one(
    bus: Bus, task: EvalTask, *, submit: Callable[[EvalTask, Path], TaskSubmitted], scratch: Path
) -> Outcome:
    started = time.monotonic()
    repo = scratch / task.id / "repo"
    try:
        await anyio.to_thread.run_sync(materialise, task, repo)
        submitted = submit(task, repo)
        # A task's tree copy gets a commit made now: its dependency files have no date to keep.
        snapshot = await capture_repository(bus, repo, dated=task.repo_path.is_file())
        envelope, _ = await submit_task(bus, submitted.model_copy(update={"snapshot": snapshot}))
        final = await watch_task(bus, envelope.task_id, lambda envelope: None)
        result = TaskResult.model_validate(final.payload)
    except Exception as exc:  # one broken task must not end the run: it becomes a row
        return Outcome(task, None, f"{type(exc).__name__}: {exc}", time.monotonic() - started, repo)
    return Outcome(task, result, None, time.monotonic() - started, repo)
