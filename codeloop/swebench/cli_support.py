"""What `codeloop swebench` does between parsing its options and printing: check every input
before anything runs, then run the plan (here, or shared through a bus) with a progress line.

What comes from the environment is given: the machine's caches, sandbox policy and build variables
(`run.Machine`), the bus to share a run on, and the serve a `--model` run solves its instances on
(the command line starts it: this package is no composition root)."""

import os
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import JsonValue

from bus.config import BusConfig
from codeloop.swebench.errors import InterpreterMissing, PredictionsError, SwebenchError
from codeloop.swebench.harness import RunPlan, run_local
from codeloop.swebench.instances import Instance, load_instances, select
from codeloop.swebench.predictions import EMPTY, GOLD, Prediction, builtin_predictions, load_predictions
from codeloop.swebench.report import write_json
from codeloop.swebench.repositories import RepoSource, find_source
from codeloop.swebench.run import Machine, RunOptions, settings_for
from codeloop.swebench.specs import load_extra_specs, needs_cpus, registered_specs, spec_for

if TYPE_CHECKING:
    from codeloop.swebench.selection import SelectPlan


@dataclass(frozen=True)
class Options:
    """The command's options, as given."""

    instances: Path
    predictions: str | None
    model: str | None
    instance_ids: list[str] | None
    repo: str | None
    sample: int | None
    repos: Path | None
    specs: Path | None
    left_out: Path | None
    out: Path | None
    jobs: int
    timeout_s: float
    memory_mb: int
    resume: Path | None
    select: bool = False
    """`--select`: `predictions` is the first of `sources`, every one a source of candidates."""
    sources: tuple[str, ...] = ()
    """Every `--predictions` given (`PATH` or `NAME=PATH`)."""
    grade_by_labels: bool = False
    """`--grade-by-labels` (with `--select`): a candidate whose source has official labels takes
    its label as its grade instead of a harness run."""


Serving = Callable[[], AbstractAsyncContextManager[BusConfig]]
"""Opens the serve a `--model` run's tasks run on, for as long as the solving takes; gives what
a client connects to it with."""


def prepare(options: Options, machine: Machine) -> RunPlan:
    """Check every input and make the plan; nothing is written before it returns.

    Raises:
        SwebenchError: a bad input (the message is the one line the user sees).
    """
    if (options.predictions is None) == (options.model is None):
        raise SwebenchError("give exactly one of --predictions FILE|gold|empty and --model M")
    model_settings = None
    if options.model is not None:
        from codeloop.config.errors import ConfigError
        from codeloop.swebench.solve import model_settings as settings_of_model

        try:
            model_settings = settings_of_model(options.model)
        except ConfigError as exc:
            raise SwebenchError(f"--model {options.model}: {exc}") from None
    if options.specs is not None:
        load_extra_specs(options.specs)
    every = load_instances(options.instances)
    chosen = select(every, ids=options.instance_ids, repo=options.repo, sample=options.sample)
    predictions = _predictions(options, every, chosen)
    for instance in chosen:
        spec_for(instance)
    _check_interpreters(chosen)
    _warn_cpus(chosen)
    sources = _sources(chosen, options.repos, machine)
    out = _out_dir(options)
    run_options: RunOptions = {
        "timeout_s": options.timeout_s,
        "memory_mb": options.memory_mb,
        "left_out": _left_out(options.left_out),
        "specs": registered_specs(),
    }
    settings = settings_for(run_options, machine)
    extra = {
        "predictions": options.predictions or f"model {options.model}",
        "instances_file": str(options.instances),
        "jobs": options.jobs,
        "timeout_s": options.timeout_s,
        "swebench": "4.1.0",
        "sandbox": "gvisor",
    }
    return RunPlan(
        instances=chosen,
        predictions=predictions,
        sources=sources,
        settings=settings,
        out=out,
        jobs=options.jobs,
        resume=options.resume is not None,
        gold=options.predictions == GOLD,
        extra=extra,
        options=run_options,
        repos_dir=options.repos,
        model=options.model,
        model_settings=model_settings,
    )


def prepare_select(options: Options, machine: Machine) -> "SelectPlan":
    """Check every input of a `--select` run and make its plan; nothing is written before it
    returns.

    Raises:
        SwebenchError: a bad input (the message is the one line the user sees).
    """
    from codeloop.swebench.candidates import load_sources
    from codeloop.swebench.selection import SelectPlan

    if options.model is not None:
        raise SwebenchError("--select takes predictions files only: no --model")
    if any(p in (GOLD, EMPTY) for p in options.sources):
        raise SwebenchError("--select takes predictions files; gold and empty are no candidates")
    if options.specs is not None:
        load_extra_specs(options.specs)
    every = load_instances(options.instances)
    chosen = select(every, ids=options.instance_ids, repo=options.repo, sample=options.sample)
    sources = load_sources(list(options.sources), known_ids={i.instance_id for i in every})
    chosen = [i for i in chosen if any(s.candidate(i.instance_id) for s in sources)]
    for instance in chosen:
        spec_for(instance)
    _check_interpreters(chosen)
    _warn_cpus(chosen)
    run_options: RunOptions = {
        "timeout_s": options.timeout_s,
        "memory_mb": options.memory_mb,
        "left_out": _left_out(options.left_out),
    }
    extra = {
        "predictions": [s.name for s in sources],
        "instances_file": str(options.instances),
        "jobs": options.jobs,
        "timeout_s": options.timeout_s,
        "swebench": "4.1.0",
        "sandbox": "gvisor",
    }
    return SelectPlan(
        instances=chosen,
        sources=sources,
        repos=_sources(chosen, options.repos, machine),
        settings=settings_for(run_options, machine),
        out=_out_dir(options),
        jobs=max(options.jobs, 1),
        extra=extra,
        grade_by_labels=options.grade_by_labels,
        resume=options.resume is not None,
    )


