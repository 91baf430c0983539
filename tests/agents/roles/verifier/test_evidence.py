"""What a `passed` verdict rests on: the tests the task is about, and evidence its problem is gone.

Real repositories, a real exec server session and the process sandbox; the plans name no test
targets here, so what makes a test the task's is the task's text, the files the patch touches, or
where the test fails.
"""

from pathlib import Path

import anyio
import pytest

from agents.failures import FailureClass
from agents.messages.verification import Baseline
from agents.roles.verifier.verdict import revision_feedback
from agents.roles.verifier.verify import PatchTask, verify_patch
from codeloop.testing import make_repo
from tests.agents.roles.verifier.conftest import (
    FAST_PYTEST,
    InProcessTools,
    deadline,
    git,
    make_patch,
)

pytestmark = pytest.mark.anyio

OPS = "def mean(xs):\n    return sum(xs) / (len(xs) - 1)\n\n\ndef top(xs):\n    return max(xs)\n"
TEST_OPS = """\
from ops import mean, top


def test_mean():
    assert mean([1, 2, 3]) == 2, "mean of 1, 2, 3"


def test_top():
    assert top([1, 5, 2]) == 5


def test_top_of_one():
    assert top([7]) == 7
"""
TEST_LEGACY = "def test_legacy_format():\n    assert 'a' == 'b', 'broken for years'\n"
MEAN_TEST = "tests/test_ops.py::test_mean"


@pytest.fixture
def ops_repo(tmp_path: Path) -> Path:
    """`mean` divides by one less than the count; tests/test_ops.py::test_mean shows it, and an
    unrelated test elsewhere has failed for years."""
    return make_repo(
        tmp_path / "ops",
        {
            "ops.py": OPS,
            "pytest.ini": FAST_PYTEST,
            "tests/test_ops.py": TEST_OPS,
            "tests/test_legacy.py": TEST_LEGACY,
        },
    )


async def _verify(repo: Path, patch: str, tools: InProcessTools, task_text: str, baseline=None):
    with anyio.fail_after(240):
        report, _ = await verify_patch(
            workspace=repo,
            patch=patch,
            task=PatchTask(mode="execute", plan_files=["ops.py"], test_targets=[], text=task_text),
            tools=tools,
            deadline=deadline(),
            baseline=baseline,
        )
    return report


def _classes(report) -> set[str]:
    return {f.failure_class for f in report.failures if f.severity == "error"}


async def test_a_patch_that_leaves_the_named_failing_test_failing_fails_naming_it(
    ops_repo: Path, tools
) -> None:
    """The task names test_mean; a patch dividing by `len(xs) + 1` leaves it failing: `failed` with
    `test.still_failing`, its id and assertion message, in the coder's feedback too."""
    wrong = make_patch(ops_repo, {"ops.py": OPS.replace("len(xs) - 1", "len(xs) + 1")})
    report = await _verify(ops_repo, wrong, tools, "tests/test_ops.py::test_mean fails: mean() is wrong")
    assert report.verdict == "failed"
    assert report.still_failing == [MEAN_TEST]
    still = next(f for f in report.failures if f.failure_class == FailureClass.TEST_STILL_FAILING)
    assert "mean of 1, 2, 3" in still.message
    feedback = revision_feedback(report)
    assert MEAN_TEST in feedback and "mean of 1, 2, 3" in feedback
    assert report.evidence == []


async def test_a_correct_fix_of_the_named_test_passes_and_lists_the_old_unrelated_failure(
    ops_repo: Path, tools
) -> None:
    """The same task, the right fix: the named test failed on the starting tree and passes now
    (the evidence); the unrelated old failure elsewhere is listed, unblamed."""
    right = make_patch(ops_repo, {"ops.py": OPS.replace("len(xs) - 1", "len(xs)")})
    report = await _verify(ops_repo, right, tools, "The test test_mean fails: mean() is wrong.")
    assert report.verdict == "passed", report.failures
    assert report.evidence == [MEAN_TEST]
    assert report.preexisting == ["tests/test_legacy.py::test_legacy_format"]
    assert next(c for c in report.checks if c.name == "evidence").ok


async def test_an_old_failure_in_a_test_file_the_plan_names_is_not_blamed_on_a_right_fix(
    ops_repo: Path, tools
) -> None:
    """The plan names every test file as a target; the legacy test in one of them has failed for
    years and executes none of the changed code: it stays `preexisting`, and the right fix passes."""
    right = make_patch(ops_repo, {"ops.py": OPS.replace("len(xs) - 1", "len(xs)")})
    with anyio.fail_after(240):
        report, _ = await verify_patch(
            workspace=ops_repo,
            patch=right,
            task=PatchTask(
                mode="execute",
                plan_files=["ops.py"],
                test_targets=["tests/test_ops.py", "tests/test_legacy.py"],
                text="mean() is wrong",
            ),
            tools=tools,
            deadline=deadline(),
            baseline=None,
        )
    assert report.verdict == "passed", report.failures
    assert report.preexisting == ["tests/test_legacy.py::test_legacy_format"]
    assert FailureClass.TEST_STILL_FAILING not in _classes(report)


