"""Running one instance: its shared environment, its scratch tree at the base commit, its layer
over that environment (the spec's install of that commit, `codeloop.swebench.layer`), the prediction
applied as the official harness applies it, the eval script in the gVisor sandbox with no
network, and the official grading of the log.

Files of `OUT/instances/<id>/` (written to a hidden directory first, renamed into place when the
instance is done, so an interrupted run leaves no half instance): `run_instance.log` (the apply
messages), `test_output.txt` (the eval script's output, which the official `get_logs_eval`
reads), `patch.diff`, `eval.sh`, `report.json` (the official per-instance report, only for
graded instances, as officially) and `outcome.json` (codeloop's record, `Outcome`).

Both environments come from `sandbox.environments`' store (built once per key, the build lock
making concurrent instances of one environment wait for it, across processes too).
"""

import os
import shutil
import socket
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Required, TypedDict

import anyio
from pydantic import JsonValue

from codeloop.swebench import grade
from codeloop.swebench.errors import EnvironmentBuildError, SpecError
from codeloop.swebench.instances import Instance
from codeloop.swebench.layer import eval_variables, layer_recipe
from codeloop.swebench.official import Spec
from codeloop.swebench.outcome import Outcome
from codeloop.swebench.predictions import Prediction
from codeloop.swebench.recipe import make_recipe
from codeloop.swebench.repositories import RepoSource
from codeloop.swebench.script import eval_script
from codeloop.swebench.specs import spec_for
from codeloop.swebench.trees import instance_tree, project_tree
from codeloop.swebench.unrunnable import reasons
from sandbox import ExecResult, GvisorOptions, Sandbox, SandboxError, SandboxLimits, open_sandbox
from sandbox.environments import EnvironmentSettings, EnvironmentStore
from sandbox.errors import EnvironmentSetupError

# The official harness tries these in order (run_evaluation.py's GIT_APPLY_CMDS).
APPLY_COMMANDS = ("git apply --verbose", "git apply --verbose --reject", "patch --batch --fuzz=5 -p1 -i")
APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"
APPLY_PATCH_PASS = ">>>>> Applied Patch"
PATCH_IN_TREE = ".git/codeloop/patch.diff"
SCRIPT_IN_TREE = ".git/codeloop/eval.sh"


class RunOptions(TypedDict, total=False):
    """The options every instance of a run travels with on the bus (`settings_for` reads them)."""

    timeout_s: Required[float]
    memory_mb: Required[int]
    left_out: dict[str, list[str]]
    """Instance id -> the listed tests left out of grading (`--left-out`)."""
    specs: dict[str, JsonValue]
    """The `--specs` the coordinator registered, for a worker to register too."""


@dataclass(frozen=True)
class RunSettings:
    """What every instance of a run shares."""

    store: EnvironmentStore
    cache_dir: Path
    scratch_dir: Path
    timeout_s: float
    limits: SandboxLimits
    gvisor: GvisorOptions | None = None
    policy: str = "gvisor"
    """`gvisor` unless the deployment says `process` (CODELOOP_SANDBOX): inside a gVisor pod the
    pod is the sandbox and runsc cannot start again."""
    left_out: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Machine:
    """What a run takes from the machine it runs on, read from the environment once by the
    command line (`codeloop.cli.swebench.this_machine`) and given to the run and its workers."""

    cache_dir: Path
    """codeloop's cache directory, shared per machine (environments, repositories)."""
    sandbox_policy: str = "gvisor"
    """Foreign tests run under gVisor; a deployment whose pods are gVisor says `process`
    (`CODELOOP_SANDBOX`): inside a gVisor pod the pod is the sandbox and runsc cannot start again."""
    build_env: Mapping[str, str] = field(default_factory=dict[str, str])
    """The variables an environment build sees (`sandbox.environments.build_variables`)."""


def settings_for(options: RunOptions, machine: Machine) -> RunSettings:
    """The run settings of a run's options (`timeout_s`, `memory_mb`, `left_out`) on `machine`:
    the same on the coordinator and on every worker, which get the options with each instance."""
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
    store = EnvironmentStore(
        EnvironmentSettings(cache_dir=machine.cache_dir / "environments", build_env=dict(machine.build_env))
    )
    return RunSettings(
        store=store,
        cache_dir=machine.cache_dir,
        scratch_dir=Path(tempfile.gettempdir()) / f"codeloop-swebench-{os.getpid()}",
        timeout_s=timeout_s,
        limits=limits,
        left_out=dict(options.get("left_out") or {}),
        policy=machine.sandbox_policy,
    )


