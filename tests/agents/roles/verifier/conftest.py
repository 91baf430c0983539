"""Fixtures of the verifier tests: real git repositories in temp dirs and a ToolProvider that
builds the real tool servers in-process, on the real sandbox."""

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from agents.messages.verification import VerificationReport
from agents.roles.verifier.verify import PatchTask, verify_patch
from codeloop.testing import make_repo
from sandbox.backend import BackendChoice
from sandbox.gvisor import probe_runsc
from tool_servers.protocol.scopes import Scope
from tool_servers.protocol.spec import ServerOptions
from tool_servers.serve import server_builder

GVISOR = probe_runsc().works
NO_RUNSC = "runsc does not work here (needs runsc installed and root); see `codeloop doctor`"
FAST_PYTEST = "[pytest]\naddopts = -p no:hypothesispytest -p no:anyio\n"
"""The repositories' own pytest config: codeloop's interpreter runs their tests, and its plugins
(seconds of start-up) have nothing to do with them."""


class InProcessTools:
    """The composition root's ToolProvider in miniature: real servers, in-process MCP targets."""

    def __init__(self, *, backend: BackendChoice) -> None:
        self.backend = backend
        self.opened: list[Path] = []

    def servers(self, root: Path, scopes: frozenset[str], *, index_dir: Path | None = None) -> dict[str, Any]:
        self.opened.append(root)
        options = ServerOptions(scopes=frozenset(Scope(s) for s in scopes))
        return {
            "fs": server_builder("fs")(root, options),
            "git": server_builder("git")(root, options),
            "exec": server_builder("exec")(root, options, backend=self.backend),
        }


@pytest.fixture(autouse=True)
def _no_sandbox_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test picks its backend; a CODELOOP_SANDBOX of the developer's shell must not veto it."""
    monkeypatch.delenv("CODELOOP_SANDBOX", raising=False)


@pytest.fixture
def tools() -> InProcessTools:
    """The process backend: these tests check the verifier's judgement, not isolation."""
    return InProcessTools(backend="process")


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def make_patch(root: Path, changes: dict[str, str | None]) -> str:
    """The `git diff` that makes these changes (None deletes a file); the repository is left as it was."""
    for path, text in changes.items():
        if text is None:
            (root / path).unlink()
        else:
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
    git(root, "add", "-A")
    patch = git(root, "diff", "--cached", "--binary")
    git(root, "reset", "-q", "--hard", "HEAD")
    git(root, "clean", "-qfd")
    return patch


def deadline(seconds: float = 120) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


async def verify_for_text(
    repo: Path, patch: str, text: str, cache_dir: Path | None = None, candidates_change: tuple[str, ...] = ()
) -> VerificationReport:
    """The report on `patch` for a task that says only `text` (no plan, no test named), verified
    in `repo` on the process backend; `cache_dir` keeps the starting trees' coverage;
    `candidates_change`: other candidates' changed files, measured in the same coverage run."""
    task = PatchTask(
        mode="execute", plan_files=[], test_targets=[], text=text, candidates_change=candidates_change
    )
    with anyio.fail_after(240):
        report, _ = await verify_patch(
            workspace=repo,
            patch=patch,
            task=task,
            tools=InProcessTools(backend="process"),
            deadline=deadline(),
            baseline=None,
            cache_dir=cache_dir,
        )
    return report


CALC = """\
def add(a, b):
    return a + b


def mul(a, b):
    return a + b  # the bug: should multiply
"""
CALC_FIXED = CALC.replace("return a + b  # the bug: should multiply", "return a * b")
TEST_CALC = """\
from calc import add, mul


def test_add():
    assert add(2, 3) == 5


def test_mul():
    assert mul(3, 4) == 12
"""
TEST_STATS = """\
from calc import add


def total(values):
    result = 0
    for v in values:
        result = add(result, v)
    return result


def test_total():
    assert total([1, 2, 3]) == 6
"""


@pytest.fixture
def calc_repo(tmp_path: Path) -> Path:
    """A package with tests: `mul` is wrong and tests/test_calc.py::test_mul shows it."""
    return make_repo(
        tmp_path / "calc",
        {
            "calc.py": CALC,
            "pytest.ini": FAST_PYTEST,
            "tests/__init__.py": "",
            "tests/test_calc.py": TEST_CALC,
            "tests/test_stats.py": TEST_STATS,
        },
    )