async def test_a_patch_that_fixes_nothing_fails_on_the_test_executing_it_when_the_task_names_no_test(
    ops_repo: Path, tools
) -> None:
    """The task names no test and the plan no target: test_mean executes the changed line, failed
    before and still fails, so it is the patch's to fix (`test.still_failing`, with its message);
    the unrelated old failure stays unblamed."""
    wrong = make_patch(ops_repo, {"ops.py": OPS.replace("len(xs) - 1", "len(xs) + 1")})
    report = await _verify(ops_repo, wrong, tools, "mean() returns the wrong value")
    assert report.verdict == "failed"
    assert report.still_failing == [MEAN_TEST]
    still = next(f for f in report.failures if f.failure_class == FailureClass.TEST_STILL_FAILING)
    assert "mean of 1, 2, 3" in still.message
    assert report.covering == [MEAN_TEST]
    assert report.preexisting == ["tests/test_legacy.py::test_legacy_format"]


async def test_a_test_failing_inside_the_changed_code_is_the_patchs_to_fix(tmp_path: Path, tools) -> None:
    """A test that raised in the very function the patch changed, and still does, is the task's
    whatever the task says: `test.still_failing`."""
    code = "def ratio(a, b):\n    return a / b\n"
    tests = "from frac import ratio\n\n\ndef test_ratio_of_zero():\n    assert ratio(1, 0) == 0\n"
    repo = make_repo(
        tmp_path / "frac", {"frac.py": code, "pytest.ini": FAST_PYTEST, "tests/test_frac.py": tests}
    )
    still = make_patch(repo, {"frac.py": "def ratio(a, b):\n    # guard added later\n    return a / b\n"})
    report = await _verify(repo, still, tools, "ratio() crashes")
    assert report.verdict == "failed"
    assert report.still_failing == ["tests/test_frac.py::test_ratio_of_zero"]


async def test_a_reproducing_test_is_evidence_in_a_repository_with_no_failing_test(
    tmp_path: Path, tools
) -> None:
    """Nothing fails at the start: a fix plus a test that fails without it and passes with it is
    `passed` with that test as evidence; the same fix alone is `passed` too, resting on the test
    that executes the changed code (no evidence of a fixed test)."""
    code = "def clamp(x, lo, hi):\n    return max(lo, x)\n"
    tests = "from rng import clamp\n\n\ndef test_clamp_low():\n    assert clamp(-1, 0, 5) == 0\n"
    repo = make_repo(
        tmp_path / "rng", {"rng.py": code, "pytest.ini": FAST_PYTEST, "tests/test_rng.py": tests}
    )
    fixed = "def clamp(x, lo, hi):\n    return min(hi, max(lo, x))\n"
    reproduction = "from rng import clamp\n\n\ndef test_clamp_high():\n    assert clamp(9, 0, 5) == 5\n"
    with_test = make_patch(repo, {"rng.py": fixed, "tests/test_rng_high.py": reproduction})
    report = await _verify(repo, with_test, tools, "clamp() ignores the upper bound")
    assert report.verdict == "passed", report.failures
    assert report.evidence == ["tests/test_rng_high.py::test_clamp_high"]
    alone = await _verify(repo, make_patch(repo, {"rng.py": fixed}), tools, "clamp() ignores the upper bound")
    assert alone.verdict == "passed", alone.failures
    assert alone.evidence == [] and alone.covering == ["tests/test_rng.py::test_clamp_low"]
    assert "execute the changed code pass" in next(c for c in alone.checks if c.name == "evidence").summary


async def test_a_fix_whose_whole_suite_cannot_run_before_the_deadline_is_not_passed(
    ops_repo: Path, tools
) -> None:
    """The named test is fixed, but the suite (known from an earlier verification to take far longer
    than the time left) is skipped: regressions went unchecked, so `unverified`, not `passed`."""
    slow = Baseline(commit=git(ops_repo, "rev-parse", "HEAD").strip(), suite_duration_s=10_000.0)
    right = make_patch(ops_repo, {"ops.py": OPS.replace("len(xs) - 1", "len(xs)")})
    report = await _verify(ops_repo, right, tools, "test_mean fails", baseline=slow)
    assert report.verdict == "unverified"
    assert _classes(report) == {FailureClass.VERIFY_UNVERIFIABLE}
    assert "the whole suite was not run" in report.failures[0].message
