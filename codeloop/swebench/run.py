"""Running one instance: its environment, its scratch tree at the base commit with its own layer
(the spec's install of that commit, `codeloop.swebench.layer`), the prediction
applied as the official harness applies it, the eval script in the gVisor sandbox with no
network, and the official grading of the log.

Files of `OUT/instances/<id>/` (written to a hidden directory first, renamed into place when the
instance is done, so an interrupted run leaves no half instance): `run_instance.log` (the apply
messages), `test_output.txt` (the eval script's output, which the official `get_logs_eval`
reads), `patch.diff`, `eval.sh`, `report.json` (the official per-instance report, only for
graded instances, as officially) and `outcome.json` (codeloop's record, `Outcome`).

Builds of one environment are serialised per process (`RunSettings.env_lock`): the environment
store's file lock raises instead of waiting when another build holds it (filelock 4's
`acquire(blocking=False)`), so concurrent instances of one environment would fail.
"""

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from codeloop.swebench import grade
from codeloop.swebench.errors import EnvironmentBuildError, SpecError
from codeloop.swebench.instances import Instance
from codeloop.swebench.layer import layer_env, make_layer
from codeloop.swebench.outcome import Outcome
from codeloop.swebench.predictions import Prediction
from codeloop.swebench.recipe import make_recipe
from codeloop.swebench.repositories import RepoSource
from codeloop.swebench.script import eval_script
from codeloop.swebench.specs import spec_for
from codeloop.swebench.trees import instance_tree, project_tree
from codeloop.swebench.unrunnable import reasons
from sandbox import GvisorOptions, SandboxError, SandboxLimits, open_sandbox
from sandbox.environments import EnvironmentStore
from sandbox.errors import EnvironmentSetupError

# The official harness tries these in order (run_evaluation.py's GIT_APPLY_CMDS).
APPLY_COMMANDS = ("git apply --verbose", "git apply --verbose --reject", "patch --batch --fuzz=5 -p1 -i")
APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"
APPLY_PATCH_PASS = ">>>>> Applied Patch"
PATCH_IN_TREE = ".git/codeloop/patch.diff"
SCRIPT_IN_TREE = ".git/codeloop/eval.sh"


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
    _env_locks: dict[str, anyio.Lock] = field(default_factory=dict)

    def env_lock(self, key: str) -> anyio.Lock:
        """The lock of one environment's build in this process."""
        return self._env_locks.setdefault(key, anyio.Lock())


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
    environment_recipe = recipe.to_recipe()
    # One build per environment in this process at a time (the store's own cross-process lock
    # does not wait yet, see the module docstring); the others then find it built.
    async with settings.env_lock(environment_recipe.digest()):
        _, built = await settings.store.ensure(environment_recipe, project)
    async with settings.store.use(environment_recipe, project, progress=None) as lease:
        env = lease.environment
        outcome = outcome.model_copy(
            update={
                "env_s": round(time.monotonic() - env_started, 3),
                "environment": {
                    "key": env.key,
                    "python_version": env.python_version,
                    "built": built,
                    "build_s": env.build_s,
                },
            }
        )
        log.info(f"Environment {env.key} ready (built now: {built})")
        tree, layer = scratch / "tree", scratch / "layer"
        base = await anyio.to_thread.run_sync(instance_tree, source, instance.base_commit, tree, recipe)
        install_started = time.monotonic()
        installed = await make_layer(
            env,
            tree,
            layer,
            install=recipe.install,
            build_env=settings.store.settings.build_env,
            constraints=recipe.constraints,
        )
        log.info(
            f"Install in the instance's layer ({time.monotonic() - install_started:.1f} s):\n{installed[-4000:]}"
        )
        outcome = outcome.model_copy(update={"env_s": round(time.monotonic() - env_started, 3)})
        async with open_sandbox(
            tree,
            limits=settings.limits,
            gvisor=settings.gvisor,
            policy=settings.policy,
            ro_paths=(env.path, env.base_prefix, layer),
        ) as box:
            links = "tox --current-env" in str(spec.get("test_cmd", ""))
            box_env = layer_env(layer, env, through_links=links)
            return await _evaluate(
                instance, prediction, spec, _Box(box, box_env), tree, base, settings, partial, log, outcome
            )


class _Box:
    """The sandbox with the instance's layer active in every command."""

    def __init__(self, box: Any, env: dict[str, str]) -> None:
        self.box, self.env = box, env

    async def exec(self, argv: list[str], *, timeout_s: float) -> Any:
        return await self.box.exec(argv, timeout_s=timeout_s, env=self.env)


async def _evaluate(
    instance: Instance,
    prediction: Prediction,
    spec: dict[str, Any],
    box: Any,
    tree: Path,
    base: str,
    settings: RunSettings,
    partial: Path,
    log: _Log,
    outcome: Outcome,
) -> Outcome:
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
    script = eval_script(instance, spec, base_commit=base, workdir=str(tree))
    (partial / "eval.sh").write_text(script, encoding="utf-8")
    (tree / SCRIPT_IN_TREE).parent.mkdir(parents=True, exist_ok=True)
    (tree / SCRIPT_IN_TREE).write_text(script, encoding="utf-8")
    result = await box.exec(["bash", str(tree / SCRIPT_IN_TREE)], timeout_s=settings.timeout_s)
    log.info(f"Test runtime: {result.duration_s:_.2f} seconds")
    output = result.stdout + result.stderr
    update: dict[str, Any] = {
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


def _write_report(partial: Path, report: dict[str, Any]) -> None:
    import json

    (partial / "report.json").write_text(json.dumps(report, indent=4) + "\n", encoding="utf-8")


async def _apply(prediction: Prediction, box: Any, tree: Path, log: _Log) -> str | None:
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
        argv = command.split() + [PATCH_IN_TREE]  # relative to the tree, the working directory
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
