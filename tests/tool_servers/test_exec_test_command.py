"""run_tests with the repository's own test command, and per-test coverage (the exec server's
`test_command` and `test_coverage`), on the process backend: the command and the parsing are
what is checked here, not isolation; one test runs the coverage run in gVisor's warm interpreter."""

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from sandbox.gvisor import probe_runsc
from tool_servers.exec.server import build_exec_server
from tool_servers.exec.test_command import (
    TestCommandError,
    configured_test_command,
    find_test_command,
    parse_sympy_output,
    parse_unittest_output,
)

pytestmark = pytest.mark.anyio

OPS = "def mean(xs):\n    return sum(xs) / (len(xs) - 1)\n\n\ndef total(xs):\n    return sum(xs)\n"
UNITTEST = (
    "import unittest\n\nfrom calc.ops import mean, total\n\n\nclass TestOps(unittest.TestCase):\n"
    "    def test_mean(self):\n        self.assertEqual(mean([2, 4, 6]), 4.0)\n\n"
    "    def test_total(self):\n        self.assertEqual(total([1, 2]), 3)\n"
)


@pytest.fixture(autouse=True)
def _no_sandbox_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CODELOOP_SANDBOX", raising=False)


def _project(root: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


async def _run_tests(root: Path, args: dict[str, Any]) -> dict[str, Any]:
    with anyio.fail_after(120):
        async with Client(build_exec_server(root, backend="process")) as session:
            result = await session.call_tool("run_tests", args)
    assert not result.is_error, result.content
    return result.structured_content


def test_the_test_command_lives_under_verification_only(tmp_path: Path) -> None:
    """`[verification] test_command` is read; the same key under `[environment]` is an error that
    names the table it belongs in, never silently ignored."""
    config = tmp_path / "codeloop.toml"
    config.write_text('[verification]\ntest_command = "python -m unittest -v"\n')
    assert configured_test_command(tmp_path) == "python -m unittest -v"
    config.write_text('[environment]\ntest_command = "python -m unittest -v"\n')
    with pytest.raises(
        TestCommandError, match=r"under \[environment\].*move it to \[verification\] test_command"
    ):
        configured_test_command(tmp_path)
    config.write_text('[verification]\ntest_command = "python -m pytest -x {tests}"\n')
    command = find_test_command(tmp_path)
    assert command.kind == "pytest" and command.pytest_args == ["-x"]
    config.unlink()
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "runtests.py").write_text("")
    (tmp_path / "django").mkdir()
    django = find_test_command(tmp_path)
    assert django.kind == "django"
    assert django.argv("py", ["tests/admin_views/tests.py"])[-1] == "admin_views.tests"


def test_unittest_and_sympy_output_is_read_per_test(tmp_path: Path) -> None:
    """Per-test outcomes from the runners' verbose output, ids made pytest-like (file::Class::test)."""
    _project(tmp_path, {"tests/test_ops.py": "", "tests/admin/tests.py": ""})
    unittest_out = (
        "test_mean (tests.test_ops.TestOps.test_mean) ... FAIL\n"
        "test_total (tests.test_ops.TestOps) ... ok\n"
        "test_skip (admin.tests.AdminTests) ... skipped 'no db'\n"
    )
    assert parse_unittest_output(tmp_path, unittest_out) == {
        "tests/test_ops.py::TestOps::test_mean": "failed",
        "tests/test_ops.py::TestOps::test_total": "passed",
        "admin/tests.py::AdminTests::test_skip": "skipped",
    }
    assert (
        parse_unittest_output(tmp_path, unittest_out, base="tests")[
            "tests/admin/tests.py::AdminTests::test_skip"
        ]
        == "skipped"
    )
    sympy_out = "sympy/core/tests/test_basic.py[2] \ntest_a ok\ntest_b F\n"
    assert parse_sympy_output(sympy_out) == {
        "sympy/core/tests/test_basic.py::test_a": "passed",
        "sympy/core/tests/test_basic.py::test_b": "failed",
    }


async def test_a_configured_unittest_command_runs_and_names_the_failing_test(tmp_path: Path) -> None:
    """A project that runs `python -m unittest`: its command runs, the failing test is named; per-test
    coverage is refused with a reason (it needs pytest's hooks)."""
    root = _project(
        tmp_path / "p",
        {
            "codeloop.toml": '[verification]\ntest_command = "python -m unittest -v {tests}"\n',
            "calc/__init__.py": "",
            "calc/ops.py": OPS,
            "tests/__init__.py": "",
            "tests/test_ops.py": UNITTEST,
        },
    )
    out = await _run_tests(root, {"paths": ["tests/test_ops.py"], "coverage_files": ["calc/ops.py"]})
    assert (out["passed"], out["failed"]) == (1, 1)
    assert [f["test_id"] for f in out["failures"]] == ["tests/test_ops.py::TestOps::test_mean"]
    assert "needs pytest" in out["coverage"]["error"]


def _calc(root: Path) -> Path:
    return _project(
        root,
        {
            "pytest.ini": "[pytest]\naddopts = -p no:hypothesispytest -p no:anyio\n",
            "calc/__init__.py": "",
            "calc/ops.py": OPS,
            "tests/test_ops.py": UNITTEST,
        },
    )


async def test_coverage_says_which_test_executed_which_line(tmp_path: Path) -> None:
    """`coverage_files`: per test (node id), the lines of the measured file it executed, code run at
    import under "", and every test's outcome."""
    root = _calc(tmp_path / "p")
    out = await _run_tests(root, {"coverage_files": ["calc/ops.py"]})
    _assert_calc_coverage(out)
    assert not (root / ".codeloop").exists()


@pytest.mark.gvisor
@pytest.mark.skipif(not probe_runsc().works, reason="runsc does not work here; see `codeloop doctor`")
async def test_the_coverage_run_in_gvisors_warm_interpreter_measures_what_a_cold_one_does(
    tmp_path: Path,
) -> None:
    """In gVisor the static checks start the warm pytest interpreter; the coverage run after them
    runs in it (a `python -c` script driving pytest), and so does the next one: both measure the
    same lines per test as the process backend's cold run above."""
    root = _calc(tmp_path / "p")
    with anyio.fail_after(180):
        async with Client(build_exec_server(root, backend="gvisor")) as session:
            await session.call_tool("run_static_checks", {"paths": ["calc/ops.py"]})
            runs = [
                await session.call_tool("run_tests", {"coverage_files": ["calc/ops.py"]}) for _ in range(2)
            ]
    for run in runs:
        assert not run.is_error, run.content
        _assert_calc_coverage(run.structured_content)


def _assert_calc_coverage(out: dict[str, Any]) -> None:
    coverage = out["coverage"]
    assert coverage["error"] is None
    assert coverage["outcomes"] == {
        "tests/test_ops.py::TestOps::test_mean": "failed",
        "tests/test_ops.py::TestOps::test_total": "passed",
    }
    lines = coverage["files"]["calc/ops.py"]
    assert lines["tests/test_ops.py::TestOps::test_mean"] == [2]
    assert lines["tests/test_ops.py::TestOps::test_total"] == [6]
    assert lines[""] == [1, 5]
