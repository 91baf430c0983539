"""verify_patch on real repositories, through a real exec server session and the real sandbox."""

import time
from pathlib import Path

import anyio
import pytest

from agents.failures import FailureClass
from agents.feedback import revision_feedback
from agents.roles.verifier.verify import PatchTask, verify_patch
from agents.runtime.tools import ToolProvider
from codeloop.testing import make_repo
from codeloop.wiring.tools import InProcessTools as WiredTools
from tests.agents.roles.verifier.conftest import (
    CALC,
    CALC_FIXED,
    FAST_PYTEST,
    GVISOR,
    NO_RUNSC,
    TEST_CALC,
    InProcessTools,
    deadline,
    git,
    make_patch,
)

pytestmark = pytest.mark.anyio

TARGET = "tests/test_calc.py::test_mul"


async def _verify(
    repo: Path,
    patch: str,
    tools: ToolProvider,
    *,
    plan_files=("calc.py",),
    test_targets=(TARGET,),
    mode="execute",
    **options,
):
    task = PatchTask(mode=mode, plan_files=plan_files, test_targets=test_targets)
    args = {"deadline": deadline(), "baseline": None} | options
    with anyio.fail_after(240):
        return await verify_patch(workspace=repo, patch=patch, task=task, tools=tools, **args)


def _classes(report) -> set[str]:
    return {f.failure_class for f in report.failures if f.severity == "error"}


@pytest.mark.gvisor
@pytest.mark.skipif(not GVISOR, reason=NO_RUNSC)
async def test_a_correct_fix_passes_in_gvisor(calc_repo: Path) -> None:
    """Our contract: a patch that fixes the failing target and breaks nothing is `passed`; the
    workspace is back at its starting tree afterwards."""
    patch = make_patch(calc_repo, {"calc.py": CALC_FIXED})
    report, baseline = await _verify(calc_repo, patch, InProcessTools(backend="gvisor"))
    assert report.verdict == "passed", report
    assert report.failures == [] and report.regressions == []
    assert report.tests_run >= 3
    assert {c.name for c in report.checks} >= {
        "patch",
        "diff_review",
        "static",
        "targeted_tests",
        "full_suite",
    }
    assert (calc_repo / "calc.py").read_text() == CALC
    assert git(calc_repo, "status", "--porcelain", "--untracked-files=no") == ""
    assert baseline.commit == git(calc_repo, "rev-parse", "HEAD").strip()


NEEDS_NETWORK = """\
import socket

from calc import mul


def test_mul_remote():
    socket.getaddrinfo("httpbin.org", 80)  # the sandbox has no network: this raises
    assert mul(2, 2) == 4
"""


@pytest.mark.gvisor
@pytest.mark.skipif(not GVISOR, reason=NO_RUNSC)
async def test_a_test_the_patch_adds_that_needs_a_network_is_the_environments_not_the_patchs(
    calc_repo: Path,
) -> None:
    """A test the patch adds that fails for want of a network, the same with and without the
    fix, shows nothing about the patch: listed as the environment's, while the target that went
    from failing to passing decides (`passed`)."""
    patch = make_patch(calc_repo, {"calc.py": CALC_FIXED, "tests/test_remote.py": NEEDS_NETWORK})
    report, _ = await _verify(calc_repo, patch, InProcessTools(backend="gvisor"))
    remote = "tests/test_remote.py::test_mul_remote"
    assert report.verdict == "passed", report.failures
    assert remote in report.preexisting and remote not in report.still_failing
    assert TARGET in report.evidence
    environment = next(c.summary for c in report.checks if c.name == "environment_failures")
    assert "Temporary failure in name resolution" in environment or "not known" in environment


async def test_a_fix_that_breaks_another_test_is_a_regression_naming_it(calc_repo: Path, tools) -> None:
    """A test that passed before the patch and fails with it is `test.regression`, with its id and file:line."""
    broken = CALC_FIXED.replace("return a + b\n", "return a - b\n", 1)
    patch = make_patch(calc_repo, {"calc.py": broken})
    report, _ = await _verify(calc_repo, patch, tools)
    assert report.verdict == "failed"
    regressions = [f for f in report.failures if f.failure_class == FailureClass.TEST_REGRESSION]
    assert {f.test_id for f in regressions} >= {"tests/test_calc.py::test_add"}
    add = next(f for f in regressions if f.test_id == "tests/test_calc.py::test_add")
    assert (add.path, add.line) == ("tests/test_calc.py", 5)
    assert "tests/test_calc.py::test_add" in report.regressions
    assert TARGET not in report.regressions


