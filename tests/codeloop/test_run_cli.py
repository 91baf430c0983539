"""`codeloop run` as a user runs it: the contract's JSON object, exit codes, --apply, usage errors."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import run_codeloop

REPO_ROOT = Path(__file__).parents[2]
EXAMPLE = REPO_ROOT / "examples" / "bugfix"
REPORT = REPO_ROOT / "examples" / "bugfix-report.md"
SCRIPTED = REPO_ROOT / "examples" / "models" / "scripted.py"
RESULT_KEYS = {
    "task_id",
    "status",
    "mode",
    "answer",
    "patch",
    "files_changed",
    "plan",
    "context",
    "verification",
    "failure_class",
    "steps",
    "revisions",
    "usage",
    "report",
    "trace_id",
}

pytestmark = pytest.mark.slow


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_codeloop(tmp_path / "home", *args)


def _project(tmp_path: Path) -> Path:
    repo = tmp_path / "project"
    shutil.copytree(EXAMPLE, repo)
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "start"]):
        subprocess.run([*git, *command], cwd=repo, check=True)
    return repo


def test_without_a_model_the_task_is_diagnosed_and_the_json_is_the_contracts(tmp_path: Path) -> None:
    repo = _project(tmp_path)
    done = _run(tmp_path, f"@{REPORT}", "--repo", str(repo), "--mode", "execute", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert RESULT_KEYS <= set(result) and result["status"] == "diagnosed" and result["patch"] is None
    failing = {f["test_id"] for f in result["verification"]["failures"]}
    assert "tests/test_discounts.py::test_discount_applies_at_the_tier_minimum" in failing
    assert "invoicing/discounts.py" in result["context"]["files"][:5]
    assert (
        subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout
        == ""
    )


def test_apply_writes_the_verified_patch_into_the_unchanged_checkout(tmp_path: Path) -> None:
    repo = _project(tmp_path)
    done = _run(
        tmp_path,
        f"@{REPORT}",
        "--repo",
        str(repo),
        "--mode",
        "execute",
        "--apply",
        "--model",
        f"function:{SCRIPTED}:fix",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "done" in done.stdout.splitlines()[0] and "applied the patch" in done.stderr
    assert ">= tier.min_quantity" in (repo / "invoicing" / "discounts.py").read_text()
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    assert tests.returncode == 0, tests.stdout


def test_a_task_ended_by_a_limit_exits_3_and_says_which(tmp_path: Path) -> None:
    repo = _project(tmp_path)
    done = _run(
        tmp_path,
        "fix the discount",
        "--repo",
        str(repo),
        "--mode",
        "write",
        "--json",
        "--model",
        f"function:{SCRIPTED}:loop",
        "--max-steps",
        "3",
    )
    assert done.returncode == 3, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "handed_off" and result["failure_class"] in ("budget.steps", "agent.loop")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["fix", "--repo", "/no/such/dir"], "is not a directory"),
        (["fix", "--repo", ".", "--mode", "destroy"], "mode"),
        (["fix", "--repo", ".", "--model", "function:/no/such.py:f"], "does not exist"),
        (["   ", "--repo", "."], "empty"),
        (["@/no/such/task.md", "--repo", "."], "cannot read the task"),
        (["fix add", "--repo", ".", "--apply"], "--apply needs a patch, and read mode only answers"),
    ],
)
def test_bad_input_is_a_usage_error_naming_what_is_wrong(
    tmp_path: Path, args: list[str], fragment: str
) -> None:
    done = _run(tmp_path, *args)
    assert done.returncode == 2 and fragment in done.stderr and "Traceback" not in done.stderr
