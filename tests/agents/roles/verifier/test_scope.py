"""The starting tree's coverage run in a suite too large to run whole: the changed packages' tests."""

from pathlib import Path

import pytest

from agents.roles.verifier import scope
from agents.roles.verifier.patchset import parse_patch
from agents.roles.verifier.scope import changed_sources, measured_scope
from codeloop.testing import make_repo
from tests.agents.roles.verifier.conftest import (
    FAST_PYTEST,
    make_patch,
    verify_for_text,
)

MOD = "def double(x):\n    return x + x + 1  # the bug\n"
TEST_MOD = "from pkg.a.mod import double\n\n\ndef test_double():\n    assert double(2) == 4\n"
TEST_FAR = "def test_far():\n    assert False, 'a failure far from the change'\n"

pytestmark = pytest.mark.anyio


def _changes(*paths: str):
    text = "".join(
        f"diff --git a/{p} b/{p}\n--- a/{p}\n+++ b/{p}\n@@ -1 +1 @@\n-x = 1\n+x = 2\n" for p in paths
    )
    return parse_patch(text)


def test_a_suite_of_few_modules_is_measured_whole() -> None:
    every = [f"pkg/m{i}/tests/test_m.py" for i in range(10)]
    found = measured_scope(changed_sources(_changes("pkg/m1/code.py")), every, related=[])
    assert found.whole and found.suite_files == 10


def test_a_large_suite_is_measured_by_the_changed_packages() -> None:
    """Our rule (the module's docstring): the tests under the changed module's package, a
    top-level package's own tests/ for a top-level module, and the modules importing it."""
    every = [f"lib/sub{i}/tests/test_{i}.py" for i in range(400)]
    every += ["lib/tests/test_top.py", "lib/tests/deep/test_deep.py", "other/tests/test_o.py"]
    found = measured_scope(
        changed_sources(_changes("lib/sub7/code.py", "lib/top.py")), every, related=["other/tests/test_o.py"]
    )
    assert found.files == (
        "lib/sub7/tests/test_7.py",
        "lib/tests/deep/test_deep.py",
        "lib/tests/test_top.py",
        "other/tests/test_o.py",
    )
    assert found.suite_files == 403
    assert found.cache_key("abc") != "abc" and found.cache_key("abc").startswith("abc-")


async def test_the_coverage_run_of_a_large_suite_runs_the_changed_packages_tests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fix in a large suite (made large here by lowering the threshold) is judged by the tests
    of its package: the far test that fails on both trees is not run, and the report says which
    tests were measured and that the rest of the suite was not run."""
    monkeypatch.setattr(scope, "MAX_WHOLE_SUITE_FILES", 1)
    repo = make_repo(
        tmp_path / "big",
        {
            "pytest.ini": FAST_PYTEST,
            "pkg/__init__.py": "",
            "pkg/a/__init__.py": "",
            "pkg/a/mod.py": MOD,
            "pkg/a/tests/__init__.py": "",
            "pkg/a/tests/test_mod.py": TEST_MOD,
            "pkg/b/__init__.py": "",
            "pkg/b/tests/__init__.py": "",
            "pkg/b/tests/test_far.py": TEST_FAR,
        },
    )
    patch = make_patch(repo, {"pkg/a/mod.py": MOD.replace("x + x + 1  # the bug", "x + x")})
    report = await verify_for_text(repo, patch, "double(2) should be 4", tmp_path / "cache")
    assert report.verdict == "passed", report.failures
    assert report.evidence == ["pkg/a/tests/test_mod.py::test_double"]
    assert "pkg/b/tests/test_far.py::test_far" not in report.preexisting
    coverage = next(c for c in report.checks if c.name == "coverage")
    assert "the tests of the changed packages (1 of 2 test modules" in coverage.summary
    suite = next(c for c in report.checks if c.name == "full_suite")
    assert "1 test modules outside the changed packages were not run" in suite.summary


async def test_one_coverage_run_of_the_starting_tree_serves_candidates_changing_other_files(
    tmp_path: Path,
) -> None:
    """Candidates for one task that change different files: the first verification's coverage run
    measures every candidate's changed files (`PatchTask.candidates_change`), so the second
    verification runs no suite on the starting tree."""
    repo = make_repo(
        tmp_path / "two",
        {
            "pytest.ini": FAST_PYTEST,
            "mod.py": MOD,
            "other.py": "def triple(x):\n    return 3 * x\n",
            "tests/__init__.py": "",
            "tests/test_mod.py": TEST_MOD.replace("pkg.a.mod", "mod"),
            "tests/test_other.py": "from other import triple\n\n\ndef test_triple():\n    assert triple(1) == 3\n",
        },
    )
    first = make_patch(repo, {"mod.py": MOD.replace("x + x + 1  # the bug", "x + x")})
    second = make_patch(repo, {"other.py": "def triple(x):\n    return x * 3\n"})
    both = ("mod.py", "other.py")
    cache = tmp_path / "cache"
    reports = [
        await verify_for_text(repo, patch, "double(2) should be 4", cache, candidates_change=both)
        for patch in (first, second)
    ]
    coverage = [next(c for c in r.checks if c.name == "coverage").summary for r in reports]
    assert "measuring 2 file(s)" in coverage[0], coverage
    assert "was known" in coverage[1], coverage
    assert reports[0].verdict == "passed"
    assert reports[1].covering == ["tests/test_other.py::test_triple"]


async def test_without_per_test_coverage_a_large_suite_runs_the_changed_packages_tests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test command with no per-test coverage (sympy's `bin/test`, a configured unittest run):
    the fallback's "whole suite" in a suite too large to run whole is the changed packages' tests,
    and the report says so; the far test failing on both trees never runs."""
    monkeypatch.setattr(scope, "MAX_WHOLE_SUITE_FILES", 1)
    unit = "import unittest\n\nfrom pkg.a.mod import double\n\n\nclass TestDouble(unittest.TestCase):\n"
    repo = make_repo(
        tmp_path / "unit",
        {
            "codeloop.toml": '[verification]\ntest_command = "python -m unittest -v {tests}"\n',
            "pkg/__init__.py": "",
            "pkg/a/__init__.py": "",
            "pkg/a/mod.py": MOD,
            "pkg/a/tests/__init__.py": "",
            "pkg/a/tests/test_mod.py": unit
            + "    def test_double(self):\n        self.assertEqual(double(2), 4)\n",
            "pkg/b/__init__.py": "",
            "pkg/b/tests/__init__.py": "",
            "pkg/b/tests/test_far.py": "import unittest\n\n\nclass TestFar(unittest.TestCase):\n"
            "    def test_far(self):\n        self.fail('far from the change')\n",
        },
    )
    patch = make_patch(repo, {"pkg/a/mod.py": MOD.replace("x + x + 1  # the bug", "x + x")})
    report = await verify_for_text(repo, patch, "double(2) should be 4", tmp_path / "cache")
    assert report.verdict != "failed", report.failures
    suite = next(c for c in report.checks if c.name == "full_suite")
    assert "the tests of the changed packages (1 of 2 test modules" in suite.summary, suite.summary
    assert not any("test_far" in t for t in [*report.preexisting, *report.regressions])