async def test_the_feedback_for_the_coder_leads_with_the_failing_test_and_its_location(
    calc_repo: Path, tools
) -> None:
    """Revision feedback: the failing test id and file:line come first, before warnings."""
    broken = CALC_FIXED.replace("return a + b\n", "return a - b\n", 1)
    report, _ = await _verify(calc_repo, make_patch(calc_repo, {"calc.py": broken}), tools)
    feedback = revision_feedback(report)
    first_failure = feedback.splitlines()[1]
    assert "tests/test_calc.py::test_add" in first_failure
    assert "tests/test_calc.py:5" in first_failure
    assert "test.regression" in first_failure


async def test_a_patch_that_deletes_the_failing_test_is_weakened_not_a_pass(calc_repo: Path, tools) -> None:
    """Removing the test that shows the bug is `test.weakened`, even though every remaining test passes."""
    without = TEST_CALC[: TEST_CALC.index("def test_mul")]
    report, _ = await _verify(calc_repo, make_patch(calc_repo, {"tests/test_calc.py": without}), tools)
    assert report.verdict == "failed"
    weakened = [f for f in report.failures if f.failure_class == FailureClass.TEST_WEAKENED]
    assert weakened and weakened[0].path == "tests/test_calc.py"
    assert "test_mul" in weakened[0].message


async def test_a_patch_that_skips_the_failing_test_is_weakened(calc_repo: Path, tools) -> None:
    """A skip marker added over the failing test is `test.weakened`, located at the marker."""
    skipped = "import pytest\n" + TEST_CALC.replace(
        "def test_mul", "@pytest.mark.skip(reason='flaky')\ndef test_mul"
    )
    report, _ = await _verify(calc_repo, make_patch(calc_repo, {"tests/test_calc.py": skipped}), tools)
    assert report.verdict == "failed"
    weakened = [f for f in report.failures if f.failure_class == FailureClass.TEST_WEAKENED]
    assert [(f.path, f.line) for f in weakened] == [("tests/test_calc.py", 9)]


async def test_a_preexisting_failure_is_not_blamed_on_the_patch(tmp_path: Path, tools) -> None:
    """A test failing on the starting tree and unrelated to the task is reported as pre-existing,
    and a correct fix still passes."""
    repo = make_repo(
        tmp_path / "legacy",
        {
            "calc.py": CALC,
            "pytest.ini": FAST_PYTEST,
            "tests/test_calc.py": TEST_CALC,
            "tests/test_legacy.py": "def test_legacy_format():\n    assert 'a' == 'b', 'broken for years'\n",
        },
    )
    report, baseline = await _verify(repo, make_patch(repo, {"calc.py": CALC_FIXED}), tools)
    assert report.verdict == "passed", report.failures
    assert report.preexisting == ["tests/test_legacy.py::test_legacy_format"]
    assert report.regressions == []
    # What the pass rests on: the target failed on the starting tree and passes with the patch.
    assert report.evidence == [TARGET]
    assert baseline.tests.outcomes == {
        "tests/test_legacy.py::test_legacy_format": "failed",
        TARGET: "failed",
    }


@pytest.mark.slow
async def test_the_returned_baseline_spares_the_rerun_on_a_revision(tmp_path: Path, tools) -> None:
    """A known starting outcome is not run again: the second verification has no baseline run
    and still tells the pre-existing failure from the patch's."""
    repo = make_repo(
        tmp_path / "legacy",
        {
            "calc.py": CALC,
            "pytest.ini": FAST_PYTEST,
            "tests/test_calc.py": TEST_CALC,
            "tests/test_legacy.py": "def test_legacy_format():\n    assert 'a' == 'b'\n",
        },
    )
    patch = make_patch(repo, {"calc.py": CALC_FIXED})
    _, baseline = await _verify(repo, patch, tools)
    report, again = await _verify(repo, patch, tools, baseline=baseline)
    assert report.verdict == "passed"
    assert report.preexisting == ["tests/test_legacy.py::test_legacy_format"]
    assert "baseline" not in {c.name for c in report.checks}
    assert again == baseline


async def test_a_syntax_error_is_static_syntax_with_its_location(calc_repo: Path, tools) -> None:
    """A changed file that does not parse is `static.syntax` at its file and line; tests do not run."""
    broken = CALC_FIXED.replace("def mul(a, b):", "def mul(a, b)")
    report, _ = await _verify(calc_repo, make_patch(calc_repo, {"calc.py": broken}), tools)
    assert report.verdict == "failed"
    syntax = [f for f in report.failures if f.failure_class == FailureClass.STATIC_SYNTAX]
    assert [(f.path, f.line) for f in syntax] == [("calc.py", 5)]
    assert report.tests_run == 0