def run_select(plan: "SelectPlan") -> dict[str, JsonValue]:
    """Run a `--select` plan in this process; returns its summary (selection_summary.json)."""
    import anyio

    from codeloop.swebench.selection import run_selection

    return anyio.run(run_selection, plan)


def _predictions(options: Options, every: list[Instance], chosen: list[Instance]) -> dict[str, Prediction]:
    if options.model is not None:
        return {}  # made by the model first (`run`), instance by instance
    if options.predictions in (GOLD, EMPTY):
        return builtin_predictions(options.predictions, chosen)
    path = Path(options.predictions or "")
    if not path.is_file():
        raise PredictionsError(f"--predictions {path}: no such file (or say gold or empty)")
    loaded = load_predictions(path, known_ids={i.instance_id for i in every})
    wanted = {i.instance_id for i in chosen}
    return {k: v for k, v in loaded.items() if k in wanted}


def _check_interpreters(chosen: list[Instance]) -> None:
    from sandbox.environments import find_python
    from sandbox.errors import EnvironmentSetupError

    for version in sorted({str(spec_for(i)["python"]) for i in chosen}):
        try:
            find_python(version)
        except EnvironmentSetupError as exc:
            raise InterpreterMissing(str(exc)) from None


def _warn_cpus(chosen: list[Instance]) -> None:
    """Some specs give their container two CPUs (pylint 2.14+: tests that need two workers skip or
    fail with one); the sandbox shows this machine's CPUs, so say when there are fewer."""
    import sys

    wanted = max((needs_cpus(spec_for(i)) for i in chosen), default=1)
    have = os.cpu_count() or 1
    if have < wanted:
        sys.stderr.write(
            f"warning: some specs give the official container {wanted} CPUs; this machine has {have}\n"
        )


def _sources(chosen: list[Instance], repos: Path | None, machine: Machine) -> dict[str, RepoSource]:
    if repos is not None and not repos.is_dir():
        raise SwebenchError(f"--repos {repos} is not a directory")
    sources = {}
    for repo in sorted({i.repo for i in chosen}):
        sources[repo] = find_source(repo, repos_dir=repos, cache_dir=machine.cache_dir / "swebench")
    for instance in chosen:
        source = sources[instance.repo]
        source.resolve(instance.base_commit)
        source.resolve(instance.env_commit)
    return sources


def _out_dir(options: Options) -> Path:
    if options.resume is not None:
        if options.out is not None and options.out.resolve() != options.resume.resolve():
            raise SwebenchError("--out and --resume name different directories; give one")
        if not (options.resume / "report.json").is_file():
            raise SwebenchError(
                f"--resume {options.resume}: no report.json there (not a codeloop swebench run)"
            )
        return options.resume
    out = options.out or Path("swebench-runs") / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SwebenchError(f"--out {out} is not empty; name a new directory, or --resume it")
    return out


def _left_out(path: Path | None) -> dict[str, list[str]]:
    import json

    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {k: list(v["cannot_run"]) for k, v in data.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SwebenchError(f"--left-out {path}: not a validation.json of a gold run: {exc}") from None


def run(
    plan: RunPlan, *, machine: Machine, bus: BusConfig | None, serving: Serving | None = None
) -> dict[str, JsonValue]:
    """Run the plan and return the final report (what report.json holds): through `bus` when
    given (its workers and ours share the run), else here. A `--model` plan solves its instances
    first, on the serve `serving` opens.
    """
    import json

    import anyio

    from codeloop.swebench.harness import pending
    from codeloop.swebench.progress import Progress
    from codeloop.swebench.report import load_outcomes

    progress = Progress(
        len(pending(plan, load_outcomes(plan.out) if plan.resume else {})) or len(plan.instances)
    )
    interrupted = False
    try:
        if plan.model is not None:
            assert serving is not None, "a --model plan is solved on a serve"
            anyio.run(_solve, plan, serving)
        if bus is None:
            anyio.run(run_local, plan, progress)
        else:
            from codeloop.swebench.coordinator import run_distributed

            options = plan.options
            assert options is not None, "a plan that runs has its options"
            anyio.run(
                lambda: run_distributed(
                    plan,
                    bus,
                    machine=machine,
                    options=options,
                    repos_dir=plan.repos_dir,
                    progress=progress,
                )
            )
    except KeyboardInterrupt:
        interrupted = True
    report = json.loads((plan.out / "report.json").read_text(encoding="utf-8"))
    if interrupted:  # the report stays what the finished instances made, marked as such
        report["codeloop"]["interrupted"] = True
        write_json(plan.out / "report.json", report)
    return report


async def _solve(plan: RunPlan, serving: Serving) -> None:
    """`--model`: make the predictions first (OUT/predictions.jsonl), then grade them."""
    import sys

    from codeloop.swebench.solve import solve

    assert plan.model is not None and plan.model_settings is not None, "a --model plan has its settings"
    made = plan.out / "predictions.jsonl"
    done = {}
    if plan.resume and made.is_file():
        done = load_predictions(made, known_ids={i.instance_id for i in plan.instances})
    sys.stderr.write(f"solving {len(plan.instances)} instances with {plan.model}\n")
    async with serving() as config:
        plan.predictions = await solve(
            plan.instances,
            plan.sources,
            model=plan.model,
            settings=plan.model_settings,
            config=config,
            out=plan.out,
            jobs=max(plan.jobs, 1),
            done=done,
        )
