"""Tests a patch rewrites to check a change of behaviour, told from tests it weakens: the patch's
test runs decide, through a real exec server session."""

from pathlib import Path

import pytest

from agents.failures import FailureClass
from agents.roles.verifier.patchset import FileChange, parse_patch
from agents.roles.verifier.rewritten_tests import losing_tests
from codeloop.testing import make_repo
from tests.agents.roles.verifier.conftest import FAST_PYTEST, make_patch, verify_for_text

DIV = "def div(a, b):\n    if b == 0:\n        return 0  # the old rule: nothing to divide by gives 0\n    return a / b\n"
DIV_RAISES = "def div(a, b):\n    return a / b\n"
OLD_TESTS = """\
from calc import div


def test_half():
    assert div(1, 2) == 0.5


def test_div_by_zero_is_zero():
    assert div(1, 0) == 0
    assert div(5, 0) == 0
    assert div(0, 0) == 0
"""
REWRITTEN = OLD_TESTS[: OLD_TESTS.index("def test_div_by_zero_is_zero")] + (
    "def test_div_by_zero_raises():\n    with pytest.raises(ZeroDivisionError):\n        div(1, 0)\n"
)
TASK = "div() must raise ZeroDivisionError when dividing by zero instead of returning 0"


@pytest.fixture
def div_repo(tmp_path: Path) -> Path:
    files = {"calc.py": DIV, "pytest.ini": FAST_PYTEST, "tests/test_calc.py": OLD_TESTS}
    return make_repo(tmp_path / "div", files)


async def _verify(repo: Path, patch: str):
    return await verify_for_text(repo, patch, TASK)


def _weakened(report) -> list:
    return [f for f in report.failures if f.failure_class == FailureClass.TEST_WEAKENED]


@pytest.mark.anyio
async def test_a_test_rewritten_to_check_the_new_behaviour_is_a_warning_and_the_fix_passes(
    div_repo: Path,
) -> None:
    """Three checks of the old behaviour become one of the new: the new test fails without the
    fix and passes with it, so the lost assertions are a rewrite, said as a warning."""
    header = "import pytest\n"
    patch = make_patch(div_repo, {"calc.py": DIV_RAISES, "tests/test_calc.py": header + REWRITTEN})
    report = await _verify(div_repo, patch)
    assert report.verdict == "passed", report.failures
    assert "tests/test_calc.py::test_div_by_zero_raises" in report.evidence
    (balance,) = [f for f in _weakened(report) if "assertion(s)" in f.message]
    assert balance.severity == "warning"
    assert "rewritten to check the fix" in balance.message and "test_div_by_zero_raises" in balance.message


@pytest.mark.anyio
async def test_assertions_removed_from_a_test_that_passes_either_way_stay_an_error(div_repo: Path) -> None:
    """The fix breaks the old checks and the patch deletes two of them, keeping one that holds
    with or without the fix: nothing shows the new behaviour, the patch weakened the test."""
    kept = OLD_TESTS.replace("    assert div(1, 0) == 0\n    assert div(5, 0) == 0\n", "").replace(
        "assert div(0, 0) == 0", "assert div(0, 1) == 0"
    )
    patch = make_patch(div_repo, {"calc.py": DIV_RAISES, "tests/test_calc.py": kept})
    report = await _verify(div_repo, patch)
    assert report.verdict == "failed"
    (balance,) = [f for f in _weakened(report) if "assertion(s)" in f.message]
    assert balance.severity == "error" and "rewritten" not in balance.message


def _change_of_test_a(hunk: str) -> FileChange:
    """The change of `tests/test_a.py` that `hunk` makes."""
    (change,) = parse_patch(
        "diff --git a/tests/test_a.py b/tests/test_a.py\n--- a/tests/test_a.py\n+++ b/tests/test_a.py\n"
        + hunk
    )
    return change


def test_assertions_lost_by_a_shared_helper_are_no_tests_rewrite() -> None:
    """A check removed outside any test (a helper every test calls) is never a rewrite."""
    old = "def check(x):\n    assert x > 0\n\n\ndef test_a():\n    check(1)\n    assert True\n"
    new = "def check(x):\n    return x\n\n\ndef test_a():\n    check(1)\n    assert True\n"
    change = _change_of_test_a("@@ -1,2 +1,2 @@\n def check(x):\n-    assert x > 0\n+    return x\n")
    assert losing_tests(change, old, new) == {"": None}


def test_a_test_removed_with_nothing_in_its_place_stands_for_nothing() -> None:
    """A test deleted with no test written where it stood: its assertions are lost, and no
    rewrite can account for them."""
    old = "def test_a():\n    assert 1\n\n\ndef test_b():\n    assert 2\n"
    new = "def test_a():\n    assert 1\n"
    change = _change_of_test_a(
        "@@ -1,6 +1,2 @@\n def test_a():\n     assert 1\n-\n-\n-def test_b():\n-    assert 2\n"
    )
    assert losing_tests(change, old, new) == {"test_b": None}
