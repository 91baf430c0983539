"""The verdict from the failures (the coder's feedback on revision is `agents.feedback`).

`failed` wins over `unverified`: a secret or a regression is wrong whether or not everything else
could be checked. `unverified` means the verifier could not judge (an environment failure, no
tests, nothing to cite, nothing showing the task's problem gone: `test.no_reproduction`) and is
never shown as a pass. `passed` needs, for a patch, evidence that the task's problem is gone (a
target test that failed before and passes with it, see `agents.roles.verifier.testing`) or, for an
answer, every citation found.
"""

from agents.failures import FailureClass, blame
from agents.messages.verification import Failure, Verdict


def decide(failures: list[Failure], *, judged: bool) -> Verdict:
    """`judged`: something could check the work (tests ran, or citations were checked)."""
    errors = [f for f in failures if f.severity == "error"]
    # Nothing wrong was found, but nothing showed the work right either.
    cannot_judge = (
        FailureClass.VERIFY_UNVERIFIABLE,
        FailureClass.BUDGET_WALL,
        FailureClass.TEST_NO_REPRODUCTION,
    )
    if any(blame(f.failure_class) != "environment" and f.failure_class not in cannot_judge for f in errors):
        return "failed"
    if errors or not judged:
        return "unverified"
    return "passed"
