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

from codeloop.evaluation.taskset import load_tasks
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


def run_eval(base: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`codeloop eval ARGS` as a user runs it, with its own CODELOOP_HOME under `base`."""
    environ = {k: v for k, v in os.environ.items() if k != "CODELOOP_MODEL"}
    environ.update({"CODELOOP_HOME": str(base / "home"), "CODELOOP_SANDBOX": "process", **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "codeloop", "eval", *args], capture_output=True, text=True, env=environ,
        timeout=900, stdin=subprocess.DEVNULL, cwd=REPO_ROOT,
    )  # fmt: skip


def subset(dest: Path) -> Path:
    """A task file with the starter set's first task of each kind (paths relative to `dest`)."""
    chosen: dict[str, Any] = {}
    for task in load_tasks(STARTER):
        chosen.setdefault(task.kind, task)
    path = dest / "tasks.jsonl"
    path.write_text("".join(json.dumps(t.line(relative_to=dest)) + "\n" for t in chosen.values()))
    return path


def _session_run(factory: pytest.TempPathFactory, name: str, *args: str) -> EvalRun:
    base = factory.mktemp(name)
    taskset = subset(base)
    done = run_eval(base, str(taskset), "--out", str(base / "out"), "--jobs", "2", *args)
    assert processes_mentioning(base) == []
    return EvalRun(done, base / "out", taskset)


@pytest.fixture(scope="session")
def scripted_run(tmp_path_factory: pytest.TempPathFactory) -> EvalRun:
    """The subset with `--model function:examples/models/scripted.py:fix`."""
    return _session_run(tmp_path_factory, "eval-scripted", "--model", f"function:{SCRIPTED}:fix")


@pytest.fixture(scope="session")
def diagnose_run(tmp_path_factory: pytest.TempPathFactory) -> EvalRun:
    """The subset with no model (diagnose mode), asking for a resolved rate it cannot reach."""
    return _session_run(tmp_path_factory, "eval-diagnose", "--min-resolved", "0.9")
