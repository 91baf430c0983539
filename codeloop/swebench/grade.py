"""Grading, by SWE-bench's own functions: its `TestSpec`, `get_logs_eval` and `get_eval_report`
(swebench 4.1.0's `harness/grading.py` and the repository's log parser), on a log in the shape
its eval script prints. Nothing here decides whether a test passed: only which tests are graded.

Tests left out of grading (`left_out`: listed tests a gold validation found this environment
cannot run, e.g. for want of network) are removed from FAIL_TO_PASS / PASS_TO_PASS before the
official report is made, and every report names them.
"""

from pathlib import Path
from typing import TYPE_CHECKING, Any

from codeloop.swebench.instances import Instance
from codeloop.swebench.official import swebench

if TYPE_CHECKING:  # swebench's own modules are loaded by `swebench()`, not imported
    from swebench.harness.test_spec.test_spec import TestSpec


def official_test_spec(instance: Instance, *, left_out: frozenset[str] = frozenset()) -> "TestSpec":
    """SWE-bench's `TestSpec` for grading `instance` (the image scripts, unused here, empty)."""
    modules = swebench()
    return modules.test_spec.TestSpec(
        instance_id=instance.instance_id,
        repo=instance.repo,
        version=instance.version,
        repo_script_list=[],
        eval_script_list=[],
        env_script_list=[],
        arch="x86_64",
        FAIL_TO_PASS=[t for t in instance.FAIL_TO_PASS if t not in left_out],
        PASS_TO_PASS=[t for t in instance.PASS_TO_PASS if t not in left_out],
        language=modules.constants.MAP_REPO_TO_EXT.get(instance.repo, "py"),
        docker_specs={},
        namespace=None,
    )


def grade(
    instance: Instance,
    prediction: dict[str, str | None],
    log_path: Path,
    *,
    left_out: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The official per-instance report, `{instance_id: {patch_is_None, patch_exists,
    patch_successfully_applied, resolved, tests_status}}`, for the log at `log_path`: SWE-bench's
    own, as untyped as its `get_eval_report` makes it (`tests_status` is there only when the
    patch applied)."""
    return swebench().grading.get_eval_report(
        official_test_spec(instance, left_out=left_out), prediction, str(log_path), include_tests_status=True
    )


def status_map(instance: Instance, log_path: Path) -> tuple[dict[str, str], bool]:
    """The official parser's test outcomes of the log, and whether the log holds a test run."""
    return swebench().grading.get_logs_eval(official_test_spec(instance), str(log_path))


def not_passing(instance: Instance, statuses: dict[str, str]) -> list[str]:
    """The listed tests (FAIL_TO_PASS, PASS_TO_PASS) that did not pass: failed, errored, or
    absent from the log. With the gold patch, these are what this environment cannot run."""
    passed = swebench().grading.test_passed
    skipped = swebench().constants.TestStatus.SKIPPED.value
    return [
        t
        for t in instance.FAIL_TO_PASS + instance.PASS_TO_PASS
        if not passed(t, statuses) and statuses.get(t) != skipped
    ]


def skipped(instance: Instance, statuses: dict[str, str]) -> list[str]:
    """Listed tests the run skipped (graded as neither passing nor failing, as officially)."""
    value = swebench().constants.TestStatus.SKIPPED.value
    return [t for t in instance.FAIL_TO_PASS + instance.PASS_TO_PASS if statuses.get(t) == value]
