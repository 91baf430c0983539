"""A SWE-bench worker: takes instances from the bus (`codeloop.swebench.distribution`), runs and
grades each here, stores its files and publishes its outcome; the instance is acked then, never
before (`bus.work_queue`: heartbeats while it runs, handed back if this worker stops).

`SwebenchWorkers` is what runs them: `codeloop swebench-worker` on any machine, a coordinator for
its own `--jobs`, and `codeloop serve --role swebench` (once per slot), where it is one of the
serve's services (`codeloop.wiring.process.Service`): no actor of the agents' pipeline, no stage,
no `codeloop.roles` entry point, and never on `codeloop.task.>`.
"""

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import TaskStatus

from bus.connection import Bus
from bus.work_queue import Job, take_jobs
from codeloop.swebench import SWEBENCH_ROLE
from codeloop.swebench.distribution import WORK_QUEUE, ensure_swebench_streams, publish_outcome, scratch_out
from codeloop.swebench.errors import SwebenchError
from codeloop.swebench.instances import Instance
from codeloop.swebench.outcome import Outcome
from codeloop.swebench.predictions import Prediction
from codeloop.swebench.repositories import RepoSource, find_source
from codeloop.swebench.run import Machine, RunOptions, run_instance, settings_for
from codeloop.swebench.specs import register_specs


@dataclass(frozen=True)
class SwebenchWorkers:
    """The SWE-bench worker slots of one process."""

    machine: Machine
    """This machine's caches, sandbox policy and build environment (read once by the command line)."""
    jobs: int = 1
    """Instances run at once here (with `serve`: the occurrences of `--role swebench`)."""
    repos_dir: Path | None = None
    """This machine's repositories (clones, mirrors or bundles; `codeloop swebench --repos`)."""
    idle_exit_s: float | None = None
    """Return after this many seconds without work (`codeloop swebench-worker --idle-exit`, for
    batch pods); None: until cancelled."""
    name: str = SWEBENCH_ROLE
    """How the serve's logs and note name this service."""

    async def run(self, bus: Bus, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run `jobs` instances at a time until cancelled (or idle for `idle_exit_s`)."""
        await ensure_swebench_streams(bus)
        worker = _Worker(bus, self)
        await take_jobs(
            bus,
            WORK_QUEUE,
            worker.handle,
            concurrency=self.jobs,
            idle_exit_s=self.idle_exit_s,
            task_status=task_status,
        )


@dataclass
class _Worker:
    """What every slot of a worker process shares."""

    bus: Bus
    workers: SwebenchWorkers
    sources: dict[str, RepoSource] = field(default_factory=dict[str, RepoSource])

    async def handle(self, job: Job) -> None:
        try:
            data = json.loads(job.data)
            if data.get("kind") != "swebench_instance":
                raise ValueError(f"kind {data.get('kind')!r}")
            instance = Instance.model_validate(data["instance"])
            prediction = Prediction.model_validate(data["prediction"])
            options, run_id = data["options"], str(data["run_id"])
        except (ValueError, KeyError, TypeError) as exc:  # malformed: no redelivery can help
            print(f"swebench worker: dropped a malformed message: {exc}")
            await job.term()
            return
        out = scratch_out()
        try:
            outcome = await _run(self, instance, prediction, options, out)
            await publish_outcome(self.bus, run_id, outcome, out / "instances" / instance.instance_id)
        finally:
            await anyio.to_thread.run_sync(lambda: shutil.rmtree(out, ignore_errors=True))


async def _run(
    worker: _Worker, instance: Instance, prediction: Prediction, options: RunOptions, out: Path
) -> Outcome:
    """Run and grade the instance; a machine that cannot run it (no repository here, ...) makes
    an error outcome, not a crash."""
    machine = worker.workers.machine
    try:
        specs = options.get("specs")
        if specs:
            register_specs(specs, where="the run's --specs")
        if instance.repo not in worker.sources:
            worker.sources[instance.repo] = await anyio.to_thread.run_sync(
                lambda: find_source(
                    instance.repo,
                    repos_dir=worker.workers.repos_dir,
                    cache_dir=machine.cache_dir / "swebench",
                )
            )
        return await run_instance(
            instance,
            prediction,
            source=worker.sources[instance.repo],
            settings=settings_for(options, machine),
            out=out,
        )
    except SwebenchError as exc:
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
        return outcome