class _Log:
    """run_instance.log: timestamped lines, as the official harness's logger writes them."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, text: str) -> None:
        self.lines.append(f"{time.strftime('%Y-%m-%d %H:%M:%S')} - INFO - {text}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


async def run_instance(
    instance: Instance, prediction: Prediction, *, source: RepoSource, settings: RunSettings, out: Path
) -> Outcome:
    """Run and grade one instance, writing `out/instances/<id>/`; the outcome is also returned.
    An environment that does not build, a timeout or a sandbox failure is an error outcome, never
    an exception (cancellation excepted)."""
    started = time.monotonic()
    partial = out / "instances" / f".{instance.instance_id}.partial"
    await anyio.to_thread.run_sync(lambda: shutil.rmtree(partial, ignore_errors=True))
    partial.mkdir(parents=True)
    (partial / "patch.diff").write_text(prediction.model_patch or "", encoding="utf-8")
    log = _Log()
    outcome = Outcome(
        instance_id=instance.instance_id,
        repo=instance.repo,
        version=instance.version,
        status="error",
        model_name_or_path=prediction.model_name_or_path,
        worker=f"{socket.gethostname()}:{os.getpid()}",
    )
    scratch = settings.scratch_dir / instance.instance_id
    try:
        outcome = await _run(instance, prediction, source, settings, partial, scratch, log, outcome)
    except (SpecError, EnvironmentBuildError, EnvironmentSetupError) as exc:
        outcome = _error(outcome, "env.setup", exc, log)
    except SandboxError as exc:
        outcome = _error(outcome, "env.infra", exc, log)
    except Exception as exc:  # one broken instance must not end the run: it is an error instance
        outcome = _error(outcome, "env.infra", RuntimeError(f"{type(exc).__name__}: {exc}"), log)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(lambda: shutil.rmtree(scratch, ignore_errors=True))
    outcome = outcome.model_copy(update={"wall_s": round(time.monotonic() - started, 3)})
    (partial / "run_instance.log").write_text(log.text(), encoding="utf-8")
    (partial / "outcome.json").write_text(outcome.model_dump_json(indent=2) + "\n", encoding="utf-8")
    final = out / "instances" / instance.instance_id
    await anyio.to_thread.run_sync(lambda: shutil.rmtree(final, ignore_errors=True))
    partial.rename(final)
    return outcome


def _error(outcome: Outcome, failure_class: str, exc: Exception, log: _Log) -> Outcome:
    tail = getattr(exc, "log_tail", "") or ""
    message = f"{exc}" + (f"\n{tail}" if tail and tail not in str(exc) else "")
    log.info(f"Error ({failure_class}): {message}")
    return outcome.model_copy(update={"status": "error", "failure_class": failure_class, "message": message})


async def _run(
    instance: Instance,
    prediction: Prediction,
    source: RepoSource,
    settings: RunSettings,
    partial: Path,
    scratch: Path,
    log: _Log,
    outcome: Outcome,
) -> Outcome:
    spec = spec_for(instance)
    recipe = make_recipe(instance, spec, source)
    outcome = outcome.model_copy(update={"skipped_steps": recipe.skipped})
    project = await anyio.to_thread.run_sync(project_tree, recipe, source, settings.cache_dir)
    env_started = time.monotonic()
    log.info(f"Environment {recipe.label} (Python {recipe.python}): getting it ready")
    shared_recipe = recipe.to_recipe()
    async with settings.store.use(shared_recipe, project, progress=None) as shared:
        log.info(f"Environment {shared.environment.key} ready (built now: {shared.info.built})")
        tree = scratch / "tree"
        base = await anyio.to_thread.run_sync(instance_tree, source, instance.base_commit, tree, recipe)
        install = layer_recipe(recipe, shared.environment, tree)
        async with settings.store.use(install, tree, progress=None) as lease:
            env = lease.environment
            log.info(
                f"Instance layer {env.key} over {shared.environment.key} ready (built now: {lease.info.built}, "
                f"{lease.info.lookup_s:.1f} s): {recipe.install or 'no install'}"
            )
            outcome = outcome.model_copy(
                update={
                    "env_s": round(time.monotonic() - env_started, 3),
                    "environment": {
                        "key": shared.environment.key,
                        "python_version": env.python_version,
                        "built": shared.info.built,
                        "build_s": shared.environment.build_s,
                        "layer_key": env.key,
                        "layer_built": lease.info.built,
                        "layer_build_s": env.build_s,
                    },
                }
            )
            async with open_sandbox(
                tree, limits=settings.limits, gvisor=settings.gvisor, policy=settings.policy, environment=env
            ) as box:
                links = "tox --current-env" in str(spec.get("test_cmd", ""))
                # gVisor shows the tree at the layer's project path, where the editable install
                # points: the tests run there, so every module has one path (pylint's plugin loader
                # matches files against sys.path). The process backend has no such mount: the tree.
                workdir = env.project_path if box.backend == "gvisor" and env.project_path else tree
                run = _Box(box, eval_variables(env, through_links=links), tree=tree, workdir=workdir)
                return await _evaluate(instance, prediction, spec, run, base, settings, partial, log, outcome)


class _Box:
    """The sandbox with the eval script's extra variables in every command, and where the
    instance's tree is: on the host (`tree`) and where its commands see it (`workdir`)."""

    def __init__(self, box: Sandbox, env: dict[str, str], *, tree: Path, workdir: Path) -> None:
        self.box, self.env, self.tree, self.workdir = box, env, tree, workdir

    async def exec(self, argv: list[str], *, timeout_s: float) -> ExecResult:
        return await self.box.exec(argv, timeout_s=timeout_s, env=self.env or None)


