"""`codeloop` as a user runs it: a subprocess of this interpreter, no terminal, its own home."""

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def codeloop(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`codeloop ARGS` as a subprocess of this interpreter with exactly `env`, stdin closed."""
    return subprocess.run(
        [sys.executable, "-m", "codeloop", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        cwd=REPO_ROOT,
    )


def run_codeloop(
    home: Path,
    *args: str,
    drop: Callable[[str], bool] = lambda name: name == "CODELOOP_MODEL",
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """`codeloop run ARGS` with `home` as CODELOOP_HOME, stdin closed, the environment's variables
    for which `drop` is true left out (default: the model, so no developer's choice leaks in);
    killed after `timeout` seconds (a task given a longer `--timeout` needs a longer one)."""
    env = {name: value for name, value in os.environ.items() if not drop(name)}
    env["CODELOOP_HOME"] = str(home)
    return codeloop(env, "run", *args, timeout=timeout)
