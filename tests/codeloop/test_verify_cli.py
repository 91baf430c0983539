"""`codeloop verify` as a user (or another agent) runs it: a correct, a wrong and an untested patch
of a repository made in the test give `passed`, `failed` and `unverified` with exit codes 0, 1
and 3; bad input is exit 2 with nothing run; the checkout is never written."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.codeloop.judging import MEAN_TEST, TASK, TOP_TEST, ops_repo, patches
from tests.support.cli import REPO_ROOT

pytestmark = pytest.mark.slow


def _verify(home: Path, *args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`codeloop verify ARGS` with its own home, on the process sandbox (the verdict is what is
    tested here, not isolation)."""
    env = {**os.environ, "CODELOOP_HOME": str(home), "CODELOOP_SANDBOX": "process"}
    return subprocess.run(
        [sys.executable, "-m", "codeloop", "verify", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        input=stdin,
        timeout=600,
        cwd=REPO_ROOT,
        check=False,
    )


def _status(repo: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain", "--ignored"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_correct_wrong_and_untested_patches_are_passed_failed_and_unverified(tmp_path: Path) -> None:
    """Our contract (CONTRACTS "Judging and choosing patches"): the verdict, its evidence, and the
    exit code 0 / 1 / 3; the report as JSON is the `verification` object and more."""
    repo = ops_repo(tmp_path / "ops")
    made = patches(repo)
    files = {}
    for name, text in made.items():
        files[name] = tmp_path / f"{name}.diff"
        files[name].write_text(text)
    before = _status(repo)
    (tmp_path / "task.txt").write_text(TASK)

    done = _verify(
        tmp_path / "home", "--repo", repo, "--task", f"@{tmp_path / 'task.txt'}", "--json", files["correct"]
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["verdict"] == "passed" and report["evidence"] == [MEAN_TEST]
    assert {"verdict", "checks", "failures", "evidence", "summary"} <= set(report)

    # The patch on stdin, the task as words, the human report.
    done = _verify(tmp_path / "home", "--repo", repo, "--task", TASK, "-", stdin=made["wrong"])
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("failed")
    assert TOP_TEST in done.stdout and "test.regression" in done.stdout

    done = _verify(tmp_path / "home", "--repo", repo, "--task", TASK, "--json", files["untested"])
    assert done.returncode == 3, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["verdict"] == "unverified" and report["evidence"] == []
    assert report["evidence_kind"] == "none"

    assert _status(repo) == before  # the checkout was only read
    assert (repo / "ops.py").read_text() == (tmp_path / "ops" / "ops.py").read_text()


def test_bad_input_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    """Our CLI rules: what was wrong and what to do, exit 2, nothing run."""
    repo = ops_repo(tmp_path / "ops")
    empty = tmp_path / "empty.diff"
    empty.write_text("\n")
    home = tmp_path / "home"
    cases = [
        (["--repo", tmp_path / "nowhere", "--task", TASK, empty], "not a directory"),
        (["--repo", repo, "--task", TASK, empty], "is empty"),
        (["--repo", repo, "--task", TASK, tmp_path / "missing.diff"], "missing.diff"),
        (["--repo", repo, "--task", "  ", empty], "blank"),
        (["--repo", repo, "--task", TASK, "--mode", "read", empty], "write or execute"),
        (["--repo", repo, "--task", "-", "-"], "stdin"),
    ]
    for args, words in cases:
        done = _verify(home, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert words in done.stderr, (args, done.stderr)
    assert not (home / "work").exists() or not any((home / "work").iterdir())
