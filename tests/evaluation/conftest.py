"""`codeloop eval` runs shared by the evaluation tests: one scripted and one diagnose run of a
four-task subset of the starter set (one task per kind), each a real CLI process on its own
embedded bus. They run once per session: a run takes a minute or two."""

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from codeloop.evaluation.taskset import EvalTask, load_tasks
from tests.processes import processes_mentioning

REPO_ROOT = Path(__file__).parents[2]
STARTER = REPO_ROOT / "examples" / "eval"
SCRIPTED = REPO_ROOT / "examples" / "models" / "scripted.py"
FILES = ("results.jsonl", "summary.json", "report.md", "report.html")


@dataclass
class EvalRun:
    done: subprocess.CompletedProcess[str]
    out: Path
    taskset: Path

    @property
    def rows(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (self.out / "results.jsonl").read_text().splitlines()]

    @property
    def summary(self) -> dict[str, Any]:
        return json.loads((self.out / "summary.json").read_text())


def _environ(base: Path, env: dict[str, str] | None) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if k != "CODELOOP_MODEL"}
    environ.update({"CODELOOP_HOME": str(base / "home"), "CODELOOP_SANDBOX": "process", **(env or {})})
    return environ


def _argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "codeloop", "eval", *args]


def run_eval(base: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`codeloop eval ARGS` as a user runs it, with its own CODELOOP_HOME under `base`."""
    return subprocess.run(
        _argv(*args),
        capture_output=True,
        text=True,
        env=_environ(base, env),
        timeout=900,
        stdin=subprocess.DEVNULL,
        cwd=REPO_ROOT,
    )


def subset(dest: Path) -> Path:
    """A task file with the starter set's first task of each kind (paths relative to `dest`)."""
    chosen: dict[str, EvalTask] = {}
    for task in load_tasks(STARTER):
        chosen.setdefault(task.kind, task)
    path = dest / "tasks.jsonl"
    path.write_text("".join(json.dumps(t.line(relative_to=dest)) + "\n" for t in chosen.values()))
    return path


@pytest.fixture(scope="session")
def eval_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, EvalRun]:
    """Both runs of the subset, started together (each mostly waits on its tests and the bus):
    `scripted` with `--model function:examples/models/scripted.py:fix_priced` (`fix`, its usage
    priced as gpt-4o's), and `diagnose` with no model, asking for a resolved rate it cannot reach."""
    extra = {
        "scripted": ["--model", f"function:{SCRIPTED}:fix_priced"],
        "diagnose": ["--min-resolved", "0.9"],
    }
    started = {}
    for name, args in extra.items():
        base = tmp_path_factory.mktemp(f"eval-{name}")
        taskset = subset(base)
        argv = _argv(str(taskset), "--out", str(base / "out"), "--jobs", "2", *args)
        process = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_environ(base, None),
            stdin=subprocess.DEVNULL,
            cwd=REPO_ROOT,
        )
        started[name] = (process, base, taskset)
    runs = {}
    try:
        for name, (process, base, taskset) in started.items():
            stdout, stderr = process.communicate(timeout=900)
            done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
            runs[name] = EvalRun(done, base / "out", taskset)
    finally:
        for process, _, _ in started.values():
            if process.poll() is None:
                process.kill()
                process.wait()
    for _, base, _ in started.values():
        assert processes_mentioning(base) == []
    return runs


@pytest.fixture(scope="session")
def scripted_run(eval_runs: dict[str, EvalRun]) -> EvalRun:
    return eval_runs["scripted"]


@pytest.fixture(scope="session")
def diagnose_run(eval_runs: dict[str, EvalRun]) -> EvalRun:
    return eval_runs["diagnose"]
