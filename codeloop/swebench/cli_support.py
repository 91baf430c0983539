"""What `codeloop swebench` does between parsing its options and printing: check every input
before anything runs, then run the plan (embedded, in this process) with a progress line."""

import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codeloop.config.connection_options import ConnectionOptions
from codeloop.swebench.errors import InterpreterMissing, PredictionsError, SwebenchError
from codeloop.swebench.harness import RunPlan, run_local
from codeloop.swebench.instances import Instance, load_instances, select
from codeloop.swebench.predictions import EMPTY, GOLD, Prediction, builtin_predictions, load_predictions
from codeloop.swebench.report import write_json
from codeloop.swebench.repositories import RepoSource, find_source
from codeloop.swebench.run import RunSettings
from codeloop.swebench.specs import load_extra_specs, needs_cpus, registered_specs, spec_for

if TYPE_CHECKING:
    from bus.config import BusConfig
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


def cache_dir() -> Path:
    """codeloop's cache directory: `$CODELOOP_CACHE_DIR`, else the platform's (shared per machine)."""
    configured = os.environ.get("CODELOOP_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("codeloop"))


def prepare(options: Options) -> RunPlan:
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
    sources = _sources(chosen, options.repos)
    out = _out_dir(options)
    run_options = {
        "timeout_s": options.timeout_s,
        "memory_mb": options.memory_mb,
        "left_out": _left_out(options.left_out),
        "specs": registered_specs(),
    }
    settings = settings_for(run_options)
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


def prepare_select(options: Options) -> "SelectPlan":
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
    run_options = {
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
        repos=_sources(chosen, options.repos),
        settings=settings_for(run_options),
        out=_out_dir(options),
        jobs=max(options.jobs, 1),
        extra=extra,
        grade_by_labels=options.grade_by_labels,
        resume=options.resume is not None,
    )


def run_select(plan: "SelectPlan") -> dict[str, Any]:
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


def _sources(chosen: list[Instance], repos: Path | None) -> dict[str, RepoSource]:
    if repos is not None and not repos.is_dir():
        raise SwebenchError(f"--repos {repos} is not a directory")
    sources = {}
    for repo in sorted({i.repo for i in chosen}):
        sources[repo] = find_source(repo, repos_dir=repos, cache_dir=cache_dir() / "swebench")
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


def settings_for(options: dict[str, Any]) -> RunSettings:
    """The run settings of a run's options (`timeout_s`, `memory_mb`, `left_out`): the same on
    the coordinator and on every worker, which get the options with each instance."""
    from sandbox import SandboxLimits
    from sandbox.environments import EnvironmentSettings, EnvironmentStore, build_variables

    timeout_s = float(options["timeout_s"])
    limits = SandboxLimits(
        timeout_s=timeout_s,
        memory_mb=int(options["memory_mb"]),
        max_processes=512,
        cpu_time_s=timeout_s * 4,
        file_size_mb=1024,
        workspace_write_mb=2048,
        tmp_mb=2048,
        output_bytes=16_000_000,
    )
    cache = cache_dir()
    store = EnvironmentStore(
        EnvironmentSettings(cache_dir=cache / "environments", build_env=build_variables(os.environ))
    )
    return RunSettings(
        store=store,
        cache_dir=cache,
        scratch_dir=Path(tempfile.gettempdir()) / f"codeloop-swebench-{os.getpid()}",
        timeout_s=timeout_s,
        limits=limits,
        left_out=dict(options.get("left_out") or {}),
        # Foreign tests run under gVisor; a deployment whose pods are gVisor says `process`.
        policy=os.environ.get("CODELOOP_SANDBOX") or "gvisor",
    )


def run(plan: RunPlan, connection: ConnectionOptions | None = None) -> dict[str, Any]:
    """Run the plan and return the final report (what report.json holds): through the bus when
    one is given or a local `codeloop serve` runs (its workers and ours share the run), else here.
    """
    import json

    import anyio

    from codeloop.swebench.harness import pending
    from codeloop.swebench.progress import Progress
    from codeloop.swebench.report import load_outcomes

    progress = Progress(
        len(pending(plan, load_outcomes(plan.out) if plan.resume else {})) or len(plan.instances)
    )
    bus = _bus_config(connection or {})
    interrupted = False
    try:
        if plan.model is not None:
            _solve(plan, connection or {})
        if bus is None:
            anyio.run(run_local, plan, progress)
        else:
            from codeloop.swebench.coordinator import run_distributed

            anyio.run(
                lambda: run_distributed(
                    plan,
                    bus,
                    settings_for=settings_for,
                    options=plan.options,
                    repos_dir=plan.repos_dir,
                    cache_dir=cache_dir(),
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


def _solve(plan: RunPlan, connection: ConnectionOptions) -> None:
    """`--model`: make the predictions first (OUT/predictions.jsonl), then grade them."""
    import sys

    import anyio

    from codeloop.swebench.solve import solve

    assert plan.model is not None
    made = plan.out / "predictions.jsonl"
    done = {}
    if plan.resume and made.is_file():
        done = load_predictions(made, known_ids={i.instance_id for i in plan.instances})
    sys.stderr.write(f"solving {len(plan.instances)} instances with {plan.model}\n")
    plan.predictions = anyio.run(
        lambda: solve(
            plan.instances,
            plan.sources,
            model=plan.model,  # pyright: ignore[reportArgumentType] - only called when --model was given
            settings=plan.model_settings,
            connection=connection,
            out=plan.out,
            jobs=max(plan.jobs, 1),
            done=done,
        )
    )


def _bus_config(connection: ConnectionOptions) -> "BusConfig | None":
    """The bus to share the run on: `--nats`/`CODELOOP_NATS_URL`, else a running local serve;
    None: run on this machine alone (embedded)."""
    from codeloop.config.environment import bus_config
    from codeloop.config.errors import ConfigError
    from codeloop.config.serve_note import client_bus_config

    if connection.get("nats_url"):
        return bus_config(**connection)  # a bad URL is the user's to fix: ConfigError
    try:
        return client_bus_config(**connection)
    except ConfigError:
        return None
