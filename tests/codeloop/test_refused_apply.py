"""`codeloop run --apply` on a checkout that changed while the task ran: nothing is written to the
checkout, and the patch is not lost (printed, in `--json`, and saved in a named file)."""

import json
import re
import subprocess
from pathlib import Path

import pytest

from codeloop.testing import make_repo
from tests.e2e.conftest import model
from tests.support.cli import run_codeloop
from tests.support.repos import CALC

pytestmark = pytest.mark.slow


def _run_applying(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    repo = make_repo(tmp_path / "repo", CALC)
    task = f"fix add in calc\nmeanwhile: {repo / 'README.md'}"
    model_name = model("fix_while_the_checkout_changes")
    args = [task, "--repo", str(repo), "--mode", "write", "--apply", "--model", model_name, *extra]
    return run_codeloop(tmp_path / "home", *args), repo


def _saved_file(stderr: str) -> Path:
    match = re.search(r"The patch is saved in (\S+):", stderr)
    assert match, stderr
    return Path(match.group(1))


def test_a_refused_apply_prints_the_summary_with_the_patch_and_saves_it(tmp_path: Path) -> None:
    """Our choice (mature-CLI behaviour): a refusal loses nothing and exits 1."""
    done, repo = _run_applying(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[0].endswith(": done")
    assert "-    return a - b" in done.stdout and "+    return a + b" in done.stdout
    error = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(error) == 1 and "changed since the task started" in error[0], done.stderr
    saved = _saved_file(error[0])
    assert saved.parent == (tmp_path / "home" / "patches").resolve()
    assert "+    return a + b" in saved.read_text()
    assert (repo / "calc" / "__init__.py").read_text() == CALC["calc/__init__.py"]  # not written
    applied = subprocess.run(["git", "apply", "--check", str(saved)], cwd=repo, capture_output=True)
    assert applied.returncode == 0, applied.stderr


def test_a_refused_apply_keeps_the_patch_in_the_json_result(tmp_path: Path) -> None:
    """The contract's result object, plus `apply`: what became of the patch."""
    done, _ = _run_applying(tmp_path, "--json")
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "done" and "+    return a + b" in result["patch"]
    outcome = result["apply"]
    assert outcome["applied"] is False and outcome["refused"] is True
    assert Path(outcome["patch_file"]).read_text() == result["patch"]
    assert outcome["patch_file"] in done.stderr
