"""Fixtures for the tool-server tests: a small git repository, a token file, a secret outside the root."""

from pathlib import Path

import pytest

from tests.tool_servers.ts_helpers import git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit, an ignored file and an uncommitted change."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Test")
    git(root, "config", "user.email", "test@example.com")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "README.md").write_text("# demo\n")
    (root / ".gitignore").write_text("build/\n*.log\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "initial commit")
    (root / "build").mkdir()
    (root / "build" / "out.txt").write_text("ignored\n")
    (root / "debug.log").write_text("ignored\n")
    (root / "src" / "app.py").write_text(
        "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
    )
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A secret file outside the root."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET\n")
    return secret


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.txt"
    path.write_text(
        "# token principal scopes\nreader-token-7f3a9c21 alice read\nwriter-token-4e8b2d65 bob read,write\n"
    )
    path.chmod(0o600)
    return path
