"""The coordinator of a run on the bus: publishes the instances still to run, runs `--jobs`
workers of its own, and writes each outcome that comes back (from any machine) into OUT,
rewriting the report after each, as a run on one machine does."""

import json
import secrets
import time
from collections.abc import Callable
from pathlib import Path

import anyio

from bus.config import BusConfig
from bus.connection import Bus, open_bus
from bus.stored import delete_message, follow
from bus.work_queue import given_up
from codeloop.swebench.distribution import (
    MAX_DELIVER,
    WORK_QUEUE,
    ensure_swebench_streams,
    fetch_artifact,
    publish_work,
    result_subject,
    unpack,
    work_message,
)
from codeloop.swebench.harness import RunPlan, empty_outcome, pending, write_outputs
from codeloop.swebench.instances import Instance
from codeloop.swebench.outcome import Outcome
from codeloop.swebench.progress import Progress
from codeloop.swebench.report import load_outcomes
from codeloop.swebench.run import Machine, RunOptions
from codeloop.swebench.worker import SwebenchWorkers

Finished = Callable[[Outcome], None]


def run_id_of(out: Path) -> str:
    """The run's id, kept in OUT/run.json so a resumed run collects what its workers publish."""
    path = out / "run.json"
    if path.is_file():
        return json.loads(path.read_text())["run_id"]
    run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(4)}"
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"run_id": run_id}) + "\n")
    return run_id


async def run_distributed(
    plan: RunPlan,
    bus_config: BusConfig,
    *,
    machine: Machine,
    options: RunOptions,
    repos_dir: Path | None,
    progress: Progress | None = None,
) -> dict[str, Outcome]:
    """Run the plan through the bus; returns every outcome. `options` travel with each instance."""
    (plan.out / "instances").mkdir(parents=True, exist_ok=True)
    outcomes = load_outcomes(plan.out) if plan.resume else {}
    run_id = run_id_of(plan.out)
    todo = pending(plan, outcomes)
    started = time.monotonic()
    write_outputs(plan, outcomes, wall_s=0.0, finished=not todo)

    def finished(outcome: Outcome) -> None:
        outcomes[outcome.instance_id] = outcome
        write_outputs(plan, outcomes, wall_s=time.monotonic() - started, finished=False)
        if progress is not None:
            progress.finished(outcome)

    async with open_bus(bus_config) as bus:
        await ensure_swebench_streams(bus)
        waiting = await _publish(bus, plan, run_id, todo, options, finished)
        async with anyio.create_task_group() as tg:
            if plan.jobs:
                tg.start_soon(SwebenchWorkers(machine, jobs=plan.jobs, repos_dir=repos_dir).run, bus)
            await tg.start(_watch_dead_letters, bus, run_id, waiting, finished)
            await _collect(bus, run_id, waiting, plan, finished)
            tg.cancel_scope.cancel()
    write_outputs(plan, outcomes, wall_s=time.monotonic() - started, finished=True)
    return outcomes


async def _publish(
    bus: Bus, plan: RunPlan, run_id: str, todo: list[Instance], options: RunOptions, finished: Finished
) -> set[str]:
    waiting: set[str] = set()
    for instance in todo:
        prediction = plan.predictions[instance.instance_id]
        if prediction.is_empty and prediction.model_name_or_path != "empty":
            finished(empty_outcome(instance, prediction))
            continue
        body = work_message(run_id, instance.as_swebench(), prediction.model_dump(mode="json"), options)
        await publish_work(bus, run_id, instance.instance_id, body)
        waiting.add(instance.instance_id)
    return waiting


async def _collect(bus: Bus, run_id: str, waiting: set[str], plan: RunPlan, finished: Finished) -> None:
    """Take outcomes until none is missing: the run's results from its first (a resumed run's
    earlier ones, late duplicates of a redelivered instance, are passed over)."""
    async with follow(bus, result_subject(run_id), after=0, idle_s=5.0) as results:
        while waiting:
            msg = await results.next()
            if msg is None:
                continue
            body = json.loads(msg.data)
            outcome = Outcome.model_validate(body["outcome"])
            if outcome.instance_id in waiting:
                data = await fetch_artifact(bus, body["artifact"])
                target = plan.out / "instances" / outcome.instance_id
                await anyio.to_thread.run_sync(unpack, data, target)
                waiting.discard(outcome.instance_id)
                finished(outcome)


async def _watch_dead_letters(
    bus: Bus,
    run_id: str,
    waiting: set[str],
    finished: Finished,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """An instance no worker finished in MAX_DELIVER deliveries (each worker died on it) is an
    error instance; its message is removed from the work queue."""
    async with given_up(bus, WORK_QUEUE) as dead:
        task_status.started()
        async for stored in dead:
            body = json.loads(stored.data or b"{}")
            instance = body.get("instance", {})
            if body.get("run_id") != run_id or instance.get("instance_id") not in waiting:
                continue
            await delete_message(bus, WORK_QUEUE.stream, stored.seq)
            waiting.discard(instance["instance_id"])
            finished(
                Outcome(
                    instance_id=instance["instance_id"],
                    repo=instance["repo"],
                    version=str(instance["version"]),
                    status="error",
                    failure_class="env.infra",
                    message=f"no worker finished it in {MAX_DELIVER} deliveries (each one died or was killed)",
                    model_name_or_path=body.get("prediction", {}).get("model_name_or_path", ""),
                )
            )
