"""`index_date = "git"` in a scratch workspace: its own history is one commit made when it was, so
the dates come from the source checkout (recorded in its git directory), never from that commit."""

import json
import os
import subprocess
from pathlib import Path

from layout import SOURCE_DATES
from sandbox.environments import EnvironmentSettings, resolve_recipe
from sandbox.environments.detect import input_dates, inputs_commit_date
from tests.sandbox.environments.conftest import write

OLD = "2023-06-01T12:00:00+00:00"
SCRATCH_DATE = "2000-01-01T00:00:00+00:00"


def _commit(repo: Path, date: str, *paths: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    env |= {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e",
    }
    subprocess.run(["git", "add", *paths], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "c"], cwd=repo, check=True, env=env)


def _checkout(root: Path, date: str) -> Path:
    write(root, {"requirements.txt": "iniconfig\n", "test_a.py": "def test_a(): pass\n"})
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    _commit(root, date, "-A")
    return root


def test_a_checkout_records_when_each_dependency_file_last_changed_unless_it_is_edited(
    tmp_path: Path,
) -> None:
    repo = _checkout(tmp_path / "repo", OLD)
    assert input_dates(repo, ("requirements.txt",)) == {"requirements.txt": OLD}
    (repo / "requirements.txt").write_text("iniconfig\nattrs\n")
    assert input_dates(repo, ("requirements.txt",)) == {}


def test_a_scratch_workspace_resolves_as_of_the_recorded_date_never_its_own_commits(tmp_path: Path) -> None:
    """Our choice (docs/environments.md): the same date, and so the same key, as the checkout."""
    settings = EnvironmentSettings(cache_dir=tmp_path / "cache")
    checkout = _checkout(tmp_path / "checkout", OLD)
    scratch = _checkout(tmp_path / "scratch", SCRATCH_DATE)
    (scratch / ".git" / SOURCE_DATES).write_text(json.dumps({"requirements.txt": OLD}))
    from_checkout, from_scratch = resolve_recipe(checkout, settings), resolve_recipe(scratch, settings)
    assert from_checkout is not None and from_scratch is not None
    assert from_scratch.index_date == from_checkout.index_date == OLD
    assert from_scratch.digest() == from_checkout.digest()

    # A source that was no git checkout (nothing recorded): the newest, as there.
    (scratch / ".git" / SOURCE_DATES).write_text("{}")
    assert inputs_commit_date(scratch, ("requirements.txt",)) is None
    # Edited in the workspace: the newest, as an edited checkout would.
    (scratch / ".git" / SOURCE_DATES).write_text(json.dumps({"requirements.txt": OLD}))
    (scratch / "requirements.txt").write_text("iniconfig\nattrs\n")
    assert inputs_commit_date(scratch, ("requirements.txt",)) is None
