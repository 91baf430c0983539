"""A run on one machine: every instance `jobs` at a time, each written as it finishes, the run's
report rewritten after each, so Ctrl-C (or a crash) leaves a consistent partial report and
`--resume` runs only what was not graded."""

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from pydantic import JsonValue

from codeloop.swebench.html import html_report
from codeloop.swebench.instances import Instance
from codeloop.swebench.outcome import Outcome
from codeloop.swebench.predictions import Prediction
from codeloop.swebench.progress import Progress
from codeloop.swebench.report import load_outcomes, repository_figures, run_report, validation, write_json
from codeloop.swebench.repositories import RepoSource
from codeloop.swebench.run import RunOptions, RunSettings, run_instance

if TYPE_CHECKING:
    from codeloop.config.settings import Settings

GRADED = ("resolved", "unresolved")


@dataclass
class RunPlan:
    """What to run and where the results go."""

    instances: list[Instance]
    predictions: dict[str, Prediction]
    sources: dict[str, RepoSource]
    settings: RunSettings
    out: Path
    jobs: int = 1
    resume: bool = False
    gold: bool = False
    """A gold run also writes `validation.json` (the listed tests that fail with the gold patch)."""
    extra: dict[str, JsonValue] = field(default_factory=dict[str, JsonValue])
    """What the report's `codeloop` figures add about the run (predictions, jobs, ...)."""
    options: RunOptions | None = None
    """The options every instance travels with on the bus (timeout, memory, left-out tests, specs);
    None for a plan only reported, never run (the picks of a `--select` run)."""
    repos_dir: Path | None = None
    model: str | None = None
    """`--model`: the predictions are made by codeloop first (`codeloop.swebench.solve`)."""
    model_settings: "Settings | None" = None
    """The settings of a `--model` run's tasks (`codeloop.swebench.solve.model_settings`)."""


def pending(plan: RunPlan, done: dict[str, Outcome]) -> list[Instance]:
    """The instances still to run: predicted, and not graded already (errors run again)."""
    return [
        i
        for i in plan.instances
        if i.instance_id in plan.predictions
        and done.get(i.instance_id, Outcome.model_construct(status="error")).status not in (*GRADED, "empty")
    ]


def empty_outcome(instance: Instance, prediction: Prediction) -> Outcome:
    """An empty prediction from a file: not run, as the official harness does not run it."""
    return Outcome(
        instance_id=instance.instance_id,
        repo=instance.repo,
        version=instance.version,
        status="empty",
        model_name_or_path=prediction.model_name_or_path,
    )


async def run_local(plan: RunPlan, progress: Progress | None = None) -> dict[str, Outcome]:
    """Run the plan in this process; returns every outcome (earlier ones of a resumed run too)."""
    (plan.out / "instances").mkdir(parents=True, exist_ok=True)
    outcomes = load_outcomes(plan.out) if plan.resume else {}
    todo = pending(plan, outcomes)
    started = time.monotonic()
    limiter = anyio.CapacityLimiter(plan.jobs)
    lock = anyio.Lock()

    async def finished(outcome: Outcome) -> None:
        async with lock:
            outcomes[outcome.instance_id] = outcome
            write_outputs(plan, outcomes, wall_s=time.monotonic() - started, finished=False)
            if progress is not None:
                progress.finished(outcome)

    async def one(instance: Instance) -> None:
        prediction = plan.predictions[instance.instance_id]
        if prediction.is_empty and prediction.model_name_or_path != "empty":
            await finished(empty_outcome(instance, prediction))
            return
        async with limiter:
            outcome = await run_instance(
                instance, prediction, source=plan.sources[instance.repo], settings=plan.settings, out=plan.out
            )
        await finished(outcome)

    write_outputs(plan, outcomes, wall_s=0.0, finished=not todo)
    async with anyio.create_task_group() as tg:
        for instance in todo:
            tg.start_soon(one, instance)
    write_outputs(plan, outcomes, wall_s=time.monotonic() - started, finished=True)
    return outcomes


def write_outputs(
    plan: RunPlan, outcomes: dict[str, Outcome], *, wall_s: float, finished: bool
) -> dict[str, JsonValue]:
    """Write report.json, report.html and (gold runs) validation.json, atomically."""
    extra = {**plan.extra, "finished": finished, "run_wall_s": round(wall_s, 1)}
    report = run_report(plan.instances, plan.predictions, outcomes, extra=extra)
    write_json(plan.out / "report.json", report)
    html = plan.out / "report.html"
    partial = html.with_name(".report.html.partial")
    repositories = repository_figures(plan.instances, outcomes)
    partial.write_text(html_report(report, outcomes, repositories), encoding="utf-8")
    partial.replace(html)
    if plan.gold:
        write_json(plan.out / "validation.json", validation(outcomes))
    return report
