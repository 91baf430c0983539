"""The coordinator of a run on the bus: publishes the instances still to run, runs `--jobs`
workers of its own, and writes each outcome that comes back (from any machine) into OUT,
rewriting the report after each, as a run on one machine does."""

import json
import secrets
import time
from pathlib import Path
from typing import Any

import anyio
import nats.errors

from bus.connection import Bus, nats_errors, open_bus
from codeloop.swebench.distribution import (
    MAX_DELIVER,
    RESULTS_STREAM,
    WORK_STREAM,
    WORKERS,
    ensure_swebench_streams,
    fetch_artifact,
    result_subject,
    unpack,
    work_message,
    work_subject,
)
from codeloop.swebench.harness import RunPlan, empty_outcome, pending, write_outputs
from codeloop.swebench.outcome import Outcome
from codeloop.swebench.progress import Progress
from codeloop.swebench.report import load_outcomes
from codeloop.swebench.worker import SettingsFor, serve_workers

ADVISORY = f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{WORK_STREAM}.{WORKERS}"


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
    bus_config: Any,
    *,
    settings_for: SettingsFor,
    options: dict[str, Any],
    repos_dir: Path | None,
    cache_dir: Path,
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
                tg.start_soon(
                    lambda: serve_workers(
                        bus,
                        settings_for=settings_for,
                        repos_dir=repos_dir,
                        cache_dir=cache_dir,
                        jobs=plan.jobs,
                    )
                )
            tg.start_soon(_watch_dead_letters, bus, run_id, waiting, plan, finished)
            await _collect(bus, run_id, waiting, plan, finished)
            tg.cancel_scope.cancel()
    write_outputs(plan, outcomes, wall_s=time.monotonic() - started, finished=True)
    return outcomes


async def _publish(
    bus: Bus, plan: RunPlan, run_id: str, todo: list, options: dict, finished: Any
) -> set[str]:
    waiting: set[str] = set()
    with nats_errors():
        for instance in todo:
            prediction = plan.predictions[instance.instance_id]
            if prediction.is_empty and prediction.model_name_or_path != "empty":
                finished(empty_outcome(instance, prediction))
                continue
            body = work_message(run_id, instance.as_swebench(), prediction.model_dump(mode="json"), options)
            await bus.js.publish(
                work_subject(run_id), body, headers={"Nats-Msg-Id": f"{run_id}.{instance.instance_id}"}
            )
            waiting.add(instance.instance_id)
    return waiting


async def _collect(bus: Bus, run_id: str, waiting: set[str], plan: RunPlan, finished: Any) -> None:
    """Take outcomes until none is missing (late duplicates of a redelivered instance are dropped)."""
    durable = f"swebench-coordinator-{run_id}"
    subscription = await bus.js.pull_subscribe(result_subject(run_id), durable=durable, stream=RESULTS_STREAM)
    try:
        while waiting:
            try:
                messages = await subscription.fetch(1, timeout=5)
            except nats.errors.TimeoutError:
                continue
            msg = messages[0]
            body = json.loads(msg.data)
            outcome = Outcome.model_validate(body["outcome"])
            if outcome.instance_id in waiting:
                data = await fetch_artifact(bus, body["artifact"])
                target = plan.out / "instances" / outcome.instance_id
                await anyio.to_thread.run_sync(unpack, data, target)
                waiting.discard(outcome.instance_id)
                finished(outcome)
            await msg.ack()
    finally:
        with anyio.CancelScope(shield=True):
            await subscription.unsubscribe()
            with nats_errors():
                await bus.js.delete_consumer(RESULTS_STREAM, durable)


async def _watch_dead_letters(bus: Bus, run_id: str, waiting: set[str], plan: RunPlan, finished: Any) -> None:
    """An instance no worker finished in MAX_DELIVER deliveries (each worker died on it) is an
    error instance; its message is removed from the work queue."""
    subscription = await bus.nc.subscribe(ADVISORY)
    try:
        async for advisory in subscription.messages:
            seq = json.loads(advisory.data).get("stream_seq")
            with nats_errors():
                stored = await bus.js.get_msg(WORK_STREAM, seq)
            body = json.loads(stored.data or b"{}")
            instance = body.get("instance", {})
            if body.get("run_id") != run_id or instance.get("instance_id") not in waiting:
                continue
            with nats_errors():
                await bus.js.delete_msg(WORK_STREAM, seq)
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
    finally:
        with anyio.CancelScope(shield=True):
            await subscription.unsubscribe()
