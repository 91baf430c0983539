"""The evaluation's own test runs: pytest in the sandbox, in the task repository's project
environment — the one the pipeline's verifier tested in (`sandbox.environments`, the same key:
the same files, settings and index date), so a repository whose tests need its dependencies is
judged with them, and its code never runs on the host."""

import sys
from dataclasses import dataclass
from pathlib import Path

from sandbox.backend import open_sandbox
from sandbox.environments import EnvironmentSettings, open_environment
from sandbox.errors import EnvironmentSetupError, SandboxError
from sandbox.limits import SandboxLimits

PYTEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}


@dataclass(frozen=True)
class PytestRun:
    """What one sandboxed pytest run gave."""

    stdout: str
    timed_out: bool
    problem: str | None = None
    """Why the tests could not run (`env.setup: ...`, the sandbox's error); None when they ran."""


async def run_pytest(
    root: Path, args: list[str], *, settings: EnvironmentSettings, policy: str, timeout_s: float
) -> PytestRun:
    """`python -m pytest ARGS` on `root` in the sandbox (backend as `policy` allows), with the
    project environment `settings` find for `root`, else codeloop's interpreter (shown read-only)."""
    limits = SandboxLimits(timeout_s=timeout_s)
    try:
        async with open_environment(root, settings) as lease:
            environment = lease.environment if lease is not None else None
            own = () if environment is not None else _own_interpreter(root)
            async with open_sandbox(
                root, limits=limits, policy=policy, environment=environment, ro_paths=own
            ) as box:
                python = "python" if environment is not None else sys.executable
                result = await box.exec([python, "-m", "pytest", *args], env=PYTEST_ENV)
    except EnvironmentSetupError as exc:
        return PytestRun(stdout="", timed_out=False, problem=f"env.setup: {exc}")
    except SandboxError as exc:
        return PytestRun(stdout="", timed_out=False, problem=f"env.infra: {exc}")
    return PytestRun(stdout=result.stdout, timed_out=result.timed_out)


def _own_interpreter(root: Path) -> tuple[Path, ...]:
    prefix = Path(sys.prefix).resolve()
    return () if prefix.is_relative_to(root.resolve()) else (prefix,)
