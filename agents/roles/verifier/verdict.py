"""The verdict from the failures, and the compact feedback the coder gets on revision.

`failed` wins over `unverified`: a secret or a regression is wrong whether or not everything else
could be checked. `unverified` means the verifier could not judge (an environment failure, no
tests, nothing to cite, nothing showing the task's problem gone: `test.no_reproduction`) and is
never shown as a pass. `passed` needs, for a patch, evidence that the task's problem is gone (a
target test that failed before and passes with it, see `agents.roles.verifier.testing`) or, for an
answer, every citation found.
"""

from agents.failures import FailureClass, blame
from agents.messages.verification import Failure, Verdict, VerificationReport

FEEDBACK_CHARS = 4000
STACK_LINES = 6
_TEST_FIRST = (
    FailureClass.TEST_REGRESSION,
    FailureClass.TEST_STILL_FAILING,
    FailureClass.TEST_TIMEOUT,
    FailureClass.STATIC_SYNTAX,
    FailureClass.TEST_WEAKENED,
)


def order_failures(failures: list[Failure]) -> list[Failure]:
    """Errors before warnings; test failures and syntax errors first within each."""

    def rank(f: Failure) -> tuple[int, int, str, int]:
        cls = FailureClass(f.failure_class)
        first = _TEST_FIRST.index(cls) if cls in _TEST_FIRST else len(_TEST_FIRST)
        return (f.severity != "error", first, f.path or "", f.line or 0)

    return sorted(failures, key=rank)


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


def _location(f: Failure) -> str:
    if f.path and f.line:
        return f"{f.path}:{f.line}"
    return f.path or ""


def revision_feedback(report: VerificationReport) -> str:
    """What the coder is told on revision: the failing test ids and locations first, one failure a
    line, each with a few lines of its stack; warnings last; at most `FEEDBACK_CHARS` characters."""
    head = (
        report.summary if report.summary.startswith(report.verdict) else f"{report.verdict}: {report.summary}"
    )
    lines = [f"Verification {head}".rstrip(": ")]
    failures = order_failures(list(report.failures))
    for f in failures:
        where = _location(f)
        head = f"- [{f.failure_class}]"
        if f.test_id:
            head += f" {f.test_id}"
        if where:
            head += f" at {where}"
        if f.severity == "warning":
            head += " (warning)"
        lines.append(f"{head}: {f.message}")
        if f.stack_summary:
            stack = [s for s in f.stack_summary.splitlines() if s.strip()][-STACK_LINES:]
            lines += [f"    {s}" for s in stack]
    if report.preexisting:
        lines.append(f"Failing before the patch too (not blamed): {', '.join(report.preexisting[:10])}")
    text = "\n".join(lines)
    return text if len(text) <= FEEDBACK_CHARS else text[: FEEDBACK_CHARS - 20] + "\n[... trimmed ...]"
