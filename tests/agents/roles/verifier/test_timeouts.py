"""A run the task's deadline stops: the patch's timeout, or the deadline's (nothing shown)."""

import time
from datetime import UTC, datetime
from pathlib import Path

from agents.failures import FailureClass
from agents.roles.verifier.baseline import Knowledge
from agents.roles.verifier.state import Verification
from agents.roles.verifier.testing import deadline_failure, timeout_failure


def test_a_run_stopped_long_after_the_suite_took_before_the_patch_is_the_patchs_timeout() -> None:
    """The whole suite took 2 s on the starting tree; its targeted part ran 60 s with the patch:
    the patch hangs or crawls."""
    failure = timeout_failure("targeted_tests", 60.0, 2.0)
    assert failure.failure_class == FailureClass.TEST_TIMEOUT
    assert "did not finish within 60 s" in failure.message


def test_a_run_stopped_sooner_than_the_suite_took_before_the_patch_is_the_deadlines() -> None:
    """A suite that took 1232 s under coverage before the patch, its covering tests stopped after
    563 s: they may just need more time than was left — `unverified`, saying so."""
    failure = timeout_failure("targeted_tests", 563.0, 1232.0)
    assert failure.failure_class == FailureClass.VERIFY_UNVERIFIABLE
    assert "the deadline came first" in failure.message and "1232 s" in failure.message


def test_with_nothing_known_of_the_starting_tree_a_timeout_stays_the_patchs() -> None:
    assert timeout_failure("full_suite", 30.0, None).failure_class == FailureClass.TEST_TIMEOUT


def _stopped(patched_for: float | None, suite_s: float | None) -> Verification:
    run = Verification(
        workspace=Path("."),
        deadline=datetime.now(UTC),
        known=Knowledge.of(None, "0" * 40),
    )
    run.known.suite_duration_s = suite_s
    run.patched_since = None if patched_for is None else time.monotonic() - patched_for
    return run


def test_the_deadline_during_the_starting_trees_runs_shows_nothing_about_the_patch() -> None:
    """A candidate whose verification the deadline stopped while the starting tree's coverage run
    was still going (a large suite on a loaded machine) is `unverified`, never the patch's timeout."""
    failure = deadline_failure(_stopped(None, None))
    assert failure.failure_class == FailureClass.VERIFY_UNVERIFIABLE
    assert "before any test ran with the patch" in failure.message


def test_the_deadline_after_the_starting_tree_is_judged_by_the_time_with_the_patch() -> None:
    assert deadline_failure(_stopped(30.0, 600.0)).failure_class == FailureClass.VERIFY_UNVERIFIABLE
    assert deadline_failure(_stopped(900.0, 600.0)).failure_class == FailureClass.TEST_TIMEOUT
