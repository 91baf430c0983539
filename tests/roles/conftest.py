"""Custom roles end to end: plug-in roles installed as packages, review stages, pipelines from the
configuration, discovery. Real nats-server, real roles and tool servers; only models are scripted."""

import importlib
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from tests.processes import processes_mentioning

ROOT = Path(__file__).resolve().parents[2]
SECURITY_REVIEWER = ROOT / "examples" / "roles" / "security_reviewer"
SECURE = ["plan:planner", "retrieve:retriever", "code:coder", "review:security-reviewer", "verify:verifier"]


@pytest.fixture(scope="session")
def security_reviewer_installed() -> None:
    """`pip install -e examples/roles/security_reviewer`, as a user would, unless it is already."""
    if not any(ep.name == "security-reviewer" for ep in entry_points(group="codeloop.roles")):
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "-e",
             str(SECURITY_REVIEWER)],
            check=True, capture_output=True,
        )  # fmt: skip
        # An editable install's path hook is read at interpreter start; this process needs the
        # package on its path now (its entry point is found from the new metadata at once).
        sys.path.insert(0, str(SECURITY_REVIEWER))
        importlib.invalidate_caches()
    assert any(ep.name == "security-reviewer" for ep in entry_points(group="codeloop.roles"))


@pytest.fixture(autouse=True)
def no_process_left_behind(tmp_path: Path):
    yield
    assert processes_mentioning(tmp_path) == []
