"""Custom roles end to end: plug-in roles installed as packages, review stages, pipelines from the
configuration, discovery. Real nats-server, real roles and tool servers; only models are scripted."""

import fcntl
import importlib
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from tests.processes import processes_mentioning

ROOT = Path(__file__).resolve().parents[2]
SECURITY_REVIEWER = ROOT / "examples" / "roles" / "security_reviewer"
FIXTURE_ROLES = Path(__file__).resolve().parent / "fixture_roles"
SECURE = ["plan:planner", "retrieve:retriever", "code:coder", "review:security-reviewer", "verify:verifier"]


def _installed(name: str, project: Path) -> None:
    """`pip install -e PROJECT`, as a user would, unless its role `name` is installed already."""
    # Test workers run at once: one pip at a time, and whichever worker installed it, the others
    # see its entry point without having its package on their path yet.
    with open(Path(sys.prefix) / ".codeloop-test-plugins.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not any(ep.name == name for ep in entry_points(group="codeloop.roles")):
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--no-deps",
                    "--no-build-isolation",
                    "-e",
                    str(project),
                ],
                check=True,
                capture_output=True,
            )
    # An editable install's path hook is read at interpreter start; a process started before the
    # install needs the package on its path now (its entry point is found from the new metadata).
    if str(project) not in sys.path:
        sys.path.insert(0, str(project))
        importlib.invalidate_caches()
    assert any(ep.name == name for ep in entry_points(group="codeloop.roles"))


@pytest.fixture(scope="session")
def security_reviewer_installed() -> None:
    _installed("security-reviewer", SECURITY_REVIEWER)


@pytest.fixture(scope="session")
def fixture_roles_installed() -> None:
    """The tests' own plug-in package (`scripted-coder`, `slow-reviewer`)."""
    _installed("slow-reviewer", FIXTURE_ROLES)


@pytest.fixture(autouse=True)
def no_process_left_behind(tmp_path: Path):
    yield
    assert processes_mentioning(tmp_path) == []
