"""What a `passed` verdict rests on: the tests the task is about, and evidence its problem is gone.

Real repositories, a real exec server session and the process sandbox; the plans name no test
targets here, so what makes a test the task's is the task's text, the files the patch touches, or
where the test fails.
"""

from pathlib import Path

import anyio
import pytest

from agents.failures import FailureClass
from agents.feedback import revision_feedback
from agents.messages.verification import Baseline
from agents.roles.verifier.verify import PatchTask, verify_patch
from codeloop.testing import make_repo
from tests.agents.roles.verifier.conftest import (
    FAST_PYTEST,
    InProcessTools,
    deadline,
    git,
    make_patch,
    verify_for_text,
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
    assert report.verdict == "failed", (report.failures, report.checks)
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
    assert report.verdict == "failed", (report.failures, report.checks)
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
    assert report.verdict == "failed", (report.failures, report.checks)
    assert report.still_failing == ["tests/test_frac.py::test_ratio_of_zero"]


@pytest.mark.slow
async def test_a_reproducing_test_is_evidence_in_a_repository_with_no_failing_test(
    tmp_path: Path, tools
) -> None:
    """Nothing fails at the start: a fix plus a test that fails without it and passes with it is
    `passed` with that test as evidence (`reproduction`); the same fix alone is `unverified`: the
    test that executes the changed code passing shows no regression, never the problem fixed."""
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
    assert report.evidence_kind == "reproduction"
    assert report.summary.startswith("passed: shown fixed by the test the patch adds")
    alone = await _verify(repo, make_patch(repo, {"rng.py": fixed}), tools, "clamp() ignores the upper bound")
    assert alone.verdict == "unverified", alone.failures
    assert alone.evidence == [] and alone.covering == ["tests/test_rng.py::test_clamp_low"]
    assert alone.evidence_kind == "none"
    why = next(c for c in alone.checks if c.name == "evidence").summary
    assert why.startswith("no regression found: 1 test(s) that execute the changed code pass")
    assert "nothing showed the problem fixed" in why
    assert FailureClass.TEST_NO_REPRODUCTION in _classes(alone)


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


FRAC = "def ratio(a, b):\n    return a / b\n"
TEST_FRAC = "from frac import ratio\n\n\ndef test_half():\n    assert ratio(1, 2) == 0.5\n"
FRAC_ISSUE = """\
`ratio` of an empty range crashes; it should be 0:

>>> from frac import ratio
>>> ratio(0, 0)
Traceback (most recent call last):
ZeroDivisionError: division by zero
"""


@pytest.mark.slow
async def test_the_tasks_example_shows_the_problem_fixed_or_still_there(tmp_path: Path, tools) -> None:
    """No test fails on the starting tree, but the task's session raises there: the patch that makes
    it run clean is `passed` by the example; one that leaves it raising is `failed` with
    `example.still_failing`, and both reports carry what the example did."""
    repo = make_repo(
        tmp_path / "frac", {"frac.py": FRAC, "pytest.ini": FAST_PYTEST, "tests/test_frac.py": TEST_FRAC}
    )
    right = make_patch(repo, {"frac.py": "def ratio(a, b):\n    return a / b if b else 0\n"})
    report = await verify_for_text(repo, right, FRAC_ISSUE)
    assert report.verdict == "passed", report.failures
    assert report.evidence_kind == "example"
    assert report.summary.startswith("passed: shown fixed by the task's example")
    assert report.behaviour["example"] != report.starting_behaviour["example"]
    assert "raised ZeroDivisionError" in report.starting_behaviour["example"]
    wrong = make_patch(
        repo, {"frac.py": "def ratio(a, b):\n    if a and not b:\n        return 0\n    return a / b\n"}
    )
    report = await verify_for_text(repo, wrong, FRAC_ISSUE)
    assert report.verdict == "failed", (report.failures, report.checks)
    assert [f.failure_class for f in report.errors] == [FailureClass.EXAMPLE_STILL_FAILING]
    assert "still raises ZeroDivisionError" in report.errors[0].message


CONF = 'import os\n\n\ndef mode():\n    return os.environ.get("APP_MODE", "plain")\n'
TEST_SETUP = "import os\n\n\ndef test_fancy_mode_can_be_set():\n    os.environ['APP_MODE'] = 'fancy'\n"
TEST_MODE = "from conf import mode\n\n\ndef test_mode_is_plain():\n    assert mode() == 'plain'\n"


@pytest.mark.slow
async def test_a_target_failing_only_through_state_earlier_tests_left_is_not_evidence(tmp_path: Path) -> None:
    """`test_mode_is_plain` fails in the whole-suite run on the starting tree (an earlier test left
    the environment variable set) and passes when its file runs alone: any patch touching `mode()` would
    "fix" it. Run again on the starting tree in the company it passes in, it passes: listed as
    order-dependent, not evidence, and the verdict is `unverified`."""
    repo = make_repo(
        tmp_path / "conf",
        {
            "conf.py": CONF,
            "pytest.ini": FAST_PYTEST,
            "tests/test_a_setup.py": TEST_SETUP,
            "tests/test_b_mode.py": TEST_MODE,
        },
    )
    patch = make_patch(
        repo,
        {
            "conf.py": CONF.replace(
                'return os.environ.get("APP_MODE", "plain")',
                'return str(os.environ.get("APP_MODE", "plain"))',
            )
        },
    )
    report = await verify_for_text(repo, patch, "mode() should say plain by default")
    assert report.verdict == "unverified", report.failures
    assert report.order_dependent == ["tests/test_b_mode.py::test_mode_is_plain"]
    assert report.evidence == [] and report.evidence_kind == "none"
    confirm = next(c for c in report.checks if c.name == "confirm_flips")
    assert "order-dependent" in confirm.summary


LOADER = "import json\n\n\ndef load(text):\n    return json.loads(text)\n"


def _loader_test(name: str) -> str:
    return f"from loader import load\n\n\ndef test_{name}():\n    assert load('{{bad')\n"


@pytest.mark.slow
async def test_a_crash_outside_the_project_failing_tests_everywhere_is_the_environments(
    tmp_path: Path,
) -> None:
    """Every test executes the changed function and fails, before the patch and after, with the same
    crash raised outside the repository (in the standard library here, as a dependency's warning
    turned error does): the environment's, not `test.still_failing` of the patch."""
    files = {f"tests/test_{n}.py": _loader_test(n) for n in ("one", "two")}
    files["tests/test_three.py"] = _loader_test("three")
    repo = make_repo(tmp_path / "loader", {"loader.py": LOADER, "pytest.ini": FAST_PYTEST, **files})
    patch = make_patch(repo, {"loader.py": LOADER.replace("json.loads(text)", "json.loads(text.strip())")})
    report = await verify_for_text(repo, patch, "load() should accept surrounding spaces")
    assert report.verdict == "unverified", report.failures
    assert report.still_failing == [] and report.regressions == []
    assert FailureClass.TEST_STILL_FAILING not in _classes(report)