async def test_a_patch_adding_a_secret_is_flagged_without_the_value(calc_repo: Path, tools) -> None:
    """A credential in an added line is `patch.secret` at its line; the report never holds the value."""
    key = "AKIA" + "Q7ZK3M5N2P4R6T8V"
    secret = CALC_FIXED + f'\n\nAWS_KEY = "{key}"\n'
    report, _ = await _verify(calc_repo, make_patch(calc_repo, {"calc.py": secret}), tools)
    assert report.verdict == "failed"
    found = [f for f in report.failures if f.failure_class == FailureClass.PATCH_SECRET]
    assert [(f.path, f.line) for f in found] == [("calc.py", 9)]
    assert key not in report.model_dump_json()


async def test_a_repository_without_tests_is_unverified(tmp_path: Path, tools) -> None:
    """No tests to run: the verdict is `unverified`, never `passed`."""
    repo = make_repo(tmp_path / "notests", {"calc.py": CALC})
    report, _ = await _verify(repo, make_patch(repo, {"calc.py": CALC_FIXED}), tools, test_targets=[])
    assert report.verdict == "unverified"
    assert FailureClass.VERIFY_UNVERIFIABLE in _classes(report)


@pytest.mark.slow  # waits out its deadline
async def test_a_hanging_suite_is_a_timeout_within_the_deadline(calc_repo: Path, tools) -> None:
    """A patch whose tests never finish gives `test.timeout` before the task's deadline passes."""
    hangs = CALC_FIXED.replace("return a * b", "while True:\n        pass")
    patch = make_patch(calc_repo, {"calc.py": hangs})
    started = time.monotonic()
    report, _ = await _verify(calc_repo, patch, tools, deadline=deadline(15))
    elapsed = time.monotonic() - started
    assert report.verdict == "failed"
    assert FailureClass.TEST_TIMEOUT in _classes(report)
    assert elapsed < 15
    assert (calc_repo / "calc.py").read_text() == CALC


@pytest.mark.slow  # spins until the CPU time limit kills it
async def test_a_suite_killed_at_the_configured_cpu_limit_says_which_limit_and_its_setting(
    tmp_path: Path,
) -> None:
    """The repository's `[sandbox]` limits reach the exec server the composition root builds, and
    a run the sandbox kills at one says which limit and the key that raises it. The starting
    tree's suite ran to its end under the same limit, so the patch is what spins: a timeout."""
    files = {
        "calc.py": CALC,
        "pytest.ini": FAST_PYTEST,
        "codeloop.toml": "[sandbox]\ncpu_time_s = 2\n",
        "tests/__init__.py": "",
        "tests/test_calc.py": TEST_CALC,
    }
    repo = make_repo(tmp_path / "calc", files)
    spins = CALC_FIXED.replace("return a * b", "while True:\n        pass")
    patch = make_patch(repo, {"calc.py": spins})
    started = time.monotonic()
    report, _ = await _verify(repo, patch, WiredTools(sandbox_backend="process"), deadline=deadline(60))
    assert time.monotonic() - started < 45  # killed at 2 CPU seconds, not at the deadline
    assert report.verdict == "failed"
    assert FailureClass.TEST_TIMEOUT in _classes(report)
    said = " ".join(f.message for f in report.failures)
    assert "killed at the CPU time limit of 2 s; [sandbox] cpu_time_s raises it" in said, said


@pytest.mark.slow  # spins until the CPU time limit kills it, on both trees
async def test_a_suite_that_outgrows_the_cpu_limit_before_the_patch_is_not_blamed_on_it(
    tmp_path: Path,
) -> None:
    """When the suite is killed at the CPU time limit on the starting tree too, the limit is the
    trouble, not the patch: `unverified`, the coverage check saying which limit stopped it."""
    slow = "def test_slow():\n    while True:\n        pass\n"
    files = {
        "calc.py": CALC,
        "pytest.ini": FAST_PYTEST,
        "codeloop.toml": "[sandbox]\ncpu_time_s = 2\n",
        "tests/__init__.py": "",
        "tests/test_calc.py": TEST_CALC + "\n\n" + slow,
    }
    repo = make_repo(tmp_path / "calc", files)
    patch = make_patch(repo, {"calc.py": CALC_FIXED})
    report, _ = await _verify(repo, patch, WiredTools(sandbox_backend="process"), deadline=deadline(60))
    assert report.verdict == "unverified"
    assert FailureClass.TEST_TIMEOUT not in _classes(report)
    coverage = next(c.summary for c in report.checks if c.name == "coverage")
    assert "pytest was killed at the CPU time limit of 2 s; [sandbox] cpu_time_s raises it" in coverage