async def _evaluate(
    instance: Instance,
    prediction: Prediction,
    spec: Spec,
    box: _Box,
    base: str,
    settings: RunSettings,
    partial: Path,
    log: _Log,
    outcome: Outcome,
) -> Outcome:
    tree, workdir = box.tree, box.workdir
    pred = {
        "instance_id": instance.instance_id,
        "model_name_or_path": prediction.model_name_or_path,
        "model_patch": prediction.model_patch,
    }
    left_out = frozenset(settings.left_out.get(instance.instance_id, []))
    applied = await _apply(prediction, box, tree, log)
    (partial / "run_instance.log").write_text(log.text(), encoding="utf-8")
    if applied is None:  # graded from the apply failure in the log, as get_eval_report does
        report = grade.grade(instance, pred, partial / "run_instance.log", left_out=left_out)
        _write_report(partial, report)
        return outcome.model_copy(
            update={"status": "unresolved", "patch_applied": False, "left_out": sorted(left_out)}
        )
    script = eval_script(instance, spec, base_commit=base, workdir=str(workdir))
    (partial / "eval.sh").write_text(script, encoding="utf-8")
    (tree / SCRIPT_IN_TREE).parent.mkdir(parents=True, exist_ok=True)
    (tree / SCRIPT_IN_TREE).write_text(script, encoding="utf-8")
    result = await box.exec(["bash", str(workdir / SCRIPT_IN_TREE)], timeout_s=settings.timeout_s)
    log.info(f"Test runtime: {result.duration_s:_.2f} seconds")
    output = result.stdout + result.stderr
    update: dict[str, JsonValue] = {
        "patch_applied": True,
        "apply_command": applied,
        "test_s": round(result.duration_s, 3),
    }
    if result.timed_out:
        output += f"\n\nTimeout error: {settings.timeout_s:g} seconds exceeded."
        (partial / "test_output.txt").write_text(output, encoding="utf-8")
        message = f"Test timed out after {settings.timeout_s:g} seconds."
        log.info(message)
        return outcome.model_copy(
            update={**update, "status": "error", "failure_class": "test.timeout", "message": message}
        )
    log_path = partial / "test_output.txt"
    log_path.write_text(output, encoding="utf-8")
    report = grade.grade(instance, pred, log_path, left_out=left_out)
    _write_report(partial, report)
    statuses, _ = grade.status_map(instance, log_path)
    resolved = report[instance.instance_id]["resolved"]
    failing = grade.not_passing(instance, statuses)
    log.info(f"Result for {instance.instance_id}: resolved: {resolved}")
    return outcome.model_copy(
        update={
            **update,
            "status": "resolved" if resolved else "unresolved",
            "left_out": sorted(left_out),
            "not_passing": failing,
            "why_not_passing": reasons(instance, failing, output),
            "skipped": grade.skipped(instance, statuses),
        }
    )


def _write_report(partial: Path, report: dict[str, JsonValue]) -> None:
    import json

    (partial / "report.json").write_text(json.dumps(report, indent=4) + "\n", encoding="utf-8")


async def _apply(prediction: Prediction, box: _Box, tree: Path, log: _Log) -> str | None:
    """Apply the prediction in the sandbox with the official commands, in order; the one that
    took it, or None when none did. An empty prediction (the `empty` run) applies as nothing."""
    if prediction.is_empty:
        log.info(f"{APPLY_PATCH_PASS}:\ncodeloop: empty prediction, no change to apply")
        return "none"
    patch = tree / PATCH_IN_TREE
    patch.parent.mkdir(parents=True, exist_ok=True)
    patch.write_text(prediction.model_patch or "", encoding="utf-8")
    log.info(
        f"Intermediate patch for {prediction.instance_id} written to patch.diff, now applying to container..."
    )
    output = ""
    for command in APPLY_COMMANDS:
        argv: list[str] = [*command.split(), PATCH_IN_TREE]  # relative to the tree, the working directory
        if argv[0] == "git":  # the tree's owner is not the sandbox's user
            argv[1:1] = ["-c", "safe.directory=*"]
        result = await box.exec(argv, timeout_s=120)
        output = result.stdout + result.stderr
        if result.exit_code == 0:
            log.info(f"{APPLY_PATCH_PASS}:\n{output}")
            return command
        log.info(f"Failed to apply patch to container: {command}")
    log.info(f"{APPLY_PATCH_FAIL}:\n{output}")
    return None
