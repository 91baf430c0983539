"""Fixtures for the composition-root tests: a small git repository, and no process left behind."""

from pathlib import Path

import pytest

from tests.codeloop.serve_support import git
from tests.processes import processes_mentioning


@pytest.fixture(autouse=True)
def no_process_left_behind(tmp_path: Path):
    """After every test, no nats-server, serve or tool server started for it is left."""
    yield
    assert processes_mentioning(tmp_path) == []


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit: README.md and src/app.py."""
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Test")
    git(root, "config", "user.email", "test@example.com")
    (root / "README.md").write_text("# demo\nserved by codeloop\n")
    (root / "src" / "app.py").write_text("def add(a, b):\n    return a + b\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "initial commit")
    return root