async def test_a_test_the_patch_adds_must_fail_without_its_fix(calc_repo: Path, tools) -> None:
    """A reproducing test the patch adds fails on the old code and passes with the fix: `fixed`."""
    new_test = "from calc import mul\n\n\ndef test_mul_by_zero():\n    assert mul(5, 0) == 0\n"
    patch = make_patch(calc_repo, {"calc.py": CALC_FIXED, "tests/test_zero.py": new_test})
    report, _ = await _verify(calc_repo, patch, tools)
    assert report.verdict == "passed", report.failures
    assert report.fixed == ["tests/test_calc.py::test_mul", "tests/test_zero.py::test_mul_by_zero"]
    assert report.evidence == ["tests/test_calc.py::test_mul", "tests/test_zero.py::test_mul_by_zero"]
    assert next(c for c in report.checks if c.name == "evidence").ok


async def test_an_added_test_that_passes_without_the_fix_is_not_evidence(calc_repo: Path, tools) -> None:
    """The test the patch adds passes on the old code too: it shows nothing. The evidence is the
    test that executes the fixed function, failed before and passes now, though no plan names it."""
    new_test = "from calc import add\n\n\ndef test_add_zero():\n    assert add(5, 0) == 5\n"
    patch = make_patch(calc_repo, {"calc.py": CALC_FIXED, "tests/test_zero.py": new_test})
    report, _ = await _verify(calc_repo, patch, tools, test_targets=[])
    assert report.verdict == "passed", report.failures
    assert report.evidence == [TARGET]
    assert report.covering == [TARGET]


async def test_a_target_that_still_fails_fails_at_once_without_the_suite(calc_repo: Path, tools) -> None:
    """A failing plan target is `test.still_failing`, reported after the targeted run alone."""
    wrong = CALC.replace("return a + b  # the bug: should multiply", "return a * b + 1")
    report, _ = await _verify(calc_repo, make_patch(calc_repo, {"calc.py": wrong}), tools)
    assert report.verdict == "failed"
    still = [f for f in report.failures if f.failure_class == FailureClass.TEST_STILL_FAILING]
    assert [(f.test_id, f.path, f.line) for f in still] == [(TARGET, "tests/test_calc.py", 9)]
    assert "AssertionError" in still[0].message or "assert" in still[0].message
    assert next(c for c in report.checks if c.name == "full_suite").summary.startswith("not run")


@pytest.mark.parametrize(
    ("patch", "failure_class"),
    [
        ("this is not a diff\n", FailureClass.PATCH_MALFORMED),
        ("", FailureClass.PATCH_EMPTY),
        (
            "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n-def sub(a, b):\n+def add(a, b):\n     return a + b\n",
            FailureClass.PATCH_APPLY_FAILED,
        ),
    ],
)
async def test_a_patch_that_cannot_be_applied_says_why(
    calc_repo: Path, tools, patch: str, failure_class
) -> None:
    """Malformed, empty and non-applying patches each have their class; nothing is run or changed."""
    report, _ = await _verify(calc_repo, patch, tools)
    assert report.verdict == "failed"
    assert _classes(report) == {failure_class}
    assert tools.opened == []
    assert git(calc_repo, "status", "--porcelain") == ""


async def test_the_workspace_is_back_at_its_starting_tree_even_when_tests_write_tracked_files(
    tmp_path: Path, tools
) -> None:
    """A revision verifies on the same workspace: whatever the patch and its test runs changed, HEAD is restored."""
    writes = "from pathlib import Path\n\n\ndef test_writes():\n    Path('data.txt').write_text('changed')\n"
    repo = make_repo(
        tmp_path / "writes",
        {
            "calc.py": CALC,
            "pytest.ini": FAST_PYTEST,
            "data.txt": "original\n",
            "tests/test_writes.py": writes,
        },
    )
    report, _ = await _verify(repo, make_patch(repo, {"calc.py": CALC_FIXED}), tools, test_targets=[])
    # No test executes the changed code: judged, with nothing to check the change by.
    assert report.verdict == "unverified" and _classes(report) == {FailureClass.TEST_NO_REPRODUCTION}
    assert report.summary.startswith("unverified: no test executes the code the patch changes (calc.py)")
    assert (repo / "data.txt").read_text() == "original\n"
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""


