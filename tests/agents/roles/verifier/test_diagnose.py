"""Diagnose mode's report on a suite that cannot run: why, never "no tests were collected"."""

from pathlib import Path

import anyio
import pytest

from agents.messages import Plan, TaskSubmitted, VerifyRequest
from agents.roles.verifier.role import diagnose_tree
from tests.agents.roles.verifier.conftest import FAST_PYTEST, deadline, make_repo

pytestmark = pytest.mark.anyio


def _request(repo: Path) -> VerifyRequest:
    task = TaskSubmitted(text="why do the tests fail?", repo=str(repo), mode="execute")
    return VerifyRequest(step_id="04-verify", task=task, plan=Plan(), deadline_at=deadline())


async def test_a_suite_that_cannot_import_names_the_module_and_the_file(tmp_path: Path, tools) -> None:
    """The environments contract (docs/environments.md): a module the environment lacks is
    `env.setup`, the project's own code failing at import is `test.collection_error`, each naming
    the file; a suite with no tests at all is still "no tests were collected"."""
    missing = make_repo(
        tmp_path / "missing",
        {
            "pytest.ini": FAST_PYTEST,
            "tests/test_a.py": "import codeloop_absent_dependency\n\n\ndef test_a():\n    pass\n",
        },
    )
    broken = make_repo(
        tmp_path / "broken",
        {
            "pytest.ini": FAST_PYTEST,
            "mypkg/__init__.py": "",
            "mypkg/core.py": "raise RuntimeError('broken at import')\n",
            "tests/test_b.py": "from mypkg import core\n\n\ndef test_b():\n    pass\n",
        },
    )
    empty = make_repo(tmp_path / "empty", {"pytest.ini": FAST_PYTEST, "mod.py": "X = 1\n"})
    reports = {}
    with anyio.fail_after(240):
        for name, repo in (("missing", missing), ("broken", broken), ("empty", empty)):
            reports[name] = await diagnose_tree(None, repo, _request(repo), tools=tools)  # pyright: ignore[reportArgumentType] - diagnosis reads no role dependency when tools are given
    for name, cls, file in (
        ("missing", "env.setup", "tests/test_a.py"),
        ("broken", "test.collection_error", "tests/test_b.py"),
    ):
        report = reports[name]
        assert report.verdict == "unverified"
        assert [(f.failure_class, f.path) for f in report.failures] == [(cls, file)]
        assert "no tests were collected" not in report.checks[-1].summary
    assert "codeloop_absent_dependency" in reports["missing"].failures[0].message
    assert reports["empty"].checks[-1].summary == "no tests were collected"
