"""What the coder is told of a failed verification when it revises: the failures most telling
first (`order_failures`), one a line with a few lines of its stack (`revision_feedback`).

The verifier orders its report's failures so; the stage kinds word a report so for the coder's
revision and for a continuation's account. It depends on the report alone, so it sits below both
the roles and the orchestrator.
"""

from agents.failures import FailureClass
from agents.messages.verification import Failure, VerificationReport

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
