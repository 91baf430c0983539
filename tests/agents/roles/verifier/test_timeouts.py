"""A run the task's deadline stops: the patch's timeout, or the deadline's (nothing shown)."""

from agents.failures import FailureClass
from agents.roles.verifier.testing import timeout_failure


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