async def test_a_workspace_not_at_its_starting_tree_is_not_judged(calc_repo: Path, tools) -> None:
    """Our contract with the caller: the workspace holds the starting tree; otherwise `env.infra`, unverified."""
    patch = make_patch(calc_repo, {"tests/test_calc.py": TEST_CALC + "\n"})
    (calc_repo / "calc.py").write_text(CALC_FIXED)
    report, _ = await _verify(calc_repo, patch, tools)
    assert report.verdict == "unverified"
    assert _classes(report) == {FailureClass.ENV_INFRA}


async def test_a_preexisting_failure_among_the_targeted_tests_does_not_stop_the_suite(
    tmp_path: Path, tools
) -> None:
    """An old failure beside the target is compared first; the patch is not blamed, the rest of
    the suite (which executes none of the changed code) is not run again, and every check of a
    passing patch is ok."""
    repo = make_repo(
        tmp_path / "beside",
        {
            "calc.py": CALC,
            "pytest.ini": FAST_PYTEST,
            "tests/test_calc.py": TEST_CALC
            + "\n\ndef test_div():\n    assert 1 / 2 == 0, 'integer division, once'\n",
            "tests/test_other.py": "def test_other():\n    assert True\n",
        },
    )
    report, _ = await _verify(repo, make_patch(repo, {"calc.py": CALC_FIXED}), tools)
    assert report.verdict == "passed", report.failures
    assert report.preexisting == ["tests/test_calc.py::test_div"]
    suite = next(c for c in report.checks if c.name == "full_suite")
    assert "execute none of the changed code" in suite.summary
    assert all(c.ok for c in report.checks), report.checks


async def test_a_patch_in_read_mode_is_out_of_scope_and_not_run(calc_repo: Path, tools) -> None:
    """Read mode allows no changes: the patch fails as `patch.out_of_scope` without a sandbox."""
    report, _ = await _verify(calc_repo, make_patch(calc_repo, {"calc.py": CALC_FIXED}), tools, mode="read")
    assert report.verdict == "failed"
    assert _classes(report) == {FailureClass.PATCH_OUT_OF_SCOPE}
    assert tools.opened == []


async def test_adding_a_test_beside_an_old_failure_holds_the_patch_to_it(calc_repo: Path, tools) -> None:
    """A test-only patch that adds a test to a file where another test already failed: a test of a
    file the patch touches that failed at the start is the task's (checked on the starting tree
    to tell it from a regression), so it still failing fails the patch."""
    added = TEST_CALC + "\n\ndef test_add_zero():\n    assert add(5, 0) == 5\n"
    patch = make_patch(calc_repo, {"tests/test_calc.py": added})
    report, _ = await _verify(
        calc_repo,
        patch,
        tools,
        plan_files=["tests/test_calc.py"],
        test_targets=["tests/test_calc.py::test_add_zero"],
    )
    assert report.verdict == "failed", report.failures
    assert report.still_failing == [TARGET] and report.regressions == [] and report.preexisting == []
    assert _classes(report) == {FailureClass.TEST_STILL_FAILING}
    assert any(c.name == "baseline" and "left alone" in c.summary for c in report.checks), report.checks
    assert git(calc_repo, "status", "--porcelain", "--untracked-files=no") == ""


async def test_a_test_file_edit_that_breaks_a_test_it_left_alone_is_a_regression(
    tmp_path: Path, tools
) -> None:
    """The starting tree, not the patched test file, says what an untouched test did before: a
    module-level change that breaks it is the patch's regression."""
    tests = "from calc import add\n\nBASE = 2\n\n\ndef test_add():\n    assert add(BASE, 3) == 5\n"
    repo = make_repo(
        tmp_path / "fixture", {"calc.py": CALC, "pytest.ini": FAST_PYTEST, "tests/test_calc.py": tests}
    )
    edited = tests.replace("BASE = 2", "BASE = 3") + "\n\ndef test_add_one():\n    assert add(1, 1) == 2\n"
    patch = make_patch(repo, {"tests/test_calc.py": edited})
    report, _ = await _verify(
        repo,
        patch,
        tools,
        plan_files=["tests/test_calc.py"],
        test_targets=["tests/test_calc.py::test_add_one"],
    )
    assert report.verdict == "failed"
    assert report.regressions == ["tests/test_calc.py::test_add"]
    assert report.preexisting == [] and report.still_failing == []
