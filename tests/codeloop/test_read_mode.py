"""Read mode, the default, asked to change something: the answer says nothing was changed and how to
get a patch; without a model a read-mode question is not headed as a failed verification."""

import subprocess
from pathlib import Path

import pytest

from agents.orchestrator.report import READ_MODE_HINT
from codeloop.testing import make_repo
from tests.e2e.conftest import model
from tests.support.cli import run_codeloop
from tests.support.repos import CALC

REPO_ROOT = Path(__file__).parents[2]

pytestmark = pytest.mark.slow


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # No CODELOOP_ variable of the developer's: a configured mode or model would change the answer.
    return run_codeloop(tmp_path / "home", *args, drop=lambda name: name.startswith("CODELOOP_"))


def test_a_change_asked_in_read_mode_is_answered_with_how_to_get_a_patch(tmp_path: Path) -> None:
    """Our choice: read mode never changes anything, and says so when the words ask for a change."""
    repo = make_repo(tmp_path / "repo", CALC)
    done = _run(tmp_path, "Please fix add: it subtracts", "--repo", str(repo), "--model", model("explain"))
    assert done.returncode == 0, done.stderr
    assert "note: the task asks for a change, but read mode (the default) only answers" in done.stderr
    assert done.stdout.splitlines()[0].endswith(": done")
    assert READ_MODE_HINT in done.stdout and "--mode write" in READ_MODE_HINT
    assert "diff --git" not in done.stdout


def test_a_read_mode_question_without_a_model_is_not_headed_as_a_failed_verification(tmp_path: Path) -> None:
    """Diagnose mode checks the tree as it is: its failing tests are no verdict on an answer."""
    repo = make_repo(tmp_path / "repo", CALC)
    # A virtualenv the project forgot to git-ignore: left out of the snapshot, and `run` says so.
    (repo / ".venv" / "lib").mkdir(parents=True)
    (repo / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (repo / ".venv" / "lib" / "site.py").write_text("x = 1\n")
    done = _run(tmp_path, "why does add subtract?", "--repo", str(repo))
    assert done.returncode == 0, done.stderr
    assert "note: .venv/ is not in the snapshot: a virtual environment git does not ignore" in done.stderr
    assert done.stdout.splitlines()[0].endswith(": diagnosed")
    assert "verification: failed" not in done.stdout
    assert "checks of the unchanged tree (diagnose mode, no model):" in done.stdout
    assert "Failing now: tests/test_calc.py::test_add" in done.stdout
    assert "note: the task asks for a change" not in done.stderr and READ_MODE_HINT not in done.stdout
