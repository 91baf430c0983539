"""Verifying SWE-bench candidates as a coder's patches: the problem statement as the task, no test
patch, no plan target, on the instance's tree in an environment built from its spec.

One tree per instance serves every candidate (the verifier puts it back at its starting tree after
each), and what the starting tree costs is paid once: the environment (built once, cached by its
key), the coverage run of the suite (kept per tree in the cache) and the baseline of test outcomes
(handed from one verification to the next). The exec server runs everything in the sandbox with
no network, as the harness does.
"""

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

from agents.messages.verification import Baseline, VerificationReport
from codeloop.swebench.instances import Instance
from codeloop.swebench.recipe import CONSTRAINTS_PATH, INPUTS_DIR, EnvRecipe
from codeloop.swebench.repositories import RepoSource
from codeloop.swebench.trees import instance_tree
from sandbox.environments.settings import EnvironmentSettings
from sandbox.limits import SandboxLimits
from tool_servers.protocol.scopes import Scope
from tool_servers.protocol.spec import ServerOptions
from tool_servers.serve import server_builder


class SpecTools:
    """The verifier's tool provider for one instance: an exec server per root, in the environment
    the instance's spec describes, on the run's sandbox backend and limits."""

    def __init__(self, environment: EnvironmentSettings, backend: str, limits: SandboxLimits) -> None:
        self.environment = environment
        self.backend = backend
        self.limits = limits

    def servers(self, root: Path, scopes: frozenset[str], *, index_dir: Path | None = None) -> dict[str, Any]:
        options = ServerOptions(scopes=frozenset(Scope(s) for s in scopes))
        build = server_builder("exec")
        return {
            "exec": build(
                root, options, backend=self.backend, environment=self.environment, limits=self.limits
            )
        }


def spec_environment(
    instance: Instance, recipe: EnvRecipe, cache_dir: Path, *, build_env: Mapping[str, str]
) -> EnvironmentSettings:
    """The spec's environment as a configured one: its Python, its commands with the image-era
    pins, then its install of the project (into the tree being verified); `build_env` the
    variables its builds see (the run's `Machine`)."""
    pins = f"export PIP_CONSTRAINT={CONSTRAINTS_PATH}; "
    install = [pins + c for c in recipe.commands]
    if recipe.install:
        install.append(pins + recipe.install)
    return EnvironmentSettings(
        cache_dir=cache_dir / "environments",
        python=recipe.python,
        install=tuple(install),
        configured_source=f"SWE-bench spec of {instance.repo} {instance.version}",
        build_env=dict(build_env),
    )


@dataclass(frozen=True)
class Judged:
    """One candidate's verification."""

    report: VerificationReport
    seconds: float


@dataclass(frozen=True)
class InstanceJudge:
    """What verifying one instance's candidates needs."""

    instance: Instance
    recipe: EnvRecipe
    source: RepoSource
    cache_dir: Path
    limits: SandboxLimits
    backend: str
    timeout_s: float
    build_env: Mapping[str, str]
    """The variables environment builds see (the run's `Machine`)."""


async def judge_candidates(judge: InstanceJudge, patches: dict[str, str], scratch: Path) -> dict[str, Judged]:
    """Each patch (by candidate name) verified on the instance's tree, made once at `scratch`.

    Raises:
        EnvironmentBuildError: the spec's `pre_install` edits failed on the tree.
    """
    from agents.roles.verifier.verify import PatchTask, verify_patch

    instance, recipe = judge.instance, judge.recipe
    tree = scratch / "tree"
    await anyio.to_thread.run_sync(lambda: instance_tree(judge.source, instance.base_commit, tree, recipe))
    inputs = tree / INPUTS_DIR  # the recipe's input files, untracked, where its commands read them
    inputs.mkdir(exist_ok=True)
    for name, text in recipe.files.items():
        (inputs / name).write_text(text, encoding="utf-8")
    tools = SpecTools(
        spec_environment(instance, recipe, judge.cache_dir, build_env=judge.build_env),
        judge.backend,
        judge.limits,
    )
    baseline: Baseline | None = None
    judged: dict[str, Judged] = {}
    every_changed = _changed_sources(patches)
    for name, patch in patches.items():
        started = time.monotonic()
        report, baseline = await verify_patch(
            workspace=tree,
            patch=patch,
            task=PatchTask(mode="execute", text=instance.problem_statement, candidates_change=every_changed),
            tools=tools,
            deadline=datetime.now(UTC) + timedelta(seconds=judge.timeout_s),
            baseline=baseline,
            cache_dir=judge.cache_dir / "verifier-coverage",
        )
        judged[name] = Judged(report=report, seconds=round(time.monotonic() - started, 1))
    return judged


def _changed_sources(patches: dict[str, str]) -> list[str]:
    """Every candidate's changed source files: the starting tree's one coverage run measures them
    all, so a later candidate that changes other files needs no second run of the suite."""
    from agents.roles.verifier.patchset import MalformedPatch, parse_patch
    from agents.roles.verifier.scope import changed_sources

    found: list[str] = []
    for patch in patches.values():
        try:
            found += changed_sources(parse_patch(patch))
        except MalformedPatch:
            continue  # its own verification says so
    return list(dict.fromkeys(found))
