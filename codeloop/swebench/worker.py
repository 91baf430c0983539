"""A SWE-bench worker: takes instances from the bus (`codeloop.swebench.distribution`), runs and
grades each here, stores its files and publishes its outcome, then acks. Started by
`codeloop swebench-worker` on any machine, and by a coordinator for its own `--jobs`."""

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import nats.errors
from anyio.abc import TaskStatus
from nats.aio.msg import Msg

from bus.connection import Bus
from codeloop.swebench.distribution import (
    WORK_PREFIX,
    WORK_STREAM,
    WORKERS,
    ensure_swebench_streams,
    heartbeat_interval,
    publish_outcome,
    scratch_out,
)
from codeloop.swebench.errors import SwebenchError
from codeloop.swebench.instances import Instance
from codeloop.swebench.outcome import Outcome
from codeloop.swebench.predictions import Prediction
from codeloop.swebench.repositories import RepoSource, find_source
from codeloop.swebench.run import RunSettings, run_instance
from codeloop.swebench.specs import register_specs

SettingsFor = Callable[[dict[str, Any]], RunSettings]
"""The run settings of a message's options (timeout, memory, tests left out)."""


@dataclass
class _Worker:
    """What every slot of a worker process shares."""

    bus: Bus
    settings_for: SettingsFor
    repos_dir: Path | None
    cache_dir: Path
    beat_s: float
    sources: dict[str, RepoSource] = field(default_factory=dict)


async def serve_workers(
    bus: Bus,
    *,
    settings_for: SettingsFor,
    repos_dir: Path | None,
    cache_dir: Path,
    jobs: int,
    idle_exit_s: float | None = None,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Run `jobs` instances at a time until cancelled (or, with `idle_exit_s`, until no work came
    for that long)."""
    await ensure_swebench_streams(bus)
    worker = _Worker(bus, settings_for, repos_dir, cache_dir, await heartbeat_interval(bus))
    idle = {"since": anyio.current_time()}
    subscriptions = [
        await bus.js.pull_subscribe(f"{WORK_PREFIX}.>", durable=WORKERS, stream=WORK_STREAM)
        for _ in range(jobs)
    ]
    task_status.started()

    async def slot(subscription: Any, stop: anyio.CancelScope) -> None:
        while True:
            try:
                messages = await subscription.fetch(1, timeout=5)
            except nats.errors.TimeoutError:
                if idle_exit_s is not None and anyio.current_time() - idle["since"] > idle_exit_s:
                    stop.cancel()
                continue
            idle["since"] = anyio.current_time()
            await _handle(worker, messages[0])
            idle["since"] = anyio.current_time()

    try:
        async with anyio.create_task_group() as tg:
            for subscription in subscriptions:
                tg.start_soon(slot, subscription, tg.cancel_scope)
    finally:
        with anyio.CancelScope(shield=True):
            for subscription in subscriptions:
                await subscription.unsubscribe()


async def _handle(worker: _Worker, msg: Msg) -> None:
    try:
        data = json.loads(msg.data)
        if data.get("kind") != "swebench_instance":
            raise ValueError(f"kind {data.get('kind')!r}")
        instance = Instance.model_validate(data["instance"])
        prediction = Prediction.model_validate(data["prediction"])
        options, run_id = data["options"], str(data["run_id"])
    except (ValueError, KeyError, TypeError) as exc:  # malformed: no redelivery can help
        print(f"swebench worker: dropped a malformed message: {exc}")
        await msg.term()
        return
    out = scratch_out()
    try:
        outcome = await _run_with_heartbeats(worker, msg, instance, prediction, options, out)
        await publish_outcome(worker.bus, run_id, outcome, out / "instances" / instance.instance_id)
        await msg.ack()
    finally:
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(out, ignore_errors=True))


async def _run_with_heartbeats(
    worker: _Worker, msg: Msg, instance: Instance, prediction: Prediction, options: dict[str, Any], out: Path
) -> Outcome:
    async with anyio.create_task_group() as tg:

        async def heartbeat() -> None:
            while True:
                await anyio.sleep(worker.beat_s)
                await msg.in_progress()

        tg.start_soon(heartbeat)
        try:
            if options.get("specs"):
                register_specs(options["specs"], where="the run's --specs")
            if instance.repo not in worker.sources:
                worker.sources[instance.repo] = await anyio.to_thread.run_sync(
                    lambda: find_source(
                        instance.repo, repos_dir=worker.repos_dir, cache_dir=worker.cache_dir / "swebench"
                    )
                )
            outcome = await run_instance(
                instance,
                prediction,
                source=worker.sources[instance.repo],
                settings=worker.settings_for(options),
                out=out,
            )
        except SwebenchError as exc:  # this machine cannot run it (no repository here, ...)
            (out / "instances" / instance.instance_id).mkdir(parents=True, exist_ok=True)
            outcome = Outcome(
                instance_id=instance.instance_id,
                repo=instance.repo,
                version=instance.version,
                status="error",
                failure_class="env.setup",
                message=str(exc),
                model_name_or_path=prediction.model_name_or_path,
            )
            (out / "instances" / instance.instance_id / "outcome.json").write_text(
                outcome.model_dump_json(indent=2)
            )
        tg.cancel_scope.cancel()
    return outcome
