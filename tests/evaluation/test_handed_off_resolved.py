"""`codeloop eval` of a task whose patch is right but whose run was handed off: resolved (the task's
own checks judge the patch), and the reports say it was handed off, per task and in the summary."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codeloop.testing import make_repo
from tests.e2e.conftest import model
from tests.support.repos import CALC

pytestmark = pytest.mark.slow


def test_a_resolved_task_the_pipeline_handed_off_is_shown_as_such(tmp_path: Path) -> None:
    make_repo(tmp_path / "calc", CALC)
    task = {
        "id": "fix-add",
        "repo": "calc",
        "kind": "fix",
        "mode": "write",
        "text": "add subtracts; make tests/test_calc.py::test_add pass",
        "checks": {"fail_to_pass": ["tests/test_calc.py::test_add"]},
    }
    (tmp_path / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    # The step budget ends the run after the fix: the coder never says it is done.
    (tmp_path / "codeloop.toml").write_text("[budgets]\nmax_steps = 6\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODELOOP_")}
    env.update({"CODELOOP_HOME": str(tmp_path / "home"), "CODELOOP_SANDBOX": "process"})
    done = subprocess.run(
        [sys.executable, "-m", "codeloop", "eval", "tasks.jsonl", "--out", "out"]
        + ["--model", model("fix_then_wander")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    row = json.loads((tmp_path / "out" / "results.jsonl").read_text())
    assert row["resolved"] and row["status"] == "handed_off" and row["failure_class"] == "budget.steps"
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["resolved"] == 1 and summary["resolved_handed_off"] == 1
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "| fix-add | fix | handed_off | budget.steps | model | yes (handed off) |" in markdown
    assert "(95% bootstrap interval" in markdown and "; 1 of them handed off by the pipeline" in markdown
    assert f"models: default `{model('fix_then_wander')}`" in markdown and "{" not in markdown.split("\n")[2]
    html = (tmp_path / "out" / "report.html").read_text()
    assert "yes (handed off)</td>" in html and "1 of them handed off by the pipeline" in html
    assert "1 of them handed off by the pipeline" in done.stdout
